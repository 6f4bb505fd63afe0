package eksctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// Error is a problem in a ClusterConfig, located by field path and line.
type Error = strictyaml.Error

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

	doc *strictyaml.Doc
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
	var cfg ClusterConfig
	doc, err := strictyaml.Decode(data, source, &cfg, strictyaml.Options{
		APIVersion:   APIVersion,
		Kind:         Kind,
		MultiDocHint: "an eksctl file holds one ClusterConfig",
		NoteTag:      "ignore",
		UseNumber:    true, // free-form settings keep 20 an integer, not 20.0
	})
	if err != nil {
		var te *taintsError
		if errors.As(err, &te) {
			return nil, &Error{Source: source, Msg: te.Error(), Hint: "write taints as a list of {key, value, effect}", Err: te}
		}
		return nil, err
	}
	if cfg.Metadata == nil || cfg.Metadata.Name == "" {
		return nil, &Error{Source: source, Line: doc.Line(""), Field: "metadata.name", Msg: "missing", Hint: "name the cluster: metadata: {name: NAME}"}
	}
	ignored := make([]Ignored, len(doc.Notes))
	for i, n := range doc.Notes {
		ignored[i] = Ignored{Field: n.Field, Line: n.Line, Value: n.Value, Reason: n.Reason}
	}
	return &File{Source: source, Config: &cfg, Ignored: ignored, doc: doc}, nil
}

// line gives the line of the field at path (dotted, with [i] indexes), 0 if absent.
func (f *File) line(path string) int { return f.doc.Line(path) }

func docRoot(n *yamlv3.Node) *yamlv3.Node {
	if n.Kind == yamlv3.DocumentNode && len(n.Content) == 1 {
		return n.Content[0]
	}
	return n
}

func scalar(m *yamlv3.Node, key string) (string, *yamlv3.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Value, m.Content[i+1]
		}
	}
	return "", nil
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
