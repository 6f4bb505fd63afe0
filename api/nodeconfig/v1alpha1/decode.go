package v1alpha1

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/editdistance"
)

// DecodeError is a problem in a NodeConfig document, located as precisely as possible.
type DecodeError struct {
	// Source names the document, such as "user data part 2" or a file path.
	Source string
	// Line is the 1-based line in the document, 0 when unknown.
	Line int
	// Field is the JSON path of the field, such as "spec.cluster.name", when known.
	Field string
	// Msg says what is wrong.
	Msg string
	// Hint suggests a fix, when a common mistake is likely.
	Hint string
}

func (e *DecodeError) Error() string {
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

// ErrNotNodeConfig reports a well-formed document of another kind or API group.
var ErrNotNodeConfig = errors.New("not a NodeConfig")

// Decode parses one NodeConfig document, YAML or JSON, strictly: an unknown or
// misspelt field, a duplicate key, a value of the wrong type or a wrong apiVersion or
// kind is an error that names the field and its line. Every unknown field is reported,
// not just the first. source names the document in errors.
func Decode(data []byte, source string) (*NodeConfig, error) {
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, yamlError(source, err)
	}
	var extra yamlv3.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &DecodeError{Source: source, Line: extra.Line, Msg: "more than one YAML document", Hint: "give each NodeConfig its own MIME part or file"}
	}
	doc := &root
	if doc.Kind == yamlv3.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yamlv3.MappingNode {
		return nil, &DecodeError{Source: source, Line: doc.Line, Msg: "not a YAML or JSON object"}
	}
	if err := checkTypeMeta(doc, source); err != nil {
		return nil, err
	}
	var errs []error
	duplicates(doc, "", source, &errs)
	walk(doc, reflect.TypeFor[NodeConfig](), "", source, &errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, yamlError(source, err)
	}
	var cfg NodeConfig
	jd := json.NewDecoder(bytes.NewReader(js))
	jd.DisallowUnknownFields()
	if err := jd.Decode(&cfg); err != nil {
		return nil, jsonError(doc, source, err)
	}
	return &cfg, nil
}

func checkTypeMeta(doc *yamlv3.Node, source string) error {
	apiVersion, avNode := scalarField(doc, "apiVersion")
	kind, kindNode := scalarField(doc, "kind")
	switch {
	case avNode == nil:
		return &DecodeError{Source: source, Line: doc.Line, Field: "apiVersion", Msg: "missing", Hint: "want apiVersion: " + APIVersion}
	case kindNode == nil:
		return &DecodeError{Source: source, Line: doc.Line, Field: "kind", Msg: "missing", Hint: "want kind: " + Kind}
	case kind != Kind || !strings.HasPrefix(apiVersion, GroupName+"/"):
		return &DecodeError{Source: source, Line: kindNode.Line, Msg: fmt.Sprintf("%v: kind %q of apiVersion %q", ErrNotNodeConfig, kind, apiVersion)}
	case apiVersion != APIVersion:
		return &DecodeError{Source: source, Line: avNode.Line, Field: "apiVersion", Msg: fmt.Sprintf("version %q is not supported", apiVersion), Hint: "want " + APIVersion}
	}
	return nil
}

func scalarField(m *yamlv3.Node, key string) (string, *yamlv3.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Value, m.Content[i+1]
		}
	}
	return "", nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
)

// walk compares the YAML tree with the Go type and reports every key that the type
// does not have, with its line and the closest known name.
func walk(n *yamlv3.Node, t reflect.Type, path, source string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == rawMessage || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return // the JSON decoder reports the type mismatch
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			ft, ok := fields[key.Value]
			if !ok {
				*errs = append(*errs, &DecodeError{
					Source: source, Line: key.Line, Field: join(path, key.Value),
					Msg: "unknown field", Hint: suggest(key.Value, fields),
				})
				continue
			}
			walk(val, ft, join(path, key.Value), source, errs)
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), source, errs)
		}
	case reflect.Slice:
		if n.Kind != yamlv3.SequenceNode || t.Elem().Kind() == reflect.Uint8 {
			return
		}
		for i, item := range n.Content {
			walk(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", source, errs)
		}
	default:
	}
}

// duplicates reports every mapping key given twice: YAML parsers disagree on which
// value wins, so nodejoin accepts neither.
func duplicates(n *yamlv3.Node, path, source string, errs *[]error) {
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if first, ok := seen[key.Value]; ok {
				*errs = append(*errs, &DecodeError{
					Source: source, Line: key.Line, Field: join(path, key.Value),
					Msg: fmt.Sprintf("given twice (first on line %d)", first),
				})
			} else {
				seen[key.Value] = key.Line
			}
			duplicates(n.Content[i+1], join(path, key.Value), source, errs)
		}
	case yamlv3.SequenceNode, yamlv3.DocumentNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yamlv3.SequenceNode {
				p += "[" + strconv.Itoa(i) + "]"
			}
			duplicates(c, p, source, errs)
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

// jsonFields maps the JSON names of t's fields, inline embedded structs flattened, to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
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
		out[name] = f.Type
	}
	return out
}

// suggest names the known field closest to an unknown one.
func suggest(unknown string, fields map[string]reflect.Type) string {
	best, bestDist := "", 4
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if strings.EqualFold(k, unknown) {
			return fmt.Sprintf("did you mean %q? field names are case-sensitive", k)
		}
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
	return "known fields: " + strings.Join(names, ", ")
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlError(source string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(yamlLineRE.ReplaceAllString(msg, ""))
		msg = strings.TrimPrefix(msg, ": ")
	}
	return &DecodeError{Source: source, Line: line, Msg: "syntax error: " + msg}
}

// jsonError turns a decoding error into a DecodeError located in the YAML tree.
func jsonError(doc *yamlv3.Node, source string, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return &DecodeError{
			Source: source, Line: lineOf(doc, field), Field: field,
			Msg: fmt.Sprintf("a %s cannot be a %s", typeErr.Value, typeErr.Type),
		}
	}
	var b64Err base64.CorruptInputError
	if errors.As(err, &b64Err) {
		return &DecodeError{
			Source: source, Line: lineOf(doc, "spec.cluster.certificateAuthority"), Field: "spec.cluster.certificateAuthority",
			Msg:  fmt.Sprintf("not base64 (bad byte at offset %d)", int64(b64Err)),
			Hint: "give the base64 of the PEM CA bundle, as `base64 -w0 ca.crt` prints it",
		}
	}
	return &DecodeError{Source: source, Msg: err.Error()}
}

func lineOf(doc *yamlv3.Node, path string) int {
	if n := nodeAt(doc, path); n != nil {
		return n.Line
	}
	return 0
}

// nodeAt finds the node at a dotted JSON path.
func nodeAt(doc *yamlv3.Node, path string) *yamlv3.Node {
	n := doc
	for _, seg := range strings.Split(path, ".") {
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		var next *yamlv3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}
