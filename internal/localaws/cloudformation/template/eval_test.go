package template

import (
	"encoding/base64"
	"maps"
	"reflect"
	"strings"
	"testing"
)

const evalHeader = `
Parameters:
  Env: {Type: String}
  Nets: {Type: "List<AWS::EC2::Subnet::Id>"}
  Names: {Type: CommaDelimitedList}
  Count: {Type: Number}
  Secret: {Type: String, NoEcho: true}
Mappings:
  Sizes:
    prod: {Nodes: "3", Zones: [a, b]}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
  IsDev: !Not [!Condition IsProd]
  ProdInRegion: !And [!Condition IsProd, !Equals [!Ref "AWS::Region", us-west-2]]
  Either: !Or [!Condition IsDev, !Equals [!FindInMap [Sizes, prod, Nodes], "3"]]
Resources:
  B: {Type: T}
  Gone: {Type: T, Condition: IsDev}
  A:
    Type: T
    Properties:
      X: `

func evalEnv(t *Template) *Env {
	env := &Env{
		Parameters: map[string]string{"Env": "prod", "Nets": "subnet-1,subnet-2", "Names": "a,b,c", "Count": "2", "Secret": "hunter2"},
		AccountID:  "123456789012", Region: "us-west-2", StackName: "demo",
		StackID: "arn:aws:cloudformation:us-west-2:123456789012:stack/demo/1",
		Zones:   []string{"us-west-2a", "us-west-2b"},
		Resource: func(id string) (string, map[string]string, bool) {
			if id != "B" {
				return "", nil, false
			}
			return "b-123", map[string]string{"Arn": "arn:aws:x:::b", "Endpoint.Address": "b.example.com"}, true
		},
		Import: func(name string) (string, bool) {
			return map[string]string{"vpc::Subnets": "subnet-1,subnet-2", "vpc::Id": "vpc-1"}[name], strings.HasPrefix(name, "vpc::")
		},
	}
	if t != nil {
		env.Conditions, _ = t.EvalConditions(env)
	}
	return env
}

func TestEval(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       any
	}{
		{"scalars", `{S: a, N: 1.50, I: 007, B: true, F: False}`, map[string]any{"S": "a", "N": "1.5", "I": "7", "B": "true", "F": "false"}},
		{"ref parameter", `!Ref Env`, "prod"},
		{"ref list parameter", `!Ref Nets`, []any{"subnet-1", "subnet-2"}},
		{"ref comma list", `!Ref Names`, []any{"a", "b", "c"}},
		{"ref resource", `!Ref B`, "b-123"},
		{"pseudo parameters", `[!Ref "AWS::AccountId", !Ref "AWS::Region", !Ref "AWS::StackName", !Ref "AWS::StackId", !Ref "AWS::Partition", !Ref "AWS::URLSuffix"]`,
			[]any{"123456789012", "us-west-2", "demo", "arn:aws:cloudformation:us-west-2:123456789012:stack/demo/1", "aws", "amazonaws.com"}},
		{"notification ARNs", `!Ref "AWS::NotificationARNs"`, []any{}},
		{"no value in a map", `{K: !Ref "AWS::NoValue", L: x}`, map[string]any{"L": "x"}},
		{"no value in a list", `[a, !Ref "AWS::NoValue", b]`, []any{"a", "b"}},
		{"no value at the top", `!Ref "AWS::NoValue"`, nil},
		{"getatt", `!GetAtt B.Arn`, "arn:aws:x:::b"},
		{"getatt dotted attribute", `!GetAtt B.Endpoint.Address`, "b.example.com"},
		{"getatt long form", `{Fn::GetAtt: [B, Endpoint.Address]}`, "b.example.com"},
		{"getatt attribute by ref", `!GetAtt [B, !Select [0, [Arn]]]`, "arn:aws:x:::b"},
		{"sub", `!Sub "${Env}-${AWS::Region}-${B}-${B.Arn}-${!Literal}-$${Env}-${Unclosed"`, "prod-us-west-2-b-123-arn:aws:x:::b-${Literal}-$prod-${Unclosed"},
		{"sub with a variable map", `!Sub ["${Env}/${Zone}/${B.Endpoint.Address}", {Zone: !Select [1, !GetAZs ""], Env: override}]`, "override/us-west-2b/b.example.com"},
		{"sub multiline user data", "!Sub |\n        #!/bin/bash\n        /etc/eks/bootstrap.sh ${Env}\n        /opt/aws/bin/cfn-signal --exit-code $? --stack ${AWS::StackName} --resource NodeGroup --region ${AWS::Region}\n",
			"#!/bin/bash\n/etc/eks/bootstrap.sh prod\n/opt/aws/bin/cfn-signal --exit-code $? --stack demo --resource NodeGroup --region us-west-2\n"},
		{"join", `!Join [",", [a, !Ref Env, !Ref "AWS::NoValue"]]`, "a,prod"},
		{"join a list function", `!Join ["|", !Ref Nets]`, "subnet-1|subnet-2"},
		{"join empty delimiter", `!Join ["", [a, b]]`, "ab"},
		{"split", `!Split [",", !ImportValue "vpc::Subnets"]`, []any{"subnet-1", "subnet-2"}},
		{"select", `!Select ["1", !Ref Names]`, "b"},
		{"select from getazs", `!Select [0, !GetAZs {Ref: "AWS::Region"}]`, "us-west-2a"},
		{"if true", `!If [IsProd, yes, no]`, "yes"},
		{"if false with no value", `{K: !If [IsDev, x, !Ref "AWS::NoValue"]}`, map[string]any{}},
		{"if nested", `!If [ProdInRegion, !If [Either, !Join ["-", [a, b]], c], d]`, "a-b"},
		{"equals as a value", `!Equals [!Ref Env, prod]`, "true"},
		{"find in map", `!FindInMap [Sizes, !Ref Env, Nodes]`, "3"},
		{"find in map list", `!FindInMap [Sizes, prod, Zones]`, []any{"a", "b"}},
		{"base64", `!Base64 {Fn::Sub: "${Env}"}`, base64.StdEncoding.EncodeToString([]byte("prod"))},
		{"getazs", `!GetAZs ""`, []any{"us-west-2a", "us-west-2b"}},
		{"import", `!ImportValue vpc::Id`, "vpc-1"},
		{"cidr", `!Cidr [10.0.0.0/16, 3, 8]`, []any{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"}},
		{"cidr ipv6", `!Cidr ["2600:1f14::/56", 2, 64]`, []any{"2600:1f14::/64", "2600:1f14:0:1::/64"}},
		{"properties stay unevaluated maps", `{Statement: [{Condition: {StringEquals: {k: !Ref Env}}}]}`, map[string]any{"Statement": []any{map[string]any{"Condition": map[string]any{"StringEquals": map[string]any{"k": "prod"}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := mustValid(t, evalHeader+tc.expr+"\n")
			got, err := tmpl.EvalAt("Resources.A.Properties.X", tmpl.Resources["A"].Properties["X"], evalEnv(tmpl))
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Eval = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestEvalRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, expr, path, msg string
	}{
		{"ref of a resource not made", `!Ref Gone`, "Resources.A.Properties.X.Ref", "Template format error: Unresolved resource dependencies [Gone] in the Resources block of the template"},
		{"getatt of a resource not made", `!GetAtt Gone.Arn`, "Resources.A.Properties.X.Fn::GetAtt", "Unresolved resource dependencies [Gone]"},
		{"getatt of an unknown attribute", `{L: [a, !GetAtt B.Nope]}`, "Resources.A.Properties.X.L[1].Fn::GetAtt", "Template error: resource B does not support attribute type Nope in Fn::GetAtt"},
		{"select out of range", `!Select [5, !Ref Names]`, "Resources.A.Properties.X.Fn::Select", "Template error: Fn::Select cannot select nonexistent value at index 5"},
		{"select of a string", `!Select [0, !Ref Env]`, "Resources.A.Properties.X.Fn::Select[1]", "Fn::Select's second argument must be a list"},
		{"find in map miss", `!FindInMap [Sizes, dev, Nodes]`, "Resources.A.Properties.X.Fn::FindInMap", "Template error: Unable to get mapping for Sizes::dev::Nodes"},
		{"find in map of a secret", `!FindInMap [Sizes, !Ref Secret, Nodes]`, "Resources.A.Properties.X.Fn::FindInMap", "Unable to get mapping for Sizes::****::Nodes"},
		{"import miss", `!ImportValue nope`, "Resources.A.Properties.X.Fn::ImportValue", "No export named nope found"},
		{"sub of a list", `!Sub "${Nets}"`, "Resources.A.Properties.X.Fn::Sub", "variable Nets in Fn::Sub must be a string, not a list"},
		{"join of a map", `!Join [",", [{a: b}]]`, "Resources.A.Properties.X.Fn::Join[1][0]", "Fn::Join's values must be a list of strings"},
		{"getazs of another region", `!GetAZs eu-west-1`, "Resources.A.Properties.X.Fn::GetAZs", "Fn::GetAZs can list the zones of the stack's region us-west-2 only, not eu-west-1"},
		{"cidr too many", `!Cidr [10.0.0.0/24, 3, 7]`, "Resources.A.Properties.X.Fn::Cidr[1]", "Fn::Cidr cannot make 3 subnets of 7 host bits in 10.0.0.0/24"},
		{"cidr bits", `!Cidr [10.0.0.0/24, 1, 9]`, "Resources.A.Properties.X.Fn::Cidr[2]", "cidrBits must be an integer from 0 to 8"},
		{"cidr block", `!Cidr [10.0.0.0, 1, 8]`, "Resources.A.Properties.X.Fn::Cidr[0]", "is not a CIDR block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := mustValid(t, evalHeader+tc.expr+"\n")
			_, err := tmpl.EvalAt("Resources.A.Properties.X", tmpl.Resources["A"].Properties["X"], evalEnv(tmpl))
			assertError(t, err, tc.path, tc.msg)
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows a NoEcho value", err)
			}
		})
	}
}

func TestEvalConditions(t *testing.T) {
	tmpl := mustValid(t, evalHeader+"x\n")
	for _, tc := range []struct {
		env  string
		want map[string]bool
	}{
		{"prod", map[string]bool{"IsProd": true, "IsDev": false, "ProdInRegion": true, "Either": true}},
		{"dev", map[string]bool{"IsProd": false, "IsDev": true, "ProdInRegion": false, "Either": true}},
	} {
		env := evalEnv(nil)
		env.Parameters["Env"] = tc.env
		got, err := tmpl.EvalConditions(env)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Env=%s: EvalConditions = %v, want %v", tc.env, got, tc.want)
		}
	}
	// Without Env.Conditions, Fn::If evaluates the condition it names.
	env := evalEnv(nil)
	got, err := tmpl.Eval(map[string]any{"Fn::If": []any{"IsDev", "a", "b"}}, env)
	if err != nil || got != "b" {
		t.Errorf("Eval of Fn::If without conditions = %v, %v", got, err)
	}
}

// stackEnv binds given (and ami for every SSM parameter) to tmpl's parameters and evaluates
// its conditions, as the stack "demo-ng" in us-west-2 whose resources all exist.
func stackEnv(t *testing.T, tmpl *Template, given map[string]string, ami string) *Env {
	t.Helper()
	params, err := tmpl.BindParameters(given, func(string) (string, error) { return ami, nil })
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Parameters: params, AccountID: "123456789012", Region: "us-west-2", StackName: "demo-ng", Resource: func(id string) (string, map[string]string, bool) {
		return id + "-1", map[string]string{"Arn": "arn:" + id, "LatestVersionNumber": "1"}, true
	}}
	if env.Conditions, err = tmpl.EvalConditions(env); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestEvalGoldenUserData(t *testing.T) {
	tmpl := mustParse(t, readGolden(t, "testdata/amazon-eks-nodegroup.yaml"))
	if err := tmpl.Validate(supportedNodeTypes); err != nil {
		t.Fatal(err)
	}
	given := map[string]string{"ClusterName": "demo", "ClusterControlPlaneSecurityGroup": "sg-1", "NodeGroupName": "ng", "VpcId": "vpc-1", "Subnets": "subnet-1, subnet-2"}
	env := stackEnv(t, tmpl, given, "ami-0abc")
	props, creation, update, err := tmpl.EvalResource("NodeLaunchTemplate", env)
	if err != nil || creation != nil || update != nil {
		t.Fatalf("EvalResource = %v, %v, %v", creation, update, err)
	}
	data := props["LaunchTemplateData"].(map[string]any)
	if data["ImageId"] != "ami-0abc" || data["HttpTokens"] != nil || data["MetadataOptions"].(map[string]any)["HttpTokens"] != "optional" {
		t.Errorf("LaunchTemplateData = %v", data)
	}
	if _, has := data["KeyName"]; has {
		t.Error("KeyName is set though the KeyName parameter is empty")
	}
	ud, err := base64.StdEncoding.DecodeString(data["UserData"].(string))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"/etc/eks/bootstrap.sh demo \n", "--stack  demo-ng", "--region us-west-2"} {
		if !strings.Contains(string(ud), line) {
			t.Errorf("user data lacks %q:\n%s", line, ud)
		}
	}
	props, _, update, err = tmpl.EvalResource("NodeGroup", env)
	if err != nil {
		t.Fatal(err)
	}
	if got := props["VPCZoneIdentifier"]; !reflect.DeepEqual(got, []any{"subnet-1", "subnet-2"}) {
		t.Errorf("VPCZoneIdentifier = %v", got)
	}
	want := map[string]any{"AutoScalingRollingUpdate": map[string]any{"MaxBatchSize": "1", "MinInstancesInService": "3", "PauseTime": "PT5M"}}
	if !reflect.DeepEqual(update, want) {
		t.Errorf("UpdatePolicy = %v", update)
	}
}

// TestEvalAL2023UserData evaluates the 2025 (AL2023) shape of AWS's template: the user data
// is a MIME document whose NodeConfig carries the four cluster fields from the parameters and
// whose script part runs cfn-signal; the access entry exists only in the EKS API modes.
func TestEvalAL2023UserData(t *testing.T) {
	tmpl := mustValid(t, readGolden(t, "testdata/amazon-eks-nodegroup-al2023.yaml"))
	given := map[string]string{
		"ClusterName": "demo", "ClusterControlPlaneSecurityGroup": "sg-1", "NodeGroupName": "ng", "VpcId": "vpc-1", "Subnets": "subnet-1",
		"ApiServerEndpoint": "https://10.0.0.1", "CertificateAuthorityData": "Q0E=", "ServiceCidr": "172.20.0.0/16",
	}
	for _, tc := range []struct {
		mode        string
		accessEntry bool
	}{{"", true}, {"EKS API and ConfigMap", true}, {"ConfigMap", false}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			in := maps.Clone(given)
			if tc.mode != "" {
				in["AuthenticationMode"] = tc.mode
			}
			env := stackEnv(t, tmpl, in, "ami-0al2023")
			if got := env.Conditions["UseAccessEntry"]; got != tc.accessEntry {
				t.Errorf("UseAccessEntry = %v, want %v", got, tc.accessEntry)
			}
			if !tc.accessEntry {
				return
			}
			props, _, _, err := tmpl.EvalResource("NodeLaunchTemplate", env)
			if err != nil {
				t.Fatal(err)
			}
			data := props["LaunchTemplateData"].(map[string]any)
			if md := data["MetadataOptions"].(map[string]any); md["HttpPutResponseHopLimit"] != "1" || md["HttpTokens"] != "required" {
				t.Errorf("MetadataOptions = %v, want hop limit 1 and tokens required", md)
			}
			ud, err := base64.StdEncoding.DecodeString(data["UserData"].(string))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`Content-Type: multipart/mixed; boundary="BOUNDARY"`, "Content-Type: application/node.eks.aws",
				"    name: demo\n", "    apiServerEndpoint: https://10.0.0.1\n", "    certificateAuthority: Q0E=\n", "    cidr: 172.20.0.0/16\n",
				"/opt/aws/bin/cfn-signal --exit-code $?", "--stack  demo-ng", "--resource NodeGroup", "--BOUNDARY--",
			} {
				if !strings.Contains(string(ud), want) {
					t.Errorf("user data lacks %q:\n%s", want, ud)
				}
			}
			entry, _, _, err := tmpl.EvalResource("NodeAccessEntry", env)
			if err != nil || entry["Type"] != "EC2_LINUX" || entry["PrincipalArn"] != "arn:NodeInstanceRole" {
				t.Errorf("NodeAccessEntry = %v, %v", entry, err)
			}
		})
	}
}

func TestEvalOutputs(t *testing.T) {
	tmpl := mustValid(t, readGolden(t, "testdata/eksctl-nodegroup.json"))
	env := &Env{StackName: "eksctl-demo-nodegroup-ng-1", Resource: func(id string) (string, map[string]string, bool) {
		return id, map[string]string{"Arn": "arn:aws:iam::123456789012:" + id}, true
	}}
	got, err := tmpl.EvalOutputs(env)
	if err != nil {
		t.Fatal(err)
	}
	want := []OutputValue{
		{Key: "FeatureLocalSecurityGroup", Value: "true"},
		{Key: "FeaturePrivateNetworking", Value: "false"},
		{Key: "FeatureSharedSecurityGroup", Value: "true"},
		{Key: "InstanceProfileARN", Value: "arn:aws:iam::123456789012:NodeInstanceProfile", ExportName: "eksctl-demo-nodegroup-ng-1::InstanceProfileARN"},
		{Key: "InstanceRoleARN", Value: "arn:aws:iam::123456789012:NodeInstanceRole", ExportName: "eksctl-demo-nodegroup-ng-1::InstanceRoleARN"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EvalOutputs =\n%+v, want\n%+v", got, want)
	}

	cond := mustValid(t, evalHeader+"x\nOutputs:\n  L: {Value: !Ref Nets}\n  Off: {Value: x, Condition: IsDev}\n  M: {Value: !If [IsProd, !Ref \"AWS::NoValue\", y]}\n")
	_, err = cond.EvalOutputs(evalEnv(cond))
	assertError(t, err, "Outputs.M.Value", "The Value field of every Outputs member must evaluate to a String")
	cond.Outputs["M"].Value = "m"
	got, err = cond.EvalOutputs(evalEnv(cond))
	if err != nil {
		t.Fatal(err)
	}
	if want := []OutputValue{{Key: "L", Value: "subnet-1,subnet-2"}, {Key: "M", Value: "m"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("EvalOutputs = %+v, want %+v", got, want)
	}
}

func TestConditionsThatNameEachOtherEvaluateOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("Conditions:\n  C0: !Equals [a, a]\n")
	for i := 1; i <= 60; i++ {
		b.WriteString("  C" + itoa(i) + ": !And [!Condition C" + itoa(i-1) + ", !Condition C" + itoa(i-1) + "]\n")
	}
	b.WriteString("Resources:\n  A: {Type: T, Properties: {X: !If [C60, yes, no]}}\n")
	tmpl := mustValid(t, b.String())
	got, err := tmpl.Eval(tmpl.Resources["A"].Properties["X"], &Env{})
	if err != nil || got != "yes" {
		t.Errorf("Eval = %v, %v", got, err)
	}
	conds, err := tmpl.EvalConditions(&Env{})
	if err != nil || !conds["C60"] {
		t.Errorf("EvalConditions = %v, %v", conds["C60"], err)
	}
}
