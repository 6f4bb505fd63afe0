package userdata

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
)

// Boundary is the MIME boundary of generated user data, as EKS and eksctl use it.
const Boundary = "//"

// Media types of user-data parts.
const (
	mediaShell      = `text/x-shellscript; charset="us-ascii"`
	mediaNodeConfig = "application/node.eks.aws"
	mediaNodeJoin   = "application/nodejoin.io"
	mediaCloudCfg   = "text/cloud-config"
)

// part is one MIME part: its headers (in order) and body.
type part struct {
	headers [][2]string
	body    string
}

func newPart(contentType, body string) part {
	return part{headers: [][2]string{{"Content-Type", contentType}}, body: body}
}

// writeMIME writes a multipart/mixed document with LF line endings. The boundary is
// quoted, as EKS writes it: "/" is not allowed in an unquoted MIME parameter (eksctl
// leaves it unquoted because its real boundaries are random hex; its tests force "//").
func writeMIME(parts []part) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n", Boundary)
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\n", Boundary)
		for _, h := range p.headers {
			fmt.Fprintf(&b, "%s: %s\n", h[0], h[1])
		}
		b.WriteString("\n")
		b.WriteString(p.body)
		if !strings.HasSuffix(p.body, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--%s--\n", Boundary)
	return b.Bytes()
}

// tokenPart carries a bootstrap token the way nodeadm reads it.
func tokenPart(token string) []part {
	if token == "" {
		return nil
	}
	return []part{newPart(mediaNodeJoin, "apiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: "+token+"\n")}
}

// shellParts makes one shell-script part per command, as eksctl does.
func shellParts(commands []string) []part {
	var parts []part
	for _, c := range commands {
		parts = append(parts, newPart(mediaShell, "#!/bin/bash\n"+c+"\n"))
	}
	return parts
}

// isMIME reports whether user data starts with MIME headers.
func isMIME(data string) bool {
	s := strings.TrimLeft(data, "\r\n\t ")
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "mime-version:") || strings.HasPrefix(l, "content-type:")
}

// ErrNotMIME is the error EKS gives for managed-group user data that is not MIME.
var ErrNotMIME = errors.New("user data was not in the MIME multipart format: EKS managed node groups merge only MIME multi-part user data (Amazon Linux) or TOML (Bottlerocket)")

// userParts splits the user's MIME user data into its parts, keeping each part's
// headers; carriage returns are dropped. A part's own base64 encoding is kept as it is.
func userParts(data string) ([]part, error) {
	data = strings.ReplaceAll(strings.TrimLeft(data, "\r\n\t "), "\r", "")
	msg, err := mail.ReadMessage(bufio.NewReader(strings.NewReader(data)))
	if err != nil {
		return nil, fmt.Errorf("user data: reading the MIME headers: %w", err)
	}
	mt, params, err := parseContentType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("user data: Content-Type %q: %w", msg.Header.Get("Content-Type"), err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		// A single-part MIME document: its body is the one part.
		body, err := io.ReadAll(msg.Body)
		if err != nil {
			return nil, fmt.Errorf("user data: %w", err)
		}
		return []part{{headers: partHeaders(textproto.MIMEHeader(msg.Header)), body: string(body)}}, nil
	}
	if params["boundary"] == "" {
		return nil, fmt.Errorf("user data: Content-Type %q has no boundary", msg.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var parts []part
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("user data part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("user data part %d: %w", len(parts)+1, err)
		}
		parts = append(parts, part{headers: partHeaders(p.Header), body: string(body)})
	}
	return parts, nil
}

// partHeaders keeps a part's content headers, in a fixed order.
func partHeaders(h textproto.MIMEHeader) [][2]string {
	var out [][2]string
	for _, k := range []string{"Content-Type", "Content-Transfer-Encoding", "Content-Disposition", "Merge-Type"} {
		for _, v := range h.Values(k) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// parseContentType parses a Content-Type as cloud-init does: more leniently than
// mime.ParseMediaType, which refuses an unquoted boundary holding a special character
// (boundary=//, as in AWS's own examples of launch template user data).
func parseContentType(v string) (string, map[string]string, error) {
	mt, params, err := mime.ParseMediaType(v)
	if err == nil {
		return mt, params, nil
	}
	head, rest, _ := strings.Cut(v, ";")
	mt = strings.ToLower(strings.TrimSpace(head))
	if !strings.HasPrefix(mt, "multipart/") {
		return "", nil, err
	}
	params = map[string]string{}
	for _, p := range strings.Split(rest, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "boundary") {
			params["boundary"] = strings.Trim(strings.TrimSpace(val), `"`)
		}
	}
	if params["boundary"] == "" {
		return "", nil, err
	}
	return mt, params, nil
}
