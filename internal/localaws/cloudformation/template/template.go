// Package template owns CloudFormation templates: reading them (JSON or YAML, YAML's
// short-form tags such as !Ref and !Sub turned into their long forms), validating them
// as CreateStack and ValidateTemplate do before anything is made, binding stack
// parameters, ordering resources by their dependencies, and evaluating intrinsic
// functions into the plain values resource handlers receive. It is pure: no network
// and no other package of the local AWS; what it needs from outside (SSM parameters,
// made resources, exports) it is given as functions.
package template

import (
	"bytes"
	"slices"
	"strings"
)

// MaxBodySize is the largest template body accepted, CloudFormation's limit for a
// template read from S3.
const MaxBodySize = 1_000_000

// Template is a parsed template. Every scalar in it is a string (numbers in their
// shortest decimal form, booleans "true"/"false"); intrinsic functions are in their
// long form ({"Ref": "X"}, {"Fn::Sub": ...}).
type Template struct {
	FormatVersion, Description string
	Parameters                 map[string]*Parameter
	// ParameterOrder is the parameters' logical IDs in the order the template writes them.
	ParameterOrder []string
	Mappings       map[string]map[string]map[string]any
	// Conditions are the raw condition expressions.
	Conditions map[string]any
	Resources  map[string]*Resource
	Outputs    map[string]*Output
	// Transform is the template's Transform section as written, nil when absent;
	// Validate refuses a template that has one (macros are not run here).
	Transform any
	// Body is the template as given; GetTemplate returns it.
	Body []byte

	// deps are the resources' direct dependencies, computed by Validate.
	deps map[string][]string
}

// Parameter is one entry of the Parameters section.
type Parameter struct {
	Type, Description, AllowedPattern, ConstraintDescription string
	Default                                                  *string
	AllowedValues                                            []string
	NoEcho                                                   bool
	MinLength, MaxLength                                     *int
	MinValue, MaxValue                                       *float64
}

// Resource is one entry of the Resources section.
type Resource struct {
	Type                         string
	Properties                   map[string]any
	DependsOn                    []string
	Condition                    string
	CreationPolicy, UpdatePolicy map[string]any
	DeletionPolicy               string
	UpdateReplacePolicy          string
	Metadata                     map[string]any
}

// Output is one entry of the Outputs section.
type Output struct {
	Value       any
	Description string
	// ExportName is Export.Name (possibly an intrinsic), nil without an export.
	ExportName any
	Condition  string
}

// Error is a template or parameter error in CloudFormation's words. Path locates it in
// the template (Resources.NodeGroup.Properties.Tags[2].Value), empty when the error is
// about the whole template or the stack's parameters.
type Error struct {
	Path, Message string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Message + " (at " + e.Path + ")"
}

func formatError(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: "Template format error: " + sprintf(format, args...)}
}

func templateError(path, format string, args ...any) *Error {
	return &Error{Path: path, Message: "Template error: " + sprintf(format, args...)}
}

// sections are the top-level keys a template may have.
var sections = []string{"AWSTemplateFormatVersion", "Conditions", "Description", "Mappings", "Metadata", "Outputs", "Parameters", "Resources", "Rules", "Transform"}

// Parse reads a JSON or YAML template (a body whose first non-blank character is '{'
// is JSON) and checks the shape of its sections: the known sections only, each
// parameter, mapping, resource and output an object with the members CloudFormation
// allows, logical IDs alphanumeric, no nulls. What the template refers to is
// Validate's to check. Bodies over MaxBodySize are refused. Errors are *Error.
func Parse(body []byte) (*Template, error) {
	if len(body) > MaxBodySize {
		return nil, &Error{Message: sprintf("Template may not exceed %d bytes in size.", MaxBodySize)}
	}
	var (
		root  any
		order []string
		err   error
	)
	text := bytes.TrimPrefix(body, []byte("\ufeff")) // a UTF-8 byte order mark
	if bytes.HasPrefix(bytes.TrimLeft(text, " \t\r\n"), []byte("{")) {
		root, order, err = decodeJSON(text)
	} else {
		root, order, err = decodeYAML(text)
	}
	if err != nil {
		return nil, err
	}
	top, ok := root.(map[string]any)
	if !ok {
		return nil, formatError("", "unsupported structure.")
	}
	var unknown []string
	for k := range top {
		if !slices.Contains(sections, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, formatError("", "Invalid template property or properties [%s]", strings.Join(unknown, ", "))
	}
	t := &Template{Body: slices.Clone(body), Transform: top["Transform"]}
	if t.FormatVersion, err = stringField(top, "AWSTemplateFormatVersion", ""); err != nil {
		return nil, err
	}
	if t.FormatVersion != "" && t.FormatVersion != "2010-09-09" {
		return nil, formatError("AWSTemplateFormatVersion", "Unsupported template version %s; the only version is 2010-09-09", t.FormatVersion)
	}
	if t.Description, err = stringField(top, "Description", ""); err != nil {
		return nil, err
	}
	if len(t.Description) > 1024 {
		return nil, formatError("Description", "Description must be at most 1024 characters long")
	}
	if err := t.parseParameters(top["Parameters"], order); err != nil {
		return nil, err
	}
	if err := t.parseMappings(top["Mappings"]); err != nil {
		return nil, err
	}
	if err := t.parseConditions(top["Conditions"]); err != nil {
		return nil, err
	}
	if err := t.parseResources(top["Resources"]); err != nil {
		return nil, err
	}
	if err := t.parseOutputs(top["Outputs"]); err != nil {
		return nil, err
	}
	return t, nil
}

// stringField returns m[key] when it is a string ("" when absent).
func stringField(m map[string]any, key, path string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", formatError(join(path, key), "%s must be a string", key)
	}
	return s, nil
}

// join appends a map key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index appends a list index to a path.
func index(path string, i int) string { return path + "[" + itoa(i) + "]" }

// sectionMap returns a section's value as a map (nil when absent).
func sectionMap(v any, name string) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, formatError(name, "%s must be an object", name)
	}
	return m, nil
}

// alphanumeric reports whether a logical ID is valid: ASCII letters and digits only.
func alphanumeric(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

var parameterKeys = []string{"AllowedPattern", "AllowedValues", "ConstraintDescription", "Default", "Description", "MaxLength", "MaxValue", "MinLength", "MinValue", "NoEcho", "Type"}

func (t *Template) parseParameters(v any, order []string) error {
	m, err := sectionMap(v, "Parameters")
	if err != nil {
		return err
	}
	if len(m) > 200 {
		return formatError("Parameters", "Number of parameters, %d, is greater than maximum allowed, 200", len(m))
	}
	t.Parameters = map[string]*Parameter{}
	t.ParameterOrder = order
	for _, name := range order {
		p, err := parseParameter(name, m[name])
		if err != nil {
			return err
		}
		t.Parameters[name] = p
	}
	return nil
}

func parseParameter(name string, v any) (*Parameter, error) {
	path := join("Parameters", name)
	if !alphanumeric(name) {
		return nil, formatError(path, "Parameter name %s is non alphanumeric.", name)
	}
	def, ok := v.(map[string]any)
	if !ok {
		return nil, formatError(path, "Every Parameters object must be an object with a Type member")
	}
	for k := range def {
		if !slices.Contains(parameterKeys, k) {
			return nil, formatError(path, "Invalid template parameter property '%s'", k)
		}
	}
	p := &Parameter{}
	var err error
	if p.Type, err = stringField(def, "Type", path); err != nil {
		return nil, err
	}
	if p.Type == "" {
		return nil, formatError(path, "Every Parameters object must contain a Type member.")
	}
	if !knownParameterType(p.Type) {
		return nil, formatError(join(path, "Type"), "Unrecognized parameter type: %s", p.Type)
	}
	for _, f := range []struct {
		key string
		to  *string
	}{{"Description", &p.Description}, {"AllowedPattern", &p.AllowedPattern}, {"ConstraintDescription", &p.ConstraintDescription}} {
		if *f.to, err = stringField(def, f.key, path); err != nil {
			return nil, err
		}
	}
	if d, ok := def["Default"]; ok {
		s, err := scalarOrList(d, join(path, "Default"))
		if err != nil {
			return nil, err
		}
		p.Default = &s
	}
	if av, ok := def["AllowedValues"]; ok {
		if p.AllowedValues, err = stringList(av, join(path, "AllowedValues")); err != nil {
			return nil, err
		}
	}
	if ne, ok := def["NoEcho"]; ok {
		s, _ := ne.(string)
		if s != "true" && s != "false" {
			return nil, formatError(join(path, "NoEcho"), "NoEcho must be true or false")
		}
		p.NoEcho = s == "true"
	}
	return p, parseBounds(def, path, p)
}

// stringList returns AllowedValues, which must be a list of strings.
func stringList(v any, path string) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, formatError(path, "AllowedValues must be a list of strings")
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, formatError(index(path, i), "AllowedValues must be a list of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// scalarOrList returns a Default: a string, or a list of strings comma-joined.
func scalarOrList(v any, path string) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return "", formatError(index(path, i), "Default must be a string or a list of strings")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", formatError(path, "Default must be a string or a list of strings")
}

func parseBounds(def map[string]any, path string, p *Parameter) error {
	for _, f := range []struct {
		key string
		to  **int
	}{{"MinLength", &p.MinLength}, {"MaxLength", &p.MaxLength}} {
		if v, ok := def[f.key]; ok {
			s, _ := v.(string)
			n, err := atoi(s)
			if err != nil || n < 0 {
				return formatError(join(path, f.key), "%s must be a non-negative integer", f.key)
			}
			*f.to = &n
		}
	}
	for _, f := range []struct {
		key string
		to  **float64
	}{{"MinValue", &p.MinValue}, {"MaxValue", &p.MaxValue}} {
		if v, ok := def[f.key]; ok {
			s, _ := v.(string)
			n, err := parseNumber(s)
			if err != nil {
				return formatError(join(path, f.key), "%s must be a number", f.key)
			}
			*f.to = &n
		}
	}
	return nil
}

func (t *Template) parseMappings(v any) error {
	m, err := sectionMap(v, "Mappings")
	if err != nil {
		return err
	}
	t.Mappings = map[string]map[string]map[string]any{}
	for name, mv := range m {
		path := join("Mappings", name)
		if !alphanumeric(name) {
			return formatError(path, "Mapping name %s is non alphanumeric.", name)
		}
		top, ok := mv.(map[string]any)
		if !ok {
			return formatError(path, "Every Mappings member %s must be a map", name)
		}
		t.Mappings[name] = map[string]map[string]any{}
		for k1, v1 := range top {
			second, ok := v1.(map[string]any)
			if !ok {
				return formatError(join(path, k1), "Every Mappings member %s must be a map", k1)
			}
			for k2, v2 := range second {
				if !mappingValue(v2) {
					return formatError(join(join(path, k1), k2), "Every Mappings attribute must be a String or a List.")
				}
			}
			t.Mappings[name][k1] = second
		}
	}
	return nil
}

func mappingValue(v any) bool {
	switch v := v.(type) {
	case string:
		return true
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

func (t *Template) parseConditions(v any) error {
	m, err := sectionMap(v, "Conditions")
	if err != nil {
		return err
	}
	t.Conditions = map[string]any{}
	for name, c := range m {
		if !alphanumeric(name) {
			return formatError(join("Conditions", name), "Condition name %s is non alphanumeric.", name)
		}
		t.Conditions[name] = c
	}
	return nil
}

var resourceKeys = []string{"Condition", "CreationPolicy", "DeletionPolicy", "DependsOn", "Metadata", "Properties", "Type", "UpdatePolicy", "UpdateReplacePolicy"}

func (t *Template) parseResources(v any) error {
	m, err := sectionMap(v, "Resources")
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return formatError("", "At least one Resources member must be defined.")
	}
	if len(m) > 500 {
		return formatError("Resources", "Number of resources, %d, is greater than maximum allowed, 500", len(m))
	}
	t.Resources = map[string]*Resource{}
	for name, rv := range m {
		path := join("Resources", name)
		if !alphanumeric(name) {
			return formatError(path, "Resource name %s is non alphanumeric.", name)
		}
		def, ok := rv.(map[string]any)
		if !ok {
			return formatError(path, "Every Resources object must be an object with a Type member")
		}
		for k := range def {
			if !slices.Contains(resourceKeys, k) {
				return formatError(path, "Invalid template resource property '%s'", k)
			}
		}
		r := &Resource{}
		if r.Type, err = stringField(def, "Type", path); err != nil {
			return err
		}
		if r.Type == "" {
			return formatError(path, "Every Resources object must contain a Type member.")
		}
		for _, f := range []struct {
			key string
			to  *string
		}{{"Condition", &r.Condition}, {"DeletionPolicy", &r.DeletionPolicy}, {"UpdateReplacePolicy", &r.UpdateReplacePolicy}} {
			if *f.to, err = stringField(def, f.key, path); err != nil {
				return err
			}
		}
		for _, f := range []struct {
			key string
			to  *map[string]any
		}{{"Properties", &r.Properties}, {"CreationPolicy", &r.CreationPolicy}, {"UpdatePolicy", &r.UpdatePolicy}, {"Metadata", &r.Metadata}} {
			if *f.to, err = sectionMap(def[f.key], join(path, f.key)); err != nil {
				return err
			}
		}
		switch d := def["DependsOn"].(type) {
		case nil:
		case string:
			r.DependsOn = []string{d}
		case []any:
			for i, e := range d {
				s, ok := e.(string)
				if !ok {
					return formatError(index(join(path, "DependsOn"), i), "DependsOn must be a string or a list of strings")
				}
				r.DependsOn = append(r.DependsOn, s)
			}
		default:
			return formatError(join(path, "DependsOn"), "DependsOn must be a string or a list of strings")
		}
		t.Resources[name] = r
	}
	return nil
}

var outputKeys = []string{"Condition", "Description", "Export", "Value"}

func (t *Template) parseOutputs(v any) error {
	m, err := sectionMap(v, "Outputs")
	if err != nil {
		return err
	}
	if len(m) > 200 {
		return formatError("Outputs", "Number of outputs, %d, is greater than maximum allowed, 200", len(m))
	}
	t.Outputs = map[string]*Output{}
	for name, ov := range m {
		path := join("Outputs", name)
		if !alphanumeric(name) {
			return formatError(path, "Output name %s is non alphanumeric.", name)
		}
		def, ok := ov.(map[string]any)
		if !ok {
			return formatError(path, "Every Outputs member must be an object with a Value member")
		}
		var bad []string
		for k := range def {
			if !slices.Contains(outputKeys, k) {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return formatError(path, "Invalid outputs property : [%s]", strings.Join(bad, ", "))
		}
		o := &Output{Value: def["Value"]}
		if o.Value == nil {
			return formatError(path, "Every Outputs member must contain a Value object")
		}
		if o.Description, err = stringField(def, "Description", path); err != nil {
			return err
		}
		if o.Condition, err = stringField(def, "Condition", path); err != nil {
			return err
		}
		if ex, ok := def["Export"]; ok {
			em, ok := ex.(map[string]any)
			if !ok || em["Name"] == nil || len(em) != 1 {
				return formatError(join(path, "Export"), "Export must be an object with a single Name member")
			}
			o.ExportName = em["Name"]
		}
		t.Outputs[name] = o
	}
	return nil
}
