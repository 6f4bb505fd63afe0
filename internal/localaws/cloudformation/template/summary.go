package template

import (
	"slices"
	"strings"
)

// Summary is what ValidateTemplate answers about a template.
type Summary struct {
	Description string
	// Parameters are the template's parameters in the order it writes them.
	Parameters []ParameterSummary
	// Capabilities are what CreateStack must be given: ["CAPABILITY_IAM"], or
	// ["CAPABILITY_NAMED_IAM"] when an IAM resource has an explicit name; nil when none.
	Capabilities []string
	// CapabilitiesReason names the resource types that need them.
	CapabilitiesReason string
}

// ParameterSummary is one parameter as ValidateTemplate describes it.
type ParameterSummary struct {
	Key         string
	Default     *string
	NoEcho      bool
	Description string
}

// iamNameProperty maps the IAM resource types that need a capability to the property
// that names one explicitly ("" when the type has none), which makes the capability
// CAPABILITY_NAMED_IAM.
var iamNameProperty = map[string]string{
	"AWS::IAM::AccessKey":           "",
	"AWS::IAM::Group":               "GroupName",
	"AWS::IAM::InstanceProfile":     "InstanceProfileName",
	"AWS::IAM::ManagedPolicy":       "ManagedPolicyName",
	"AWS::IAM::Policy":              "",
	"AWS::IAM::Role":                "RoleName",
	"AWS::IAM::User":                "UserName",
	"AWS::IAM::UserToGroupAddition": "",
}

// Summary returns what ValidateTemplate answers. A NoEcho parameter's default is
// not shown, as AWS masks it.
func (t *Template) Summary() Summary {
	s := Summary{Description: t.Description}
	for _, name := range t.ParameterOrder {
		p := t.Parameters[name]
		ps := ParameterSummary{Key: name, NoEcho: p.NoEcho, Description: p.Description}
		if p.Default != nil {
			d := *p.Default
			if p.NoEcho {
				d = "****"
			}
			ps.Default = &d
		}
		s.Parameters = append(s.Parameters, ps)
	}
	var types []string
	named := false
	for _, id := range sortedKeys(t.Resources) {
		r := t.Resources[id]
		prop, ok := iamNameProperty[r.Type]
		if !ok {
			continue
		}
		if !slices.Contains(types, r.Type) {
			types = append(types, r.Type)
		}
		if _, has := r.Properties[prop]; prop != "" && has {
			named = true
		}
	}
	if len(types) == 0 {
		return s
	}
	slices.Sort(types)
	s.Capabilities = []string{"CAPABILITY_IAM"}
	if named {
		s.Capabilities = []string{"CAPABILITY_NAMED_IAM"}
	}
	s.CapabilitiesReason = "The following resource(s) require capabilities: [" + strings.Join(types, ", ") + "]"
	return s
}

// RequiredCapability is the capability CreateStack and UpdateStack must be given
// for the template ("" when none): the error they answer without it is
// "Requires capabilities : [CAPABILITY_IAM]".
func (t *Template) RequiredCapability() string {
	if c := t.Summary().Capabilities; len(c) > 0 {
		return c[0]
	}
	return ""
}

// OutputValue is one output of a made stack.
type OutputValue struct {
	Key, Value, Description string
	// ExportName is the output's export name, "" without an export.
	ExportName string
}

// EvalOutputs evaluates the outputs whose condition (if any) is true, sorted by key,
// as DescribeStacks lists them. A list value is comma-joined, as CloudFormation
// shows a List parameter's Ref; any other value that is no string is an error.
func (t *Template) EvalOutputs(env *Env) ([]OutputValue, error) {
	var out []OutputValue
	e := t.newEvaluator(env)
	for _, key := range sortedKeys(t.Outputs) {
		o, path := t.Outputs[key], join("Outputs", key)
		if o.Condition != "" {
			on, err := e.condition(o.Condition, join(path, "Condition"))
			if err != nil {
				return nil, t.redact(err, env)
			}
			if !on {
				continue
			}
		}
		value, err := outputString(t, join(path, "Value"), o.Value, env)
		if err != nil {
			return nil, err
		}
		ov := OutputValue{Key: key, Value: value, Description: o.Description}
		if o.ExportName != nil {
			if ov.ExportName, err = outputString(t, join(path, "Export.Name"), o.ExportName, env); err != nil {
				return nil, err
			}
		}
		out = append(out, ov)
	}
	return out, nil
}

func outputString(t *Template, path string, v any, env *Env) (string, error) {
	r, err := t.EvalAt(path, v, env)
	if err != nil {
		return "", err
	}
	switch r := r.(type) {
	case string:
		return r, nil
	case []any:
		parts := make([]string, 0, len(r))
		for _, it := range r {
			s, ok := it.(string)
			if !ok {
				return "", formatError(path, "The Value field of every Outputs member must evaluate to a String")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", formatError(path, "The Value field of every Outputs member must evaluate to a String")
}
