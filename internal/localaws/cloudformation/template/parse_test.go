package template

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

func mustParse(t *testing.T, body string) *Template {
	t.Helper()
	tmpl, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tmpl
}

func mustValid(t *testing.T, body string) *Template {
	t.Helper()
	tmpl := mustParse(t, body)
	if err := tmpl.Validate(nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return tmpl
}

// sameTemplate compares two templates, leaving out the bodies they came from.
func sameTemplate(t *testing.T, a, b *Template) {
	t.Helper()
	ac, bc := *a, *b
	ac.Body, bc.Body = nil, nil
	if !reflect.DeepEqual(ac, bc) {
		t.Errorf("templates differ:\n%#v\n%#v", ac, bc)
	}
}

const shortForms = `
Parameters:
  Env: {Type: String, Default: prod}
  Nets: {Type: CommaDelimitedList, Default: "a,b"}
Mappings:
  M: {prod: {Size: "3"}}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  NotProd: !Not [!Condition IsProd]
  Both: !And [!Condition IsProd, !Or [!Condition NotProd, !Equals [a, a]]]
Resources:
  A:
    Type: X::Y::Z
    Properties:
      Ref: !Ref Env
      Att: !GetAtt B.Some.Nested.Name
      Sub: !Sub "${Env}-${AWS::Region}"
      SubMap: !Sub ["${X}", {X: !Ref Env}]
      Join: !Join ["-", [a, !Ref Env]]
      Select: !Select [1, !Split [",", "x,y"]]
      If: !If [IsProd, yes, !Ref "AWS::NoValue"]
      Find: !FindInMap [M, !Ref Env, Size]
      B64: !Base64 hello
      AZ: !Select [0, !GetAZs ""]
      Imp: !ImportValue other::Export
      Cidr: !Cidr [10.0.0.0/16, 2, 8]
      Num: 1.50
      Int: +10
      Bool: True
  B:
    Type: X::Y::Z
`

const longForms = `{
 "Parameters": {"Env": {"Type": "String", "Default": "prod"}, "Nets": {"Type": "CommaDelimitedList", "Default": "a,b"}},
 "Mappings": {"M": {"prod": {"Size": "3"}}},
 "Conditions": {
  "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
  "NotProd": {"Fn::Not": [{"Condition": "IsProd"}]},
  "Both": {"Fn::And": [{"Condition": "IsProd"}, {"Fn::Or": [{"Condition": "NotProd"}, {"Fn::Equals": ["a", "a"]}]}]}
 },
 "Resources": {
  "A": {"Type": "X::Y::Z", "Properties": {
   "Ref": {"Ref": "Env"},
   "Att": {"Fn::GetAtt": ["B", "Some.Nested.Name"]},
   "Sub": {"Fn::Sub": "${Env}-${AWS::Region}"},
   "SubMap": {"Fn::Sub": ["${X}", {"X": {"Ref": "Env"}}]},
   "Join": {"Fn::Join": ["-", ["a", {"Ref": "Env"}]]},
   "Select": {"Fn::Select": [1, {"Fn::Split": [",", "x,y"]}]},
   "If": {"Fn::If": ["IsProd", "yes", {"Ref": "AWS::NoValue"}]},
   "Find": {"Fn::FindInMap": ["M", {"Ref": "Env"}, "Size"]},
   "B64": {"Fn::Base64": "hello"},
   "AZ": {"Fn::Select": ["0", {"Fn::GetAZs": ""}]},
   "Imp": {"Fn::ImportValue": "other::Export"},
   "Cidr": {"Fn::Cidr": ["10.0.0.0/16", 2, 8]},
   "Num": 1.5,
   "Int": 10,
   "Bool": true
  }},
  "B": {"Type": "X::Y::Z"}
 }
}`

func TestShortFormsAreLongForms(t *testing.T) {
	y := mustValid(t, shortForms)
	j := mustValid(t, longForms)
	sameTemplate(t, y, j)
	if got := y.ParameterOrder; !reflect.DeepEqual(got, []string{"Env", "Nets"}) {
		t.Errorf("ParameterOrder = %v", got)
	}
	if string(y.Body) != shortForms {
		t.Error("Body is not the template as given")
	}
}

// reencodeYAML turns a JSON body into block-style YAML, keeping key order.
func reencodeYAML(t testing.TB, body []byte) ([]byte, bool) {
	var n yaml.Node
	if err := yaml.Unmarshal(body, &n); err != nil {
		return nil, false
	}
	var clear func(*yaml.Node)
	clear = func(n *yaml.Node) {
		n.Style &^= yaml.FlowStyle
		for _, c := range n.Content {
			clear(c)
		}
	}
	clear(&n)
	out, err := yaml.Marshal(&n)
	if err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	return out, true
}

func TestGoldenRoundTrip(t *testing.T) {
	for _, name := range []string{"testdata/eksctl-nodegroup.json", "longForms"} {
		body := []byte(longForms)
		if name != "longForms" {
			var err error
			if body, err = os.ReadFile(name); err != nil {
				t.Fatal(err)
			}
		}
		j := mustValid(t, string(body))
		y, ok := reencodeYAML(t, body)
		if !ok || bytes.HasPrefix(bytes.TrimSpace(y), []byte("{")) {
			t.Fatalf("%s did not re-encode as block YAML", name)
		}
		sameTemplate(t, j, mustValid(t, string(y)))
	}
}

func TestParseShapes(t *testing.T) {
	tmpl := mustParse(t, `
AWSTemplateFormatVersion: 2010-09-09
Description: d
Parameters:
  Z: {Type: Number, Default: 5, MinValue: 1, MaxValue: 9.5, NoEcho: true}
  A: {Type: String, AllowedValues: [x, 1], MinLength: 1, MaxLength: 3, AllowedPattern: "[a-z]+", ConstraintDescription: lower}
  L: {Type: CommaDelimitedList, Default: [a, b]}
Resources:
  R:
    Type: T::T::T
    DependsOn: [S]
    Condition: C
    DeletionPolicy: Retain
    UpdateReplacePolicy: Delete
    Metadata: {k: v}
    CreationPolicy: {ResourceSignal: {Count: 2, Timeout: PT5M}}
    UpdatePolicy: {AutoScalingRollingUpdate: {}}
  S: {Type: T::T::T, DependsOn: R2}
  R2: {Type: T::T::T}
Conditions:
  C: !Equals [a, a]
Outputs:
  O: {Value: v, Description: od, Condition: C, Export: {Name: !Sub "${AWS::StackName}-o"}}
`)
	if tmpl.FormatVersion != "2010-09-09" || tmpl.Description != "d" {
		t.Errorf("FormatVersion %q Description %q", tmpl.FormatVersion, tmpl.Description)
	}
	if got := tmpl.ParameterOrder; !reflect.DeepEqual(got, []string{"Z", "A", "L"}) {
		t.Errorf("ParameterOrder = %v", got)
	}
	z := tmpl.Parameters["Z"]
	if z.Type != "Number" || *z.Default != "5" || *z.MinValue != 1 || *z.MaxValue != 9.5 || !z.NoEcho {
		t.Errorf("Z = %+v", z)
	}
	a := tmpl.Parameters["A"]
	if !reflect.DeepEqual(a.AllowedValues, []string{"x", "1"}) || *a.MinLength != 1 || *a.MaxLength != 3 || a.AllowedPattern != "[a-z]+" || a.ConstraintDescription != "lower" || a.Default != nil {
		t.Errorf("A = %+v", a)
	}
	if *tmpl.Parameters["L"].Default != "a,b" {
		t.Errorf("L's list default = %q", *tmpl.Parameters["L"].Default)
	}
	r := tmpl.Resources["R"]
	want := &Resource{
		Type: "T::T::T", DependsOn: []string{"S"}, Condition: "C", DeletionPolicy: "Retain", UpdateReplacePolicy: "Delete",
		Metadata:       map[string]any{"k": "v"},
		CreationPolicy: map[string]any{"ResourceSignal": map[string]any{"Count": "2", "Timeout": "PT5M"}},
		UpdatePolicy:   map[string]any{"AutoScalingRollingUpdate": map[string]any{}},
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("R = %#v", r)
	}
	if got := tmpl.Resources["S"].DependsOn; !reflect.DeepEqual(got, []string{"R2"}) {
		t.Errorf("S.DependsOn = %v", got)
	}
	o := tmpl.Outputs["O"]
	if o.Value != "v" || o.Description != "od" || o.Condition != "C" || !reflect.DeepEqual(o.ExportName, map[string]any{"Fn::Sub": "${AWS::StackName}-o"}) {
		t.Errorf("O = %+v", o)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body, path, msg string
	}{
		{"bad JSON", "{\n \"Resources\": {,}\n}", "", "Template format error: JSON not well-formed. (line 2, column 16)"},
		{"bad YAML", "Resources:\n  A: [\n", "", "Template format error: YAML not well-formed. did not find expected node content (line 2)"},
		{"byte order mark", "\ufeff{\"Resources\": 1}", "Resources", "Resources must be an object"},
		{"scalar", "hello", "", "Template format error: unsupported structure."},
		{"empty", "", "", "Template format error: unsupported structure."},
		{"two documents", "Resources: {}\n---\nA: b\n", "", "A template is one YAML document"},
		{"unknown section", "Resources: {A: {Type: T}}\nFoo: 1\nBar: 2\n", "", "Template format error: Invalid template property or properties [Bar, Foo]"},
		{"version", "AWSTemplateFormatVersion: 2011-01-01\nResources: {A: {Type: T}}", "AWSTemplateFormatVersion", "Unsupported template version 2011-01-01"},
		{"no resources", "Description: x", "", "Template format error: At least one Resources member must be defined."},
		{"resource without type", "Resources: {A: {Properties: {}}}", "Resources.A", "Template format error: Every Resources object must contain a Type member."},
		{"resource name", "Resources: {A-b: {Type: T}}", "Resources.A-b", "Template format error: Resource name A-b is non alphanumeric."},
		{"resource attribute", "Resources: {A: {Type: T, Propertes: {}}}", "Resources.A", "Template format error: Invalid template resource property 'Propertes'"},
		{"depends on shape", "Resources: {A: {Type: T, DependsOn: {x: y}}}", "Resources.A.DependsOn", "DependsOn must be a string or a list of strings"},
		{"null", "Resources: {A: {Type: T, Properties: {X: [a, null]}}}", "Resources.A.Properties.X[1]", "Template format error: 'null' values are not allowed in templates"},
		{"json null", `{"Resources": {"A": {"Type": "T", "Properties": {"X": null}}}}`, "Resources.A.Properties.X", "'null' values are not allowed"},
		{"json duplicate", `{"Resources": {"A": {"Type": "T"}, "A": {"Type": "T"}}}`, "Resources.A", "Duplicate key A"},
		{"yaml duplicate", "Resources:\n  A: {Type: T}\n  A: {Type: T}\n", "Resources.A", "YAML not well-formed. Duplicate key A (line 3, column 3)"},
		{"alias", "Resources:\n  A: &a {Type: T}\n  B: *a\n", "Resources.B", "Aliases are not supported"},
		{"unknown tag", "Resources: {A: {Type: T, Properties: {X: !Reff Y}}}", "Resources.A.Properties.X", "Unsupported tag !Reff (line 1, column 42)"},
		{"parameter type", "Parameters: {P: {Type: Strin}}\nResources: {A: {Type: T}}", "Parameters.P.Type", "Template format error: Unrecognized parameter type: Strin"},
		{"parameter without type", "Parameters: {P: {Default: x}}\nResources: {A: {Type: T}}", "Parameters.P", "Template format error: Every Parameters object must contain a Type member."},
		{"parameter property", "Parameters: {P: {Type: String, Defaults: x}}\nResources: {A: {Type: T}}", "Parameters.P", "Template format error: Invalid template parameter property 'Defaults'"},
		{"parameter bound", "Parameters: {P: {Type: Number, MinValue: x}}\nResources: {A: {Type: T}}", "Parameters.P.MinValue", "MinValue must be a number"},
		{"mapping value", "Mappings: {M: {a: {b: {c: d}}}}\nResources: {A: {Type: T}}", "Mappings.M.a.b", "Template format error: Every Mappings attribute must be a String or a List."},
		{"output without value", "Resources: {A: {Type: T}}\nOutputs: {O: {Description: x}}", "Outputs.O", "Template format error: Every Outputs member must contain a Value object"},
		{"output property", "Resources: {A: {Type: T}}\nOutputs: {O: {Value: x, Exports: y}}", "Outputs.O", "Template format error: Invalid outputs property : [Exports]"},
		{"too large", "Description: " + strings.Repeat("x", MaxBodySize), "", "Template may not exceed 1000000 bytes in size."},
		{"too deep", strings.Repeat("[", 200) + strings.Repeat("]", 200), strings.Repeat("[0]", 101), "nested more than 100 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body))
			assertError(t, err, tc.path, tc.msg)
		})
	}
}

// assertError checks err is an *Error at path whose message contains msg.
func assertError(t *testing.T, err error, path, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want an *Error", err)
	}
	if e.Path != path || !strings.Contains(e.Message, msg) {
		t.Errorf("error = (%q, %q), want (%q, containing %q)", e.Path, e.Message, path, msg)
	}
	if strings.Contains(e.Message, "yaml:") || strings.Contains(e.Message, "json:") {
		t.Errorf("error %q leaks a library's message", e.Message)
	}
}

func TestErrorString(t *testing.T) {
	if got := (&Error{Message: "m"}).Error(); got != "m" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Path: "Resources.A", Message: "m"}).Error(); got != "m (at Resources.A)" {
		t.Errorf("Error() = %q", got)
	}
}
