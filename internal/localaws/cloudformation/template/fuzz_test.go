package template

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"
)

func fuzzSeeds(f *testing.F) {
	f.Helper()
	for _, name := range []string{"testdata/amazon-eks-nodegroup.yaml", "testdata/amazon-eks-nodegroup-al2023.yaml", "testdata/eksctl-nodegroup.json", "../../../nodegroup/userdata/testdata/golden/cfn-al2.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(shortForms))
	f.Add([]byte(longForms))
	f.Add([]byte(evalHeader + "!Sub '${Env}-${B.Arn}'\n"))
	f.Add([]byte(paramsTemplate))
	for _, small := range []string{
		`{"Resources": {"A": {"Type": "T", "Properties": {"X": {"Fn::Sub": ["${V}-${B.Arn}", {"V": 1.5}]}}}, "B": {"Type": "T"}}}`,
		`{"Conditions": {"C": {"Fn::Not": [{"Fn::Equals": ["a", true]}]}}, "Resources": {"A": {"Type": "T", "Condition": "C", "Properties": {"X": {"Fn::If": ["C", [1, 2], {"Ref": "AWS::NoValue"}]}}}}}`,
		`{"Parameters": {"P": {"Type": "CommaDelimitedList", "Default": ["a", "b"]}}, "Resources": {"A": {"Type": "T", "Properties": {"X": {"Fn::Select": [1, {"Ref": "P"}]}, "Y": {"Fn::Cidr": ["10.0.0.0/16", 4, 8]}}}}}`,
		`{"Mappings": {"M": {"k": {"v": ["x"]}}}, "Resources": {"A": {"Type": "T", "DependsOn": ["B"], "Properties": {"X": {"Fn::Join": [",", {"Fn::FindInMap": ["M", "k", "v"]}]}}}, "B": {"Type": "T"}}, "Outputs": {"O": {"Value": {"Fn::Base64": {"Fn::GetAtt": ["A", "a.b"]}}}}}`,
	} {
		f.Add([]byte(small))
	}
}

// exampleValue is a value of a parameter's type, for evaluating any template.
func exampleValue(p *Parameter) string {
	if p.Default != nil {
		return *p.Default
	}
	if len(p.AllowedValues) > 0 {
		return p.AllowedValues[0]
	}
	elem, _, _ := baseType(p.Type)
	switch elem {
	case "Number":
		return "1"
	case "AWS::EC2::VPC::Id":
		return "vpc-1"
	case "AWS::EC2::Subnet::Id":
		return "subnet-1"
	case "AWS::EC2::SecurityGroup::Id":
		return "sg-1"
	case "AWS::EC2::Image::Id":
		return "ami-1"
	}
	return "x"
}

// FuzzParse: Parse never panics, and a template Parse and Validate accept evaluates,
// resource by resource in Order, without panicking.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		timer := time.AfterFunc(3*time.Second, func() { panic(fmt.Sprintf("slow input %q", body)) })
		defer timer.Stop()
		tmpl, err := Parse(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error %T is not an *Error: %v", err, err)
			}
			return
		}
		if err := tmpl.Validate(nil); err != nil {
			return
		}
		order := tmpl.Order()
		if len(order) != len(tmpl.Resources) || len(slices.Compact(slices.Sorted(slices.Values(order)))) != len(order) {
			t.Fatalf("Order() = %v is not every resource once", order)
		}
		params := map[string]string{}
		for name, p := range tmpl.Parameters {
			params[name] = exampleValue(p)
		}
		made := map[string]bool{}
		env := &Env{
			Parameters: params, AccountID: "123456789012", Region: "us-west-2", StackName: "s", StackID: "id",
			Zones: []string{"us-west-2a"},
			Resource: func(id string) (string, map[string]string, bool) {
				return id + "-1", map[string]string{"Arn": "arn:" + id}, made[id]
			},
			Import: func(string) (string, bool) { return "v", true },
		}
		env.Conditions, _ = tmpl.EvalConditions(env)
		for _, id := range order {
			for _, d := range tmpl.DependsOn(id) {
				if !made[d] {
					t.Fatalf("%s comes before its dependency %s in %v", id, d, order)
				}
			}
			_, _, _, _ = tmpl.EvalResource(id, env)
			made[id] = true
		}
		for _, id := range sortedKeys(tmpl.Outputs) {
			_, _ = tmpl.Eval(tmpl.Outputs[id].Value, env)
		}
		_ = tmpl.Summary()
		_, _ = tmpl.BindParameters(params, func(string) (string, error) { return "ami-1", nil })
	})
}

// FuzzJSONYAMLRoundTrip: a JSON template and its YAML re-encoding parse to the same
// Template.
func FuzzJSONYAMLRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			return
		}
		j, err := Parse(body)
		if err != nil {
			return
		}
		y, ok := reencodeYAML(t, body)
		if !ok {
			return // JSON the YAML library does not read (such as tab indentation)
		}
		yt, err := Parse(y)
		if err != nil {
			t.Fatalf("the YAML re-encoding is refused: %v\n%s", err, y)
		}
		ac, bc := *j, *yt
		ac.Body, bc.Body = nil, nil
		if !reflect.DeepEqual(ac, bc) {
			t.Fatalf("JSON and YAML differ:\n%s\n%s", body, y)
		}
	})
}
