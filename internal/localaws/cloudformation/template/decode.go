package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Both decoders produce the same tree: map[string]any, []any and string scalars
// (numbers in shortest decimal form, booleans "true"/"false"), with YAML's short-form
// tags rewritten to long form, so a JSON template and its YAML re-encoding parse to the
// same Template. Nulls are refused as CloudFormation refuses them. They also return
// the keys of the top-level Parameters section in the order written, which a Go map
// loses and ValidateTemplate reports.

// maxDepth bounds nesting so a hostile body cannot exhaust the stack.
const maxDepth = 100

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func itoa(i int) string { return strconv.Itoa(i) }

func atoi(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return n, nil
}

// parseNumber parses a CloudFormation number: a finite decimal.
func parseNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(s, "xXpP_") {
		return 0, errors.New("not a number")
	}
	return f, nil
}

// canonicalNumber writes a number literal in its shortest decimal form (integers
// exactly, whatever their size; "1.50" as "1.5"); ok false when it is no number.
func canonicalNumber(lit string) (string, bool) {
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return strconv.FormatInt(n, 10), true
	}
	if n, err := strconv.ParseUint(lit, 10, 64); err == nil {
		return strconv.FormatUint(n, 10), true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}

func decodeJSON(body []byte) (any, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var order []string
	v, err := jsonValue(dec, "", 0, &order)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("data after the template")
		}
	}
	if err != nil {
		var perr *Error
		if errors.As(err, &perr) {
			return nil, nil, perr
		}
		line, col := position(body, dec.InputOffset())
		return nil, nil, formatError("", "JSON not well-formed. (line %d, column %d)", line, col)
	}
	return v, order, nil
}

func jsonValue(dec *json.Decoder, path string, depth int, order *[]string) (any, error) {
	if depth > maxDepth {
		return nil, formatError(path, "the template is nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			list := []any{}
			for dec.More() {
				v, err := jsonValue(dec, index(path, len(list)), depth+1, order)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := m[k]; dup {
				return nil, formatError(join(path, k), "JSON not well-formed. Duplicate key %s", k)
			}
			if path == "Parameters" && depth == 1 {
				*order = append(*order, k)
			}
			v, err := jsonValue(dec, join(path, k), depth+1, order)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		_, err := dec.Token()
		return m, err
	case string:
		return tok, nil
	case json.Number:
		s, ok := canonicalNumber(tok.String())
		if !ok {
			return nil, formatError(path, "JSON not well-formed. Number %s is out of range", tok.String())
		}
		return s, nil
	case bool:
		return strconv.FormatBool(tok), nil
	}
	return nil, nullError(path)
}

func nullError(path string) *Error {
	return formatError(path, "'null' values are not allowed in templates")
}

// position turns a byte offset into a 1-based line and column.
func position(body []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(body)))
	before := body[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func decodeYAML(body []byte) (any, []string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, formatError("", "unsupported structure.")
		}
		return nil, nil, formatError("", "YAML not well-formed. %s", yamlReason(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, formatError("", "YAML not well-formed. A template is one YAML document")
	}
	var order []string
	v, err := yamlValue(&doc, "", 0, &order)
	return v, order, err
}

// yamlReason is the YAML library's message without its prefix, which names the
// library rather than the template, and with its line at the end as CloudFormation
// writes it: "did not find expected key (line 3)".
func yamlReason(err error) string {
	s := strings.ReplaceAll(err.Error(), "yaml: ", "")
	if rest, ok := strings.CutPrefix(s, "line "); ok {
		if n, msg, ok := strings.Cut(rest, ": "); ok {
			if _, err := strconv.Atoi(n); err == nil {
				return msg + " (line " + n + ")"
			}
		}
	}
	return s
}

func yamlPos(n *yaml.Node) string { return sprintf("(line %d, column %d)", n.Line, n.Column) }

func yamlValue(n *yaml.Node, path string, depth int, order *[]string) (any, error) {
	if depth > maxDepth {
		return nil, formatError(path, "the template is nested more than %d levels deep", maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, formatError("", "unsupported structure.")
		}
		return yamlValue(n.Content[0], path, depth, order)
	case yaml.AliasNode:
		return nil, formatError(path, "YAML not well-formed. Aliases are not supported %s", yamlPos(n))
	}
	var v any
	var err error
	switch n.Kind {
	case yaml.MappingNode:
		v, err = yamlMap(n, path, depth, order)
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			e, err := yamlValue(c, index(path, i), depth+1, order)
			if err != nil {
				return nil, err
			}
			list = append(list, e)
		}
		v = list
	default:
		v, err = yamlScalar(n, path)
	}
	if err != nil || !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, err
	}
	return shortForm(n, v, path)
}

func yamlMap(n *yaml.Node, path string, depth int, order *[]string) (any, error) {
	m := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := n.Content[i]
		if kn.Kind != yaml.ScalarNode {
			return nil, formatError(path, "YAML not well-formed. Keys must be strings %s", yamlPos(kn))
		}
		k := kn.Value
		if _, dup := m[k]; dup {
			return nil, formatError(join(path, k), "YAML not well-formed. Duplicate key %s %s", k, yamlPos(kn))
		}
		if path == "Parameters" && depth == 1 {
			*order = append(*order, k)
		}
		v, err := yamlValue(n.Content[i+1], join(path, k), depth+1, order)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

func yamlScalar(n *yaml.Node, path string) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nullError(path)
	case "!!bool":
		// The YAML library tags true/True/TRUE and false/False/FALSE only.
		return strconv.FormatBool(strings.EqualFold(n.Value, "true")), nil
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return strconv.FormatInt(i, 10), nil
		}
		if s, ok := canonicalNumber(n.Value); ok {
			return s, nil
		}
		return n.Value, nil
	case "!!float":
		if s, ok := canonicalNumber(n.Value); ok {
			return s, nil
		}
		return n.Value, nil
	}
	return n.Value, nil
}

// shortFormTags are YAML's short forms of the intrinsic functions.
var shortFormTags = map[string]string{
	"!Ref": "Ref", "!Condition": "Condition", "!GetAtt": "Fn::GetAtt", "!Sub": "Fn::Sub",
	"!Join": "Fn::Join", "!Select": "Fn::Select", "!Split": "Fn::Split", "!If": "Fn::If",
	"!Equals": "Fn::Equals", "!Not": "Fn::Not", "!And": "Fn::And", "!Or": "Fn::Or",
	"!FindInMap": "Fn::FindInMap", "!Base64": "Fn::Base64", "!GetAZs": "Fn::GetAZs",
	"!ImportValue": "Fn::ImportValue", "!Cidr": "Fn::Cidr",
}

// shortForm rewrites a tagged node (!Ref X) to its long form ({"Ref": "X"}); !GetAtt's
// "Resource.Attribute" scalar becomes the two-item list, split at the first dot as
// CloudFormation splits it (attribute names may hold dots).
func shortForm(n *yaml.Node, v any, path string) (any, error) {
	fn, ok := shortFormTags[n.Tag]
	if !ok {
		return nil, formatError(path, "YAML not well-formed. Unsupported tag %s %s; the short forms are the intrinsic functions' names, such as !Ref and !Sub", n.Tag, yamlPos(n))
	}
	if s, isString := v.(string); fn == "Fn::GetAtt" && isString {
		res, attr, _ := strings.Cut(s, ".")
		v = []any{res, attr}
	}
	return map[string]any{fn: v}, nil
}
