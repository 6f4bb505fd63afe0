package strictyaml

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/nodejoin/nodejoin/internal/editdistance"
)

type walker struct {
	source  string
	noteTag string
	errs    []error
	notes   []Note
	bytes   []string
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	anyType         = reflect.TypeFor[any]()
)

// walk compares the YAML tree with the Go type, reports every key the type lacks, and
// collects the leaves of noted fields (reason is the nearest note tag's value).
func (w *walker) walk(n *yamlv3.Node, t reflect.Type, path, reason string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == anyType || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		w.leaves(n, path, reason)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			w.leaves(n, path, reason) // a type mismatch, which decoding reports
			return
		}
		fields := jsonFields(t, w.noteTag)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fields[key.Value]
			if !ok {
				w.errs = append(w.errs, &Error{
					Source: w.source, Line: key.Line, Field: join(path, key.Value),
					Msg: "unknown field", Hint: suggest(key.Value, fields),
				})
				continue
			}
			r := reason
			if f.note != "" {
				r = f.note
			}
			w.walk(val, f.typ, join(path, key.Value), r)
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode || len(n.Content) == 0 {
			w.leaves(n, path, reason)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), reason)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			w.bytes = append(w.bytes, path)
		}
		if n.Kind != yamlv3.SequenceNode || isScalarSeq(n) {
			w.leaves(n, path, reason)
			return
		}
		for i, item := range n.Content {
			w.walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", reason)
		}
	default:
		w.leaves(n, path, reason)
	}
}

// leaves records every leaf under n as a note, when reason is set.
func (w *walker) leaves(n *yamlv3.Node, path, reason string) {
	if reason == "" {
		return
	}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch {
	case n.Kind == yamlv3.MappingNode && len(n.Content) > 0:
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.leaves(n.Content[i+1], join(path, n.Content[i].Value), reason)
		}
	case n.Kind == yamlv3.SequenceNode && !isScalarSeq(n):
		for i, item := range n.Content {
			w.leaves(item, path+"["+strconv.Itoa(i)+"]", reason)
		}
	default:
		w.notes = append(w.notes, Note{Field: path, Line: n.Line, Value: valueText(n), Reason: reason})
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

// duplicates reports every mapping key given twice: YAML parsers disagree on which
// value wins, so neither is taken.
func (w *walker) duplicates(n *yamlv3.Node, path string) {
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if first, ok := seen[key.Value]; ok {
				w.errs = append(w.errs, &Error{
					Source: w.source, Line: key.Line, Field: join(path, key.Value),
					Msg: fmt.Sprintf("given twice (first on line %d)", first), Hint: "keep one",
				})
			} else {
				seen[key.Value] = key.Line
			}
			w.duplicates(n.Content[i+1], join(path, key.Value))
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			w.duplicates(c, path+"["+strconv.Itoa(i)+"]")
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
	typ  reflect.Type
	note string
}

// jsonFields maps the JSON names of t's fields, inline embedded structs flattened, to
// their types and note reasons.
func jsonFields(t reflect.Type, noteTag string) map[string]fieldInfo {
	out := map[string]fieldInfo{}
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft, noteTag) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		fi := fieldInfo{typ: f.Type}
		if noteTag != "" {
			fi.note = f.Tag.Get(noteTag)
		}
		out[name] = fi
	}
	return out
}

// suggest names the known field closest to an unknown one: the same name in another
// case, a known name the unknown one starts with, or the nearest by edit distance.
func suggest(unknown string, fields map[string]fieldInfo) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if strings.EqualFold(k, unknown) {
			return fmt.Sprintf("did you mean %q? field names are case-sensitive", k)
		}
	}
	best, bestDist := "", 4
	for _, k := range names {
		if strings.HasPrefix(unknown, k) && len(k) > 2 {
			// Such as "name-not-real" for "name".
			return fmt.Sprintf("did you mean %q?", k)
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
