package userdata

import (
	"bytes"
	"fmt"
	"mime"
	"regexp"
	"strings"
)

// rawPart is one part of a MIME multipart document, before its body is decoded.
type rawPart struct {
	headers map[string]string // canonical header name → value
	body    []byte
	line    int // line of the part's first header, in the whole document
	notes   []string
}

// Limits of a part's header block.
const (
	maxHeaderLines = 64
	maxHeaderBytes = 16 << 10
)

var headerLineRE = regexp.MustCompile(`^([!-9;-~]+):[ \t]*(.*)$`)

// mimeHeaders are the header names a user-data part can carry. A line that looks like
// a header but names none of these is ambiguous when no blank line ends the headers.
var mimeHeaders = map[string]bool{
	"Content-Type": true, "Content-Transfer-Encoding": true, "Content-Disposition": true,
	"Content-Id": true, "Content-Description": true, "Mime-Version": true, "Merge-Type": true,
	"Content-Language": true, "Content-Length": true,
}

func canonical(name string) string {
	parts := strings.Split(strings.ToLower(name), "-")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}

func knownHeader(name string) bool {
	c := canonical(name)
	return mimeHeaders[c] || strings.HasPrefix(c, "X-")
}

// splitLines splits data into lines without their endings; CRLF and LF both end a line.
func splitLines(data []byte) []string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// readHeaders reads header lines from lines[start:] and returns the headers and the
// index of the first body line. A body that starts right after the headers, with no
// blank line, is accepted when its first line cannot be a header (such as "#!/bin/bash"
// or "---"); otherwise it is an error that says where to put the blank line.
func readHeaders(lines []string, start, lineOffset int, where string) (map[string]string, int, []string, error) {
	headers := map[string]string{}
	var notes []string
	last := ""
	size := 0
	for i := start; i < len(lines); i++ {
		l := lines[i]
		if l == "" {
			return headers, i + 1, notes, nil
		}
		// Bound the header block: folded lines would otherwise grow one value without end.
		if size += len(l); size > maxHeaderBytes || i-start >= maxHeaderLines {
			return nil, 0, nil, fmt.Errorf("%s, line %d: the MIME headers run on for more than %d lines or %d bytes; a blank line must end them", where, lineOffset+i+1, maxHeaderLines, maxHeaderBytes)
		}
		if (l[0] == ' ' || l[0] == '\t') && last != "" {
			headers[last] += " " + strings.TrimSpace(l)
			continue
		}
		m := headerLineRE.FindStringSubmatch(l)
		switch {
		case m != nil && knownHeader(m[1]):
			last = canonical(m[1])
			headers[last] = strings.TrimSpace(m[2])
		case len(headers) == 0:
			return nil, 0, nil, fmt.Errorf("%s, line %d: expected MIME headers such as Content-Type, found %q", where, lineOffset+i+1, clip(l))
		case m == nil:
			notes = append(notes, fmt.Sprintf("line %d: no blank line between the headers and the body; the body is taken to start at %q (add a blank line after the headers: other tools, nodeadm among them, reject this part)", lineOffset+i+1, clip(l)))
			return headers, i, notes, nil
		default:
			return nil, 0, nil, fmt.Errorf("%s, line %d: %q follows the part's headers without a blank line, and could be a header or the start of the body; add a blank line after the headers", where, lineOffset+i+1, clip(l))
		}
	}
	return headers, len(lines), notes, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

var looseBoundaryRE = regexp.MustCompile(`(?i)^\s*(multipart/[a-z0-9.+-]+)\s*;\s*boundary=([^";\s]+)\s*$`)

// parseMediaType is mime.ParseMediaType, also accepting an unquoted boundary with
// characters MIME wants quoted ("boundary=//"), which cloud-init accepts and eksctl's
// tests write.
func parseMediaType(v string) (string, map[string]string, error) {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		if m := looseBoundaryRE.FindStringSubmatch(v); m != nil {
			return strings.ToLower(m[1]), map[string]string{"boundary": m[2]}, nil
		}
	}
	return mt, params, err
}

// isMultipart reports whether data starts with MIME headers declaring a multipart
// document, and returns its boundary.
func isMultipart(data []byte) (string, bool) {
	lines := splitLines(data)
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	headers, _, _, err := readHeaders(lines, 0, 0, "user data")
	if err != nil {
		return "", false
	}
	mt, params, err := parseMediaType(headers["Content-Type"])
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return "", false
	}
	return params["boundary"], true
}

// splitMultipart splits a multipart document into its parts.
func splitMultipart(data []byte) ([]rawPart, []string, error) {
	lines := splitLines(data)
	first := 0
	for first < len(lines) && strings.TrimSpace(lines[first]) == "" {
		first++
	}
	headers, bodyStart, notes, err := readHeaders(lines, first, 0, "user data")
	if err != nil {
		return nil, nil, err
	}
	ct := headers["Content-Type"]
	_, params, err := parseMediaType(ct)
	if err != nil {
		return nil, nil, fmt.Errorf("user data, line %d: Content-Type %q: %w", first+1, ct, err)
	}
	boundary := params["boundary"]
	if boundary == "" {
		return nil, nil, fmt.Errorf("user data, line %d: Content-Type %q has no boundary parameter", first+1, ct)
	}
	delim, closeDelim := "--"+boundary, "--"+boundary+"--"

	var parts []rawPart
	var cur []string
	curStart := -1
	closed := false
	flush := func() error {
		if curStart < 0 {
			return nil
		}
		p, err := parsePart(cur, curStart, len(parts)+1)
		if err != nil {
			return err
		}
		parts = append(parts, p)
		return nil
	}
	sawDelim := false
	for i := bodyStart; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t")
		switch {
		case l == closeDelim:
			if err := flush(); err != nil {
				return nil, nil, err
			}
			curStart, cur, closed, sawDelim = -1, nil, true, true
			// Text after the closing boundary is an epilogue, which MIME ignores. If it
			// holds what looks like another part, say so and take it: the author meant it.
			if next := partAfterClose(lines, i+1); next >= 0 {
				notes = append(notes, fmt.Sprintf("line %d: a part follows the closing boundary %q on line %d; it is taken as part %d (write %q, without the trailing --, between parts)", next+1, closeDelim, i+1, len(parts)+1, delim))
				closed, curStart, cur = false, next, nil
				i = next - 1
			} else {
				i = len(lines)
			}
		case l == delim:
			if err := flush(); err != nil {
				return nil, nil, err
			}
			curStart, cur, sawDelim = i+1, nil, true
		case curStart >= 0:
			cur = append(cur, lines[i])
		}
	}
	if !sawDelim {
		return nil, nil, fmt.Errorf("user data: no line %q starts a part: the boundary in Content-Type (%q) does not match the document", delim, boundary)
	}
	if !closed {
		if err := flush(); err != nil {
			return nil, nil, err
		}
		notes = append(notes, fmt.Sprintf("the closing boundary %q is missing; the last part runs to the end of the user data", closeDelim))
	}
	return parts, notes, nil
}

// partAfterClose returns the index of a "Content-Type:" line that starts, after blank
// lines, at lines[from:], or -1.
func partAfterClose(lines []string, from int) int {
	for j := from; j < len(lines); j++ {
		switch {
		case strings.TrimSpace(lines[j]) == "":
		case strings.HasPrefix(strings.ToLower(lines[j]), "content-type:"):
			return j
		default:
			return -1
		}
	}
	return -1
}

func parsePart(lines []string, start, index int) (rawPart, error) {
	where := fmt.Sprintf("user data part %d", index)
	headers, bodyStart, notes, err := readHeaders(lines, 0, start, where)
	if err != nil {
		return rawPart{}, err
	}
	body := strings.Join(lines[bodyStart:], "\n")
	body = strings.TrimRight(body, "\n") + "\n"
	if strings.TrimSpace(body) == "" {
		body = ""
	}
	return rawPart{headers: headers, body: []byte(body), line: start + 1, notes: notes}, nil
}

// bodyEncoding applies a part's Content-Transfer-Encoding.
func bodyEncoding(p rawPart, where string) ([]byte, string, error) {
	switch enc := strings.ToLower(p.headers["Content-Transfer-Encoding"]); enc {
	case "", "7bit", "8bit", "binary":
		return p.body, "", nil
	case "base64":
		out, err := decodeBase64(bytes.TrimSpace(p.body))
		if err != nil {
			return nil, "", fmt.Errorf("%s: Content-Transfer-Encoding is base64, but the body is not: %w", where, err)
		}
		return out, "base64", nil
	default:
		return nil, "", fmt.Errorf("%s: Content-Transfer-Encoding %q is not supported (use base64, or none)", where, enc)
	}
}
