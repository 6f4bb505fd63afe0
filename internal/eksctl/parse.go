package eksctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/editdistance"
)

// Error is a problem in a ClusterConfig, located by field path and line.
type Error struct {
	// Source names the file.
	Source string
	// Line is the 1-based line, 0 when unknown.
	Line int
	// Field is the path of the field, such as "managedNodeGroups[0].minSize".
	Field string
	// Msg says what is wrong.
	Msg string
	// Fix says what to do about it, when there is something obvious.
	Fix string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ", line %d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	if e.Fix != "" {
		fmt.Fprintf(&b, " (%s)", e.Fix)
	}
	return b.String()
}

// Ignored is a field of the file that nodejoin knows and does not use.
type Ignored struct {
	// Field is its path, such as "managedNodeGroups[0].ssh.allow".
	Field string `json:"field"`
	// Line is its 1-based line in the file.
	Line int `json:"line"`
	// Value is the value as written, for scalars and lists of scalars.
	Value string `json:"value,omitempty"`
	// Reason says why nodejoin does not use it.
	Reason string `json:"reason"`
}

// File is a parsed ClusterConfig with what nodejoin ignores of it.
type File struct {
	// Source names the file in messages.
	Source string
	// Config is the file's content.
	Config *ClusterConfig
	// Ignored lists every field present in the file that nodejoin does not use, in
	// the file's order.
	Ignored []Ignored

	root *yamlv3.Node
}

// IsClusterConfig reports whether data is an eksctl document (apiVersion eksctl.io/…),
// so that callers can tell it from a NodeGroup manifest before parsing.
func IsClusterConfig(data []byte) bool {
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := sigsyaml.Unmarshal(data, &head); err != nil {
		// A file with more than one document: look at the first.
		var n yamlv3.Node
		if yamlv3.NewDecoder(bytes.NewReader(data)).Decode(&n) != nil {
			return false
		}
		if doc := docRoot(&n); doc.Kind == yamlv3.MappingNode {
			v, _ := scalar(doc, "apiVersion")
			return strings.HasPrefix(v, "eksctl.io/")
		}
		return false
	}
	return strings.HasPrefix(head.APIVersion, "eksctl.io/")
}

// Parse reads a ClusterConfig strictly: a field eksctl does not have is an error naming
// it, its line and the closest known name; so are duplicate keys, values of the wrong
// type, and a wrong apiVersion or kind. Every error is reported, not only the first.
// Fields nodejoin knows but does not use are returned in File.Ignored.
func Parse(data []byte, source string) (*File, error) {
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, &Error{Source: source, Msg: "not YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yamlv3.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Source: source, Line: extra.Line, Msg: "more than one YAML document", Fix: "an eksctl file holds one ClusterConfig"}
	}
	doc := docRoot(&root)
	if doc.Kind != yamlv3.MappingNode {
		return nil, &Error{Source: source, Line: doc.Line, Msg: "not a YAML object"}
	}
	if err := checkTypeMeta(doc, source); err != nil {
		return nil, err
	}
	p := &parser{source: source}
	p.duplicates(doc, "")
	p.walk(doc, reflect.TypeFor[ClusterConfig](), "", "")
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, &Error{Source: source, Msg: "not YAML: " + err.Error()}
	}
	var cfg ClusterConfig
	jd := json.NewDecoder(bytes.NewReader(js))
	jd.DisallowUnknownFields()
	jd.UseNumber() // free-form settings keep 20 an integer, not 20.0
	if err := jd.Decode(&cfg); err != nil {
		return nil, jsonError(doc, source, err)
	}
	if cfg.Metadata == nil || cfg.Metadata.Name == "" {
		return nil, &Error{Source: source, Line: doc.Line, Field: "metadata.name", Msg: "missing", Fix: "name the cluster: metadata: {name: NAME}"}
	}
	return &File{Source: source, Config: &cfg, Ignored: p.ignored, root: doc}, nil
}

// line gives the line of the field at path (dotted, with [i] indexes), 0 if absent.
func (f *File) line(path string) int {
	if n := nodeAt(f.root, path); n != nil {
		return n.Line
	}
	return 0
}

func docRoot(n *yamlv3.Node) *yamlv3.Node {
	if n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

func checkTypeMeta(doc *yamlv3.Node, source string) error {
	apiVersion, avNode := scalar(doc, "apiVersion")
	kind, kindNode := scalar(doc, "kind")
	switch {
	case avNode == nil:
		return &Error{Source: source, Line: doc.Line, Field: "apiVersion", Msg: "missing", Fix: "want apiVersion: " + APIVersion}
	case kindNode == nil:
		return &Error{Source: source, Line: doc.Line, Field: "kind", Msg: "missing", Fix: "want kind: " + Kind}
	case apiVersion != APIVersion:
		return &Error{Source: source, Line: avNode.Line, Field: "apiVersion", Msg: fmt.Sprintf("%q is not supported", apiVersion), Fix: "want " + APIVersion}
	case kind != Kind:
		return &Error{Source: source, Line: kindNode.Line, Field: "kind", Msg: fmt.Sprintf("%q is not supported", kind), Fix: "want " + Kind}
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

type parser struct {
	source  string
	errs    []error
	ignored []Ignored
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	anyType         = reflect.TypeFor[any]()
)

// walk compares the YAML tree with the Go type, reports every key the type lacks, and
// collects the leaves of fields tagged ignore (reason is the nearest such tag).
func (p *parser) walk(n *yamlv3.Node, t reflect.Type, path, reason string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == anyType || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		if reason != "" {
			p.leaves(n, path, reason)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			p.leaves(n, path, reason) // a type mismatch, which decoding reports
			return
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fields[key.Value]
			if !ok {
				p.errs = append(p.errs, &Error{
					Source: p.source, Line: key.Line, Field: join(path, key.Value),
					Msg: "unknown field", Fix: suggest(key.Value, fields),
				})
				continue
			}
			r := reason
			if f.ignore != "" {
				r = f.ignore
			}
			p.walk(val, f.typ, join(path, key.Value), r)
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode || len(n.Content) == 0 {
			p.leaves(n, path, reason)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), reason)
		}
	case reflect.Slice:
		if n.Kind != yamlv3.SequenceNode || isScalarSeq(n) {
			p.leaves(n, path, reason)
			return
		}
		for i, item := range n.Content {
			p.walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", reason)
		}
	default:
		p.leaves(n, path, reason)
	}
}

// leaves records every leaf under n as ignored, when reason is set.
func (p *parser) leaves(n *yamlv3.Node, path, reason string) {
	if reason == "" {
		return
	}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case n.Kind == yamlv3.MappingNode && len(n.Content) > 0:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.leaves(n.Content[i+1], join(path, n.Content[i].Value), reason)
		}
	case n.Kind == yamlv3.SequenceNode && !isScalarSeq(n):
		for i, item := range n.Content {
			p.leaves(item, path+"["+strconv.Itoa(i)+"]", reason)
		}
	default:
		p.ignored = append(p.ignored, Ignored{Field: path, Line: n.Line, Value: valueText(n), Reason: reason})
	}
}

func isScalarSeq(n *yamlv3.Node) bool {
	if n.Kind != yamlv3.SequenceNode {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yamlv3.ScalarNode {
			return false
		}
	}
	return true
}

// valueText renders a scalar or a list of scalars as written.
func valueText(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.ScalarNode:
		return n.Value
	case yamlv3.SequenceNode:
		vs := make([]string, len(n.Content))
		for i, c := range n.Content {
			vs[i] = c.Value
		}
		return "[" + strings.Join(vs, ", ") + "]"
	case yamlv3.MappingNode:
		return "{}"
	default:
		return ""
	}
}

// duplicates reports every mapping key given twice.
func (p *parser) duplicates(n *yamlv3.Node, path string) {
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if first, ok := seen[key.Value]; ok {
				p.errs = append(p.errs, &Error{
					Source: p.source, Line: key.Line, Field: join(path, key.Value),
					Msg: fmt.Sprintf("given twice (first on line %d)", first), Fix: "keep one",
				})
			} else {
				seen[key.Value] = key.Line
			}
			p.duplicates(n.Content[i+1], join(path, key.Value))
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			p.duplicates(c, path+"["+strconv.Itoa(i)+"]")
		}
	default:
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type fieldInfo struct {
	typ    reflect.Type
	ignore string
}

// jsonFields maps the JSON names of t's fields, inline structs flattened, to their
// types and ignore reasons.
func jsonFields(t reflect.Type) map[string]fieldInfo {
	out := map[string]fieldInfo{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = fieldInfo{typ: f.Type, ignore: f.Tag.Get("ignore")}
	}
	return out
}

// suggest names the known field closest to an unknown one.
func suggest(unknown string, fields map[string]fieldInfo) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	best, bestDist := "", 4
	for _, k := range names {
		if strings.EqualFold(k, unknown) {
			return fmt.Sprintf("did you mean %q? field names are case-sensitive", k)
		}
		if d := editdistance.Levenshtein(strings.ToLower(unknown), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "known fields here: " + strings.Join(names, ", ")
}

// jsonError turns a decoding error into an Error located in the YAML tree.
func jsonError(doc *yamlv3.Node, source string, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		e := &Error{Source: source, Field: typeErr.Field, Msg: fmt.Sprintf("a %s cannot be a %s", typeErr.Value, typeErr.Type)}
		if n := nodeAt(doc, typeErr.Field); n != nil {
			e.Line = n.Line
		}
		return e
	}
	var te *taintsError
	if errors.As(err, &te) {
		return &Error{Source: source, Msg: te.Error(), Fix: "write taints as a list of {key, value, effect}"}
	}
	return &Error{Source: source, Msg: err.Error()}
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

type taintsError struct{ err error }

func (e *taintsError) Error() string { return "taints: " + e.err.Error() }
func (e *taintsError) Unwrap() error { return e.err }

// UnmarshalJSON reads a list of {key, value, effect} or a map of key to "value:Effect".
func (t *Taints) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err == nil {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(Taints, 0, len(m))
		for _, k := range keys {
			value, effect, ok := strings.Cut(m[k], ":")
			if !ok {
				// "key: :NoSchedule" has an empty value; "key: NoSchedule" is an effect alone.
				value, effect = "", m[k]
			}
			out = append(out, Taint{Key: k, Value: value, Effect: effect})
		}
		*t = out
		return nil
	}
	var list []Taint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return &taintsError{err: fmt.Errorf("want a list of {key, value, effect} or a map of key to \"value:Effect\": %w", err)}
	}
	*t = list
	return nil
}
