package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const paramsTemplate = `
Parameters:
  Name: {Type: String, MinLength: 2, MaxLength: 5, AllowedPattern: "[a-z]+"}
  Pretty: {Type: String, Default: ab, AllowedPattern: "[a-z]+", ConstraintDescription: must be lower case}
  Size: {Type: Number, Default: 2, MinValue: 1, MaxValue: 10}
  Kind: {Type: String, Default: small, AllowedValues: [small, large]}
  Ports: {Type: "List<Number>", Default: "80,443"}
  Names: {Type: CommaDelimitedList, Default: "a, b"}
  Vpc: {Type: "AWS::EC2::VPC::Id", Default: vpc-0abc}
  Subnets: {Type: "List<AWS::EC2::Subnet::Id>", Default: "subnet-1, subnet-2"}
  Image: {Type: "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", Default: /aws/ami}
  Zones: {Type: "AWS::SSM::Parameter::Value<List<String>>", Default: /zones}
  Password: {Type: String, NoEcho: true, Default: secret1, MinLength: 3}
  Key: {Type: "AWS::EC2::KeyPair::KeyName", Default: mykey, NoEcho: true}
Resources:
  A: {Type: T}
`

func ssmFake(name string) (string, error) {
	switch name {
	case "/aws/ami":
		return "ami-0123", nil
	case "/zones":
		return "us-west-2a,us-west-2b", nil
	case "/bad-ami":
		return "not-an-ami", nil
	}
	return "", errors.New("ParameterNotFound")
}

func TestBindParameters(t *testing.T) {
	tmpl := mustValid(t, paramsTemplate)
	got, err := tmpl.BindParameters(map[string]string{"Name": "abc"}, ssmFake)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Name": "abc", "Pretty": "ab", "Size": "2", "Kind": "small", "Ports": "80,443", "Names": "a,b",
		"Vpc": "vpc-0abc", "Subnets": "subnet-1,subnet-2", "Image": "ami-0123", "Zones": "us-west-2a,us-west-2b",
		"Password": "secret1", "Key": "mykey",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BindParameters =\n%v, want\n%v", got, want)
	}
}

func TestBindParametersRefusals(t *testing.T) {
	tmpl := mustValid(t, paramsTemplate)
	for _, tc := range []struct {
		name  string
		given map[string]string
		msg   string
	}{
		{"unknown", map[string]string{"Name": "abc", "Nope": "x", "Also": "y"}, "Parameters: [Also, Nope] do not exist in the template"},
		{"missing", nil, "Parameters: [Name] must have values"},
		{"too short", map[string]string{"Name": "a"}, "Parameter 'Name' must contain at least 2 characters"},
		{"too long", map[string]string{"Name": "abcdef"}, "Parameter 'Name' must contain at most 5 characters"},
		{"pattern", map[string]string{"Name": "AB"}, "Parameter 'Name' must match pattern [a-z]+"},
		{"pattern is anchored", map[string]string{"Name": "ab1"}, "Parameter 'Name' must match pattern [a-z]+"},
		{"constraint description", map[string]string{"Name": "ab", "Pretty": "X"}, "Parameter 'Pretty' failed to satisfy constraint: must be lower case"},
		{"allowed values", map[string]string{"Name": "ab", "Kind": "medium"}, "Parameter 'Kind' must be one of AllowedValues"},
		{"not a number", map[string]string{"Name": "ab", "Size": "two"}, "Parameter 'Size' must be a number"},
		{"below min", map[string]string{"Name": "ab", "Size": "0"}, "Parameter 'Size' must be a number not less than 1"},
		{"above max", map[string]string{"Name": "ab", "Size": "10.5"}, "Parameter 'Size' must be a number not greater than 10"},
		{"number list", map[string]string{"Name": "ab", "Ports": "80,http"}, "Parameter 'Ports' must be a number"},
		{"vpc shape", map[string]string{"Name": "ab", "Vpc": "sg-1"}, "Parameter validation failed: parameter value sg-1 for parameter name Vpc does not exist"},
		{"subnet list shape", map[string]string{"Name": "ab", "Subnets": "subnet-1,vpc-2"}, "parameter value vpc-2 for parameter name Subnets does not exist"},
		{"ssm missing", map[string]string{"Name": "ab", "Image": "/nope"}, "Unable to fetch parameters [/nope] from parameter store for this account."},
		{"ssm value shape", map[string]string{"Name": "ab", "Image": "/bad-ami"}, "parameter value **** for parameter name Image does not exist"},
		{"secret never shown", map[string]string{"Name": "ab", "Password": "xy"}, "Parameter 'Password' must contain at least 3 characters"},
		{"secret of an AWS type", map[string]string{"Name": "ab", "Key": ""}, "parameter value **** for parameter name Key does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tmpl.BindParameters(tc.given, ssmFake)
			assertError(t, err, "", tc.msg)
			for _, secret := range []string{"xy", "not-an-ami"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a secret", err)
				}
			}
		})
	}
	if _, err := tmpl.BindParameters(map[string]string{"Name": "ab"}, nil); err == nil || !strings.Contains(err.Error(), "Unable to fetch parameters [/aws/ami]") {
		t.Errorf("without Parameter Store: %v", err)
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name, resources string
		caps            []string
		reason          string
	}{
		{"none", "A: {Type: AWS::EC2::VPC}", nil, ""},
		{"iam", "A: {Type: AWS::IAM::Role}\n  B: {Type: AWS::IAM::InstanceProfile, Properties: {Path: /}}\n  C: {Type: AWS::IAM::Role}", []string{"CAPABILITY_IAM"}, "The following resource(s) require capabilities: [AWS::IAM::InstanceProfile, AWS::IAM::Role]"},
		{"named iam", "A: {Type: AWS::IAM::Role, Properties: {RoleName: r}}\n  B: {Type: AWS::EC2::VPC}", []string{"CAPABILITY_NAMED_IAM"}, "The following resource(s) require capabilities: [AWS::IAM::Role]"},
		{"named instance profile", "A: {Type: AWS::IAM::InstanceProfile, Properties: {InstanceProfileName: !Sub '${AWS::StackName}'}}", []string{"CAPABILITY_NAMED_IAM"}, "The following resource(s) require capabilities: [AWS::IAM::InstanceProfile]"},
		{"policy name is no custom name", "A: {Type: AWS::IAM::Policy, Properties: {PolicyName: p}}", []string{"CAPABILITY_IAM"}, "The following resource(s) require capabilities: [AWS::IAM::Policy]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := mustValid(t, "Description: d\nParameters:\n  Z: {Type: String, Default: z, Description: zed}\n  P: {Type: String, NoEcho: true, Default: s}\n  Q: {Type: Number}\nResources:\n  "+tc.resources+"\n")
			s := tmpl.Summary()
			if !reflect.DeepEqual(s.Capabilities, tc.caps) || s.CapabilitiesReason != tc.reason {
				t.Errorf("Capabilities = %v %q, want %v %q", s.Capabilities, s.CapabilitiesReason, tc.caps, tc.reason)
			}
			if s.Description != "d" || len(s.Parameters) != 3 {
				t.Fatalf("Summary = %+v", s)
			}
			z, p, a := s.Parameters[0], s.Parameters[1], s.Parameters[2]
			if z.Key != "Z" || *z.Default != "z" || z.Description != "zed" || z.NoEcho {
				t.Errorf("Z = %+v", z)
			}
			if p.Key != "P" || *p.Default != "****" || !p.NoEcho {
				t.Errorf("P = %+v", p)
			}
			if a.Key != "Q" || a.Default != nil {
				t.Errorf("A = %+v", a)
			}
			want := ""
			if tc.caps != nil {
				want = tc.caps[0]
			}
			if got := tmpl.RequiredCapability(); got != want {
				t.Errorf("RequiredCapability = %q, want %q", got, want)
			}
		})
	}
}
