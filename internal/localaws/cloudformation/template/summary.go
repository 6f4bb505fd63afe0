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
