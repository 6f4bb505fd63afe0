// Package strictyaml decodes one user-supplied YAML or JSON document into a Go type
// strictly: unknown fields, duplicate keys, values of the wrong type and a wrong
// apiVersion or kind are errors that name the source, the line, the field path and,
// for a misspelt field, the nearest known name. Every unknown field and duplicate key
// is reported, not only the first. It owns the error type of that decoding; it imports
// only the YAML libraries and internal/editdistance.
package strictyaml

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Error is a problem in a document, located as precisely as possible.
type Error struct {
	// Source names the document, such as a file path or "user data part 2".
	Source string
	// Line is the 1-based line in the source, 0 when unknown.
	Line int
	// Field is the path of the field, such as "managedNodeGroups[0].minSize", when known.
	Field string
	// Msg says what is wrong.
	Msg string
	// Hint says what to do about it, when there is something obvious.
	Hint string
	// Err is the sentinel the error wraps, such as ErrWrongKind, or nil.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ", line %d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

// Unwrap returns the sentinel, if any.
func (e *Error) Unwrap() error { return e.Err }

// ErrWrongKind reports a well-formed document of another kind or API group than wanted.
var ErrWrongKind = errors.New("wrong kind")

// Options say what a document must be and how to decode it.
type Options struct {
	// APIVersion and Kind, when set, are what the document's apiVersion and kind must
	// be. An apiVersion of the same group but another version is reported as an
	// unsupported version; another group or kind wraps ErrWrongKind.
	APIVersion, Kind string
	// MultiDocHint is the hint given when the source holds more than one document.
	MultiDocHint string
	// NoteTag names a struct tag (such as "ignore") marking fields that are accepted
	// but not used: every leaf under such a field is returned in Doc.Notes with the
	// tag's value as reason.
	NoteTag string
	// UseNumber keeps numbers in interface values as json.Number (20, not 20.0).
	UseNumber bool
	// Base64Hint is the hint for a []byte field whose value is not base64.
	Base64Hint string
}

// Note is a field present in the document that is tagged Options.NoteTag.
type Note struct {
	// Field is its path, such as "managedNodeGroups[0].ssh.allow".
	Field string
	// Line is its 1-based line.
	Line int
	// Value is the value as written, for scalars and lists of scalars.
	Value string
	// Reason is the tag's value.
	Reason string
}

// Doc is a decoded document's YAML tree, for locating fields after decoding.
type Doc struct {
	root  *yamlv3.Node
	bytes []string // paths of []byte fields, which JSON wants base64
	// Notes are the leaves of noted fields, in document order.
	Notes []Note
}

// Line gives the line of the field at path (dotted, with [i] indexes; "" for
// the document itself), 0 if absent.
func (d *Doc) Line(path string) int {
	if d == nil || d.root == nil {
		return 0
	}
	if path == "" {
		return d.root.Line
	}
	if n := nodeAt(d.root, path); n != nil {
		return n.Line
	}
	return 0
}

// Decode parses data, which must hold one YAML or JSON document, into out (a pointer).
// The document must be an object when out is a struct or map, or when opts want an
// apiVersion and kind.
func Decode(data []byte, source string, out any, opts Options) (*Doc, error) {
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, syntaxError(source, err)
	}
	var extra yamlv3.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Source: source, Line: extra.Line, Msg: "more than one YAML document", Hint: opts.MultiDocHint}
	}
	doc, err := check(&root, source, out, opts)
	if err != nil {
		return nil, err
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, syntaxError(source, err)
	}
	return doc, decodeJSON(js, doc, source, out, opts)
}

// Document is one document of a YAML stream.
type Document struct {
	// Index is its 1-based position in the stream.
	Index int
	// Line is the line it starts on.
	Line int
	node *yamlv3.Node
}

// Head returns the document's apiVersion and kind, empty when absent.
func (d *Document) Head() (apiVersion, kind string) {
	root := docRoot(d.node)
	if root.Kind != yamlv3.MappingNode {
		return "", ""
	}
	apiVersion, _ = scalar(root, "apiVersion")
	kind, _ = scalar(root, "kind")
	return apiVersion, kind
}

// Split parses a stream of YAML documents, leaving out empty ones (as between two
// "---").
func Split(data []byte, source string) ([]Document, error) {
	var docs []Document
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for i := 1; ; i++ {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, syntaxError(source, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yamlv3.ScalarNode && n.Content[0].Tag == "!!null" {
			continue
		}
		docs = append(docs, Document{Index: i, Line: n.Line, node: &n})
	}
}

// DecodeDocument decodes one document of a stream, as Decode does.
func DecodeDocument(d Document, source string, out any, opts Options) (*Doc, error) {
	doc, err := check(d.node, source, out, opts)
	if err != nil {
		return nil, err
	}
	raw, err := yamlv3.Marshal(d.node)
	if err != nil {
		return nil, &Error{Source: source, Line: d.Line, Msg: err.Error()}
	}
	js, err := sigsyaml.YAMLToJSON(raw)
	if err != nil {
		return nil, syntaxError(source, err)
	}
	return doc, decodeJSON(js, doc, source, out, opts)
}

// check compares the tree with out's type: type meta, duplicates, unknown fields.
func check(root *yamlv3.Node, source string, out any, opts Options) (*Doc, error) {
	doc := docRoot(root)
	typed := opts.APIVersion != "" || opts.Kind != ""
	if k := indirect(reflect.TypeOf(out)).Kind(); doc.Kind != yamlv3.MappingNode && (typed || k == reflect.Struct || k == reflect.Map) {
		return nil, &Error{Source: source, Line: doc.Line, Msg: "not a YAML or JSON object"}
	}
	if typed {
		if err := checkTypeMeta(doc, source, opts.APIVersion, opts.Kind); err != nil {
			return nil, err
		}
	}
	w := &walker{source: source, noteTag: opts.NoteTag}
	w.duplicates(doc, "")
	w.walk(doc, reflect.TypeOf(out), "", "")
	if len(w.errs) > 0 {
		return nil, errors.Join(w.errs...)
	}
	return &Doc{root: doc, Notes: w.notes, bytes: w.bytes}, nil
}

func decodeJSON(js []byte, doc *Doc, source string, out any, opts Options) error {
	jd := json.NewDecoder(bytes.NewReader(js))
	jd.DisallowUnknownFields()
	if opts.UseNumber {
		jd.UseNumber()
	}
	if err := jd.Decode(out); err != nil {
		return jsonError(doc, source, err, opts)
	}
	return nil
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func docRoot(n *yamlv3.Node) *yamlv3.Node {
	if n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

func checkTypeMeta(doc *yamlv3.Node, source, wantAPIVersion, wantKind string) error {
	apiVersion, avNode := scalar(doc, "apiVersion")
	kind, kindNode := scalar(doc, "kind")
	group, _, _ := strings.Cut(wantAPIVersion, "/")
	switch {
	case avNode == nil:
		return &Error{Source: source, Line: doc.Line, Field: "apiVersion", Msg: "missing", Hint: "want apiVersion: " + wantAPIVersion}
	case kindNode == nil:
		return &Error{Source: source, Line: doc.Line, Field: "kind", Msg: "missing", Hint: "want kind: " + wantKind}
	case kind != wantKind || !strings.HasPrefix(apiVersion, group+"/"):
		return &Error{
			Source: source, Line: kindNode.Line, Err: ErrWrongKind,
			Msg:  fmt.Sprintf("not a %s: kind %q of apiVersion %q", wantKind, kind, apiVersion),
			Hint: fmt.Sprintf("want apiVersion: %s, kind: %s", wantAPIVersion, wantKind),
		}
	case apiVersion != wantAPIVersion:
		return &Error{Source: source, Line: avNode.Line, Field: "apiVersion", Msg: fmt.Sprintf("version %q is not supported", apiVersion), Hint: "want " + wantAPIVersion}
	}
	return nil
}

func scalar(m *yamlv3.Node, key string) (string, *yamlv3.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Value, m.Content[i+1]
		}
	}
	return "", nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func syntaxError(source string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(yamlLineRE.ReplaceAllString(msg, ""))
		msg = strings.TrimPrefix(msg, ": ")
	}
	return &Error{Source: source, Line: line, Msg: "syntax error: " + msg}
}

// jsonError turns a decoding error into an Error located in the YAML tree. An error
// of the target's own UnmarshalJSON is kept as the Error's Err.
func jsonError(doc *Doc, source string, err error, opts Options) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		e := &Error{Source: source, Field: field, Msg: fmt.Sprintf("a %s cannot be a %s", typeErr.Value, typeErr.Type)}
		if n := nodeAt(doc.root, field); n != nil {
			e.Line = n.Line
		} else if n := looseNodeAt(doc.root, strings.Split(field, ".")); n != nil {
			// encoding/json's path has no list indexes: take the first match.
			e.Line = n.Line
		}
		return e
	}
	var b64Err base64.CorruptInputError
	if errors.As(err, &b64Err) {
		e := &Error{Source: source, Msg: fmt.Sprintf("not base64 (bad byte at offset %d)", int64(b64Err)), Hint: opts.Base64Hint}
		for _, path := range doc.bytes {
			n := nodeAt(doc.root, path)
			if n == nil || n.Kind != yamlv3.ScalarNode {
				continue
			}
			if _, err := base64.StdEncoding.DecodeString(n.Value); err != nil {
				e.Field, e.Line = path, n.Line
				break
			}
		}
		return e
	}
	return &Error{Source: source, Msg: err.Error(), Err: err}
}

// looseNodeAt finds the first node at a dotted path without list indexes, looking into
// every item of the lists on the way.
func looseNodeAt(n *yamlv3.Node, segs []string) *yamlv3.Node {
	if len(segs) == 0 {
		return n
	}
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == segs[0] {
				return looseNodeAt(n.Content[i+1], segs[1:])
			}
		}
	case yamlv3.SequenceNode:
		for _, c := range n.Content {
			if found := looseNodeAt(c, segs); found != nil {
				return found
			}
		}
	default:
	}
	return nil
}

// nodeAt finds the node at a path such as "managedNodeGroups[0].taints".
func nodeAt(doc *yamlv3.Node, path string) *yamlv3.Node {
	n := doc
	for _, seg := range strings.Split(path, ".") {
		name, index, hasIndex := strings.Cut(seg, "[")
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		var next *yamlv3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
		for hasIndex {
			var idx string
			idx, index, _ = strings.Cut(index, "]")
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yamlv3.SequenceNode || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
			index, hasIndex = strings.CutPrefix(index, "[")
		}
	}
	return n
}
