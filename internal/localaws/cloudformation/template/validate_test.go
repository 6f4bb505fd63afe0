package template

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeTypes are the resource types the node-group templates use.
var nodeTypes = []string{"AWS::AutoScaling::AutoScalingGroup", "AWS::EKS::AccessEntry", "AWS::EC2::LaunchTemplate", "AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupEgress", "AWS::EC2::SecurityGroupIngress", "AWS::IAM::InstanceProfile", "AWS::IAM::Role"}

func supportedNodeTypes(typ string) bool { return slices.Contains(nodeTypes, typ) }

func TestGoldenValidateAndOrder(t *testing.T) {
	for _, tc := range []struct {
		file  string
		order []string
		deps  map[string][]string
	}{
		{
			file: "testdata/amazon-eks-nodegroup.yaml",
			order: []string{
				"NodeInstanceRole", "NodeInstanceProfile", "NodeSecurityGroup", "ClusterControlPlaneSecurityGroupIngress",
				"NodeLaunchTemplate", "NodeGroup", "NodeSecurityGroupFromControlPlaneIngress", "NodeSecurityGroupIngress",
			},
			deps: map[string][]string{
				"NodeGroup":          {"NodeLaunchTemplate"},
				"NodeLaunchTemplate": {"NodeInstanceProfile", "NodeSecurityGroup"},
				"NodeInstanceRole":   nil,
			},
		},
		{
			file: "testdata/amazon-eks-nodegroup-al2023.yaml",
			order: []string{
				"NodeInstanceRole", "NodeAccessEntry", "NodeInstanceProfile", "NodeSecurityGroup", "ClusterControlPlaneSecurityGroupIngress",
				"NodeLaunchTemplate", "NodeGroup", "NodeSecurityGroupFromControlPlaneIngress", "NodeSecurityGroupIngress",
			},
			deps: map[string][]string{"NodeAccessEntry": {"NodeInstanceRole"}, "NodeGroup": {"NodeLaunchTemplate"}},
		},
		{
			file:  "testdata/eksctl-nodegroup.json",
			order: []string{"NodeInstanceRole", "NodeInstanceProfile", "SG", "EgressInterCluster", "EgressInterClusterAPI", "IngressInterClusterCP", "NodeGroupLaunchTemplate", "NodeGroup"},
			deps:  map[string][]string{"NodeGroup": {"NodeGroupLaunchTemplate"}, "EgressInterCluster": {"SG"}},
		},
		{
			file:  "../../../nodegroup/userdata/testdata/golden/cfn-al2023.yaml",
			order: []string{"NodeInstanceRole", "NodeInstanceProfile", "NodeSecurityGroup", "ControlPlaneIngressFromNodes", "NodeLaunchTemplate", "NodeGroup", "NodeSecurityGroupFromControlPlaneIngress", "NodeSecurityGroupIngress"},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tmpl := mustParse(t, readGolden(t, tc.file))
			if err := tmpl.Validate(supportedNodeTypes); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tmpl.Order(); !reflect.DeepEqual(got, tc.order) {
				t.Errorf("Order() =\n%v, want\n%v", got, tc.order)
			}
			for id, want := range tc.deps {
				if got := tmpl.DependsOn(id); !reflect.DeepEqual(got, want) {
					t.Errorf("DependsOn(%s) = %v, want %v", id, got, want)
				}
			}
		})
	}
}

func TestOrderDiamond(t *testing.T) {
	tmpl := mustValid(t, `
Resources:
  Top: {Type: T, Properties: {L: !Ref Left, R: !GetAtt Right.Arn}}
  Left: {Type: T, Properties: {B: !Sub "${Bottom}"}}
  Right: {Type: T, DependsOn: Bottom}
  Bottom: {Type: T}
  Alone: {Type: T}
`)
	want := []string{"Alone", "Bottom", "Left", "Right", "Top"}
	if got := tmpl.Order(); !reflect.DeepEqual(got, want) {
		t.Errorf("Order() = %v, want %v", got, want)
	}
	if got := tmpl.DependsOn("Top"); !reflect.DeepEqual(got, []string{"Left", "Right"}) {
		t.Errorf("DependsOn(Top) = %v", got)
	}
}

func TestValidateRefusals(t *testing.T) {
	const params = "Parameters: {P: {Type: String, Default: x}, L: {Type: CommaDelimitedList, Default: a}}\nConditions: {C: !Equals [a, b]}\nMappings: {M: {a: {b: c}}}\n"
	for _, tc := range []struct {
		name, body, path, msg string
	}{
		{"cycle", "Resources:\n  A: {Type: T, Properties: {X: !Ref B}}\n  B: {Type: T, Properties: {X: !GetAtt C.Id}}\n  C: {Type: T, DependsOn: A}\n  D: {Type: T, DependsOn: A}\n", "", "Circular dependency between resources: [A, B, C]"},
		{"self", "Resources:\n  A: {Type: T, Properties: {X: !Sub '${A.Arn}'}}\n", "", "Circular dependency between resources: [A]"},
		{"unsupported types", "Resources: {A: {Type: AWS::S3::Bucket}, B: {Type: AWS::Lambda::Function}, C: {Type: AWS::IAM::Role}}", "", "Template format error: Unrecognized resource types: [AWS::Lambda::Function, AWS::S3::Bucket]"},
		{"ref unknown", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: [a, !Ref Nope]}}}", "Resources.A.Properties.X[1].Ref", "Template format error: Unresolved resource dependencies [Nope] in the Resources block of the template"},
		{"ref shape", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: {Ref: [a]}}}}", "Resources.A.Properties.X.Ref", "Template format error: Every Ref object must have a single String value."},
		{"every unknown name at once", "Resources:\n  A: {Type: T, DependsOn: [Nope], Properties: {X: [!Ref Gone, !Sub '${Nope}-${Missing}']}}\n  B: {Type: T, Properties: {Y: !Ref Gone}}\n", "Resources.A.DependsOn[0]", "Template format error: Unresolved resource dependencies [Nope, Gone, Missing] in the Resources block of the template"},
		{"depends on unknown", "Resources: {A: {Type: AWS::IAM::Role, DependsOn: [Nope]}}", "Resources.A.DependsOn[0]", "Template format error: Unresolved resource dependencies [Nope] in the Resources block of the template"},
		{"getatt unknown", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: !GetAtt Nope.Arn}}}", "Resources.A.Properties.X.Fn::GetAtt", "Template error: instance of Fn::GetAtt references undefined resource Nope"},
		{"getatt arity", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: {Fn::GetAtt: [A]}}}}", "Resources.A.Properties.X.Fn::GetAtt", "Template error: every Fn::GetAtt object requires two non-empty parameters"},
		{"sub unknown", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: !Sub 'a-${Nope}'}}}", "Resources.A.Properties.X.Fn::Sub", "Unresolved resource dependencies [Nope]"},
		{"sub unknown attr", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: !Sub '${Nope.Arn}'}}}", "Resources.A.Properties.X.Fn::Sub", "Template error: instance of Fn::Sub references undefined resource Nope"},
		{"sub var name", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: !Sub '${a b}'}}}", "Resources.A.Properties.X.Fn::Sub", "Template error: variable names in Fn::Sub syntax must contain only alphanumeric characters, underscores, periods, and colons"},
		{"sub shape", "Resources: {A: {Type: AWS::IAM::Role, Properties: {X: !Sub [a, b, c]}}}", "Resources.A.Properties.X.Fn::Sub", "One or more Fn::Sub intrinsic functions don't specify expected arguments"},
		{"join arity", "Resources: {A: {Type: T, Properties: {X: !Join [',']}}}", "Resources.A.Properties.X.Fn::Join", "Template error: every Fn::Join object requires two parameters"},
		{"split arity", "Resources: {A: {Type: T, Properties: {X: !Split [',', [a]]}}}", "Resources.A.Properties.X.Fn::Split", "every Fn::Split object requires two parameters"},
		{"select index", "Resources: {A: {Type: T, Properties: {X: !Select [-1, [a]]}}}", "Resources.A.Properties.X.Fn::Select", "Fn::Select requires a list argument with two elements"},
		{"if arity", params + "Resources: {A: {Type: T, Properties: {X: !If [C, a]}}}", "Resources.A.Properties.X.Fn::If", "Fn::If requires a list argument with three elements"},
		{"if condition function", params + "Resources: {A: {Type: T, Properties: {X: !If [!Ref P, a, b]}}}", "Resources.A.Properties.X.Fn::If[0]", "Template error: Fn::If requires a list argument with the first element being a condition"},
		{"if condition", params + "Resources: {A: {Type: T, Properties: {X: !If [Nope, a, b]}}}", "Resources.A.Properties.X.Fn::If[0]", "Template error: unresolved condition dependency Nope in Fn::If"},
		{"equals arity", "Conditions: {C: !Equals [a]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::Equals", "Fn::Equals requires a list argument with two elements"},
		{"not arity", "Conditions: {C: !Not [!Equals [a, a], !Equals [a, a]]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::Not", "Fn::Not requires a list argument with one condition"},
		{"and arity", "Conditions: {C: !And [!Equals [a, a]]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::And", "every Fn::And object requires a list of at least 2 and at most 10 conditions"},
		{"or element", "Conditions: {C: !Or [a, b]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::Or[0]", "Fn::Or takes conditions"},
		{"condition shape", "Conditions: {C: x}\nResources: {A: {Type: T}}", "Conditions.C", "Condition C must be one of the condition functions"},
		{"condition unknown", "Conditions: {C: !Not [!Condition D]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::Not[0].Condition", "Template format error: Unresolved condition dependencies [D] in the Conditions block of the template"},
		{"condition resource", "Conditions: {C: !Equals [!Ref A, a]}\nResources: {A: {Type: T}}", "Conditions.C.Fn::Equals[0].Ref", "Template format error: Unresolved dependencies [A]. Cannot reference resources in the Conditions block of the template"},
		{"condition cycle", "Conditions: {C: !Not [!Condition D], D: !Not [!Condition C]}\nResources: {A: {Type: T}}", "Conditions", "Circular condition dependency between conditions: [C, D]"},
		{"resource condition", "Resources: {A: {Type: T, Condition: Nope}}", "Resources.A.Condition", "Template format error: Unresolved condition dependencies [Nope] in the Resources block of the template"},
		{"output condition", "Resources: {A: {Type: T}}\nOutputs: {O: {Value: x, Condition: Nope}}", "Outputs.O.Condition", "Unresolved condition dependencies [Nope] in the Outputs block of the template"},
		{"output ref", "Resources: {A: {Type: T}}\nOutputs: {O: {Value: !Ref Nope}}", "Outputs.O.Value.Ref", "Unresolved resource dependencies [Nope] in the Outputs block of the template"},
		{"export ref", "Resources: {A: {Type: T}}\nOutputs: {O: {Value: x, Export: {Name: !GetAtt Nope.Name}}}", "Outputs.O.Export.Name.Fn::GetAtt", "instance of Fn::GetAtt references undefined resource Nope"},
		{"find in map name", params + "Resources: {A: {Type: T, Properties: {X: !FindInMap [N, a, b]}}}", "Resources.A.Properties.X.Fn::FindInMap[0]", "Template error: Mapping named 'N' is not present in the 'Mappings' section of template."},
		{"find in map arity", params + "Resources: {A: {Type: T, Properties: {X: !FindInMap [M, a]}}}", "Resources.A.Properties.X.Fn::FindInMap", "every Fn::FindInMap object requires three parameters"},
		{"base64 shape", "Resources: {A: {Type: T, Properties: {X: !Base64 [a]}}}", "Resources.A.Properties.X.Fn::Base64", "Fn::Base64 requires a single string value"},
		{"cidr arity", "Resources: {A: {Type: T, Properties: {X: !Cidr [a]}}}", "Resources.A.Properties.X.Fn::Cidr", "Fn::Cidr requires a list argument with three elements"},
		{"unknown function", "Resources: {A: {Type: T, Properties: {X: {Fn::Length: [a]}}}}", "Resources.A.Properties.X.Fn::Length", "Template error: Encountered unsupported function: Fn::Length Supported functions are: [Fn::Base64,"},
		{"condition outside conditions", "Conditions: {C: !Equals [a, a]}\nResources: {A: {Type: T, Properties: {X: {Fn::Not: [{Fn::Length: x}]}}}}", "Resources.A.Properties.X.Fn::Not[0]", "Fn::Not takes conditions"},
		{"deletion policy", "Resources: {A: {Type: T, DeletionPolicy: Keep}}", "Resources.A.DeletionPolicy", "Unrecognized DeletionPolicy Keep for resource A"},
		{"logical ID clash", params + "Resources: {P: {Type: T}}", "Resources.P", "logical IDs must be unique"},
		{"pattern", "Parameters: {P: {Type: String, AllowedPattern: '[a-'}}\nResources: {A: {Type: T}}", "Parameters.P.AllowedPattern", "not a valid regular expression"},
		{"transform", "Transform: AWS::Serverless-2016-10-31\nResources: {A: {Type: T}}", "Transform", "Transform is not supported here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := mustParse(t, tc.body)
			supported := func(typ string) bool { return typ == "T" || typ == "AWS::IAM::Role" }
			assertError(t, tmpl.Validate(supported), tc.path, tc.msg)
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	// Names a template may use without declaring them, and the forms AWS accepts.
	mustValid(t, `
Parameters: {P: {Type: String}}
Conditions:
  C: !Equals [!Ref "AWS::Region", us-west-2]
  D: !Or [!Condition C, !Not [!Condition C], !And [!Condition C, !Condition C]]
Resources:
  A:
    Type: T
    Properties:
      Pseudo: [!Ref "AWS::AccountId", !Ref "AWS::NotificationARNs", !Ref "AWS::StackId", !Ref "AWS::URLSuffix"]
      Sub: !Sub "${AWS::Partition}${P}${!Literal}${B}${B.Arn}${ unclosed"
      GetAtt: !GetAtt [B, !Ref P]
      Statement: {Condition: {StringEquals: {a: b}}}
      Select: !Select [!Ref P, !GetAZs {Ref: "AWS::Region"}]
      Imp: !ImportValue {Fn::Sub: "${P}-x"}
  B: {Type: T, Condition: D}
Outputs:
  O: {Value: !Join [",", !Ref "AWS::NotificationARNs"], Export: {Name: !Sub "${AWS::StackName}-O"}}
`)
	if !strings.Contains(strings.Join(functions, ","), "Fn::Sub") {
		t.Error("Fn::Sub missing from the supported functions")
	}
}
