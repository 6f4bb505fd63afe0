package userdata

import (
	"bytes"
	"fmt"
	"mime"
	"regexp"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Kind says what a part of the user data is.
type Kind string

// The kinds of part nodeadm recognises.
const (
	KindNodeConfig   Kind = "NodeConfig"
	KindShell        Kind = "shell script"
	KindCloudConfig  Kind = "cloud-config"
	KindBottlerocket Kind = "Bottlerocket settings"
	KindPowerShell   Kind = "PowerShell (Windows)"
	KindNodeJoin     Kind = "NodeJoinConfig"
	KindOther        Kind = "other"
	KindEmpty        Kind = "empty"
)

// Part is one piece of user data: a MIME part, or the whole user data when it is not
// multipart.
type Part struct {
	// Source names the user data the part belongs to, such as "user data" or a file.
	Source string
	// Index is the part's 1-based position in the MIME document; 0 when the user data
	// is not multipart.
	Index int
	// Line is the line of the part's headers in the decoded user data (1 when not multipart).
	Line int
	// ContentType is the declared media type, or "" when there is none.
	ContentType string
	Kind        Kind
	// Layers lists the wrappers removed from the body (base64, gzip), outermost first.
	Layers []string
	Body   []byte
	// Notes are warnings about the part's form.
	Notes []string
}

// Name names the part in messages.
func (p *Part) Name() string {
	src := p.Source
	if src == "" {
		src = "user data"
	}
	if p.Index == 0 {
		return src
	}
	return fmt.Sprintf("%s part %d", src, p.Index)
}

// Document is decoded user data.
type Document struct {
	// Source names the user data in messages.
	Source string
	// Layers lists the wrappers removed from the whole user data, outermost first.
	Layers    []string
	Multipart bool
	Parts     []Part
	// Notes are warnings about the document's form.
	Notes []string
}

// Split decodes the wrappers and the MIME structure of user data and says what each
// part is. It does not interpret the parts; Translate does.
func Split(data []byte) (*Document, error) { return SplitNamed(data, "user data") }

// SplitNamed is Split for data that messages should call source, such as a file path.
func SplitNamed(data []byte, source string) (*Document, error) {
	doc, err := split(data)
	if err != nil {
		if source != "user data" {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return nil, err
	}
	doc.Source = source
	for i := range doc.Parts {
		doc.Parts[i].Source = source
	}
	return doc, nil
}

func split(data []byte) (*Document, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("user data is %d bytes, more than the %d accepted", len(data), MaxSize)
	}
	body, layers, err := unwrap(data, "user data")
	if err != nil {
		return nil, err
	}
	doc := &Document{Layers: layers}
	if _, ok := isMultipart(body); ok {
		raws, notes, err := splitMultipart(body)
		if err != nil {
			return nil, err
		}
		doc.Multipart, doc.Notes = true, notes
		for i, r := range raws {
			p := Part{Index: i + 1, Line: r.line, Notes: r.notes}
			mt := r.headers["Content-Type"]
			if mt != "" {
				if parsed, _, err := mime.ParseMediaType(mt); err == nil {
					mt = parsed
				}
			}
			p.ContentType = mt
			b, enc, err := bodyEncoding(r, p.Name())
			if err != nil {
				return nil, err
			}
			if enc != "" {
				p.Layers = append(p.Layers, enc)
			}
			b, more, err := unwrap(b, p.Name())
			if err != nil {
				return nil, err
			}
			p.Layers = append(p.Layers, more...)
			p.Body = b
			p.Kind = classify(mt, b)
			doc.Parts = append(doc.Parts, p)
		}
		return doc, nil
	}
	doc.Parts = []Part{{Line: 1, Body: body, Kind: classify("", body)}}
	return doc, nil
}

var (
	bootstrapCallRE = regexp.MustCompile(`(?m)(^|[\s;&|/])bootstrap\.sh(\s|$)`)
	nodeConfigRE    = regexp.MustCompile(`(?m)^\s*(kind:\s*NodeConfig|"kind"\s*:\s*"NodeConfig")|node\.eks\.aws/`)
	bottlerocketRE  = regexp.MustCompile(`(?m)^\s*(\[settings[.\]]|settings\.[A-Za-z0-9-]+)`)
)

// classify decides what a body is from its media type, and from its content when the
// media type does not say.
func classify(mediaType string, body []byte) Kind {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return KindEmpty
	}
	switch strings.ToLower(mediaType) {
	case v1alpha1.MediaType:
		return KindNodeConfig
	case nodejoinv1alpha1.MediaType:
		return KindNodeJoin
	case "text/x-shellscript", "text/x-sh", "application/x-sh":
		return KindShell
	case "text/cloud-config":
		return KindCloudConfig
	case "application/toml":
		return KindBottlerocket
	}
	first, _, _ := bytes.Cut(trimmed, []byte("\n"))
	first = bytes.TrimSpace(first)
	switch {
	case bytes.HasPrefix(first, []byte("#cloud-config")):
		return KindCloudConfig
	case bytes.HasPrefix(bytes.ToLower(first), []byte("<powershell>")):
		return KindPowerShell
	case bytes.HasPrefix(first, []byte("#!")):
		return KindShell
	case nodeConfigRE.Match(trimmed):
		return KindNodeConfig
	case bottlerocketRE.Match(trimmed):
		return KindBottlerocket
	case bootstrapCallRE.Match(trimmed):
		return KindShell
	}
	return KindOther
}
