package resource

import (
	"errors"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	localec2 "github.com/nodejoin/nodejoin/internal/localaws/ec2"
	localiam "github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// svcCloud is the local EC2 (with the default VPC's subnet) and IAM behind test
// servers, and SDK clients of them.
type svcCloud struct {
	ec2 *localec2.EC2
	iam *localiam.IAM
	cl  Clients
}

func newSvcCloud(t *testing.T) svcCloud {
	t.Helper()
	e := localec2.New(awstest.Account)
	if err := e.AddSubnet(localec2.Subnet{ID: localec2.DefaultSubnetID, VPCID: localec2.DefaultVPCID, CIDR: netip.MustParsePrefix("198.18.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	i := localiam.New(awstest.Account, e)
	ec2srv, iamsrv := httptest.NewServer(e), httptest.NewServer(i)
	t.Cleanup(ec2srv.Close)
	t.Cleanup(iamsrv.Close)
	cfg := awstest.SDKConfig()
	cfg.RetryMaxAttempts = 1
	return svcCloud{ec2: e, iam: i, cl: Clients{
		EC2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(ec2srv.URL) }),
		IAM: iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(iamsrv.URL) }),
	}}
}

// svcCall is a call on a resource of stack "demo".
func svcCall(typ, logical string, props map[string]any) *Call {
	return &Call{StackName: "demo", StackID: "arn:aws:cloudformation:us-west-2:" + awstest.Account + ":stack/demo/1", LogicalID: logical,
		Region: "us-west-2", AccountID: awstest.Account, Type: typ, Properties: props,
		Tags:  map[string]string{"aws:cloudformation:stack-name": "demo", "aws:cloudformation:logical-id": logical, "team": "nodes"},
		Event: func(string, string) {}}
}

var trustDoc = map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{"Effect": "Allow",
	"Principal": map[string]any{"Service": []any{"ec2.amazonaws.com"}}, "Action": []any{"sts:AssumeRole"}}}}

func readDoc(t *testing.T, doc *string) string {
	t.Helper()
	s, err := url.QueryUnescape(aws.ToString(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A node group's IAM, as eksctl's and AWS's templates make it: a role with managed and
// inline policies, its instance profile, a policy and a managed policy; what IAM then
// shows; updates in place and by replacement; deletion.
func TestIAMTypesMakeWhatIAMShows(t *testing.T) {
	cloud := newSvcCloud(t)
	types := Provisioners(cloud.cl)
	ctx := t.Context()
	roleProps := map[string]any{"AssumeRolePolicyDocument": trustDoc, "Path": "/", "PermissionsBoundary": "arn:aws:iam::aws:policy/PowerUserAccess",
		"ManagedPolicyArns": []any{"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"},
		"Policies": []any{map[string]any{"PolicyName": "logs", "PolicyDocument": map[string]any{"Version": "2012-10-17",
			"Statement": []any{map[string]any{"Effect": "Allow", "Action": "logs:*", "Resource": "*"}}}}},
		"Tags": []any{map[string]any{"Key": "Name", "Value": "nodes"}}}
	role, err := types["AWS::IAM::Role"].Create(ctx, svcCall("AWS::IAM::Role", "NodeInstanceRole", roleProps))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^demo-NodeInstanceRole-[A-Z0-9]{12}$`).MatchString(role.PhysicalID) ||
		role.Attributes["Arn"] != "arn:aws:iam::"+awstest.Account+":role/"+role.PhysicalID || !strings.HasPrefix(role.Attributes["RoleId"], "AROA") {
		t.Fatalf("role = %+v", role)
	}
	got, err := cloud.cl.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role.PhysicalID)})
	if err != nil {
		t.Fatal(err)
	}
	if doc := readDoc(t, got.Role.AssumeRolePolicyDocument); !strings.Contains(doc, `"Service":["ec2.amazonaws.com"]`) {
		t.Errorf("trust policy = %s", doc)
	}
	if got.Role.PermissionsBoundary == nil || aws.ToString(got.Role.PermissionsBoundary.PermissionsBoundaryArn) != "arn:aws:iam::aws:policy/PowerUserAccess" {
		t.Errorf("permissions boundary = %+v", got.Role.PermissionsBoundary)
	}
	if len(got.Role.Tags) != 2 {
		t.Errorf("tags = %+v (want Name and the stack's team, not aws:*)", got.Role.Tags)
	}
	if trust, ok := cloud.iam.TrustPolicy(role.PhysicalID); !ok || !strings.Contains(trust, "ec2.amazonaws.com") {
		t.Errorf("STS sees trust policy %q, %v", trust, ok)
	}

	profile, err := types["AWS::IAM::InstanceProfile"].Create(ctx, svcCall("AWS::IAM::InstanceProfile", "NodeInstanceProfile",
		map[string]any{"Path": "/", "Roles": []any{role.PhysicalID}}))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := cloud.iam.InstanceProfileRole(profile.Attributes["Arn"]); !ok || r != role.PhysicalID {
		t.Errorf("the profile resolves to %q, %v", r, ok)
	}
	policyProps := map[string]any{"PolicyName": "extra", "Roles": []any{role.PhysicalID},
		"PolicyDocument": map[string]any{"Statement": map[string]any{"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}}}
	policy, err := types["AWS::IAM::Policy"].Create(ctx, svcCall("AWS::IAM::Policy", "Extra", policyProps))
	if err != nil {
		t.Fatal(err)
	}
	managedProps := map[string]any{"Roles": []any{role.PhysicalID},
		"PolicyDocument": map[string]any{"Statement": map[string]any{"Effect": "Allow", "Action": "s3:Get*", "Resource": "*"}}}
	managed, err := types["AWS::IAM::ManagedPolicy"].Create(ctx, svcCall("AWS::IAM::ManagedPolicy", "Managed", managedProps))
	if err != nil || !strings.HasPrefix(managed.PhysicalID, "arn:aws:iam::"+awstest.Account+":policy/demo-Managed-") {
		t.Fatalf("managed policy = %+v, %v", managed, err)
	}
	inline, _ := cloud.cl.IAM.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role.PhysicalID)})
	attached, _ := cloud.cl.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role.PhysicalID)})
	if len(inline.PolicyNames) != 2 || len(attached.AttachedPolicies) != 2 {
		t.Fatalf("inline %v, attached %+v", inline.PolicyNames, attached.AttachedPolicies)
	}

	// In place: a new trust policy, one managed policy less, the inline policy changed.
	newProps := map[string]any{"AssumeRolePolicyDocument": map[string]any{"Statement": map[string]any{"Effect": "Allow",
		"Principal": map[string]any{"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}}, "Path": "/", "PermissionsBoundary": "arn:aws:iam::aws:policy/PowerUserAccess",
		"Policies": []any{map[string]any{"PolicyName": "logs2", "PolicyDocument": map[string]any{
			"Statement": []any{map[string]any{"Effect": "Allow", "Action": "logs:Put*", "Resource": "*"}}}}}}
	updated, err := types["AWS::IAM::Role"].Update(ctx, svcCall("AWS::IAM::Role", "NodeInstanceRole", newProps), role, roleProps)
	if err != nil || updated.Attributes["RoleId"] != role.Attributes["RoleId"] {
		t.Fatalf("update = %+v, %v", updated, err)
	}
	if trust, _ := cloud.iam.TrustPolicy(role.PhysicalID); !strings.Contains(trust, "eks.amazonaws.com") {
		t.Errorf("trust policy after update: %s", trust)
	}
	inline, _ = cloud.cl.IAM.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role.PhysicalID)})
	if strings.Join(inline.PolicyNames, ",") != "extra,logs2" {
		t.Errorf("inline policies after update: %v", inline.PolicyNames)
	}
	renamed := map[string]any{"AssumeRolePolicyDocument": trustDoc, "RoleName": "explicit"}
	if _, err := types["AWS::IAM::Role"].Update(ctx, svcCall("AWS::IAM::Role", "NodeInstanceRole", renamed), role, newProps); !errors.Is(err, ErrReplace) {
		t.Errorf("a new role name: %v, want ErrReplace", err)
	}

	// Deletion in the reverse order, each twice (the second finds nothing).
	for _, step := range []struct {
		typ   string
		props map[string]any
		r     Result
	}{{"AWS::IAM::ManagedPolicy", managedProps, managed}, {"AWS::IAM::Policy", policyProps, policy},
		{"AWS::IAM::InstanceProfile", nil, profile}, {"AWS::IAM::Role", newProps, role}} {
		for range 2 {
			if err := types[step.typ].Delete(ctx, svcCall(step.typ, "X", step.props), step.r); err != nil {
				t.Fatalf("delete %s: %v", step.typ, err)
			}
		}
	}
	if _, ok := cloud.iam.TrustPolicy(role.PhysicalID); ok {
		t.Error("the role outlived its deletion")
	}
	if _, ok := cloud.iam.InstanceProfileRole(profile.PhysicalID); ok {
		t.Error("the profile outlived its deletion")
	}
}

// Refusals carry IAM's own message; bad properties are refused before any call.
func TestIAMTypesRefuse(t *testing.T) {
	cloud := newSvcCloud(t)
	types := Provisioners(cloud.cl)
	ctx := t.Context()
	for _, tt := range []struct {
		name, typ string
		props     map[string]any
		want      string
	}{
		{"malformed trust policy", "AWS::IAM::Role", map[string]any{"AssumeRolePolicyDocument": map[string]any{"Statement": map[string]any{"Effect": "Allow", "Action": "sts:AssumeRole"}}},
			"Missing required field Principal (Statement 1) (Service: Iam, Status Code: 400, Error Code: MalformedPolicyDocument)"},
		{"no trust policy", "AWS::IAM::Role", map[string]any{}, "required key [AssumeRolePolicyDocument] not found"},
		{"unknown property", "AWS::IAM::Role", map[string]any{"AssumeRolePolicyDocument": trustDoc, "Colour": "red"}, "Encountered unsupported property Colour"},
		{"unknown managed policy", "AWS::IAM::Role", map[string]any{"AssumeRolePolicyDocument": trustDoc, "RoleName": "Leftover", "ManagedPolicyArns": []any{"arn:aws:iam::" + awstest.Account + ":policy/nope"}},
			"Policy arn:aws:iam::" + awstest.Account + ":policy/nope does not exist or is not attachable."},
		{"profile of an unknown role", "AWS::IAM::InstanceProfile", map[string]any{"Roles": []any{"nope"}}, "The role with name nope cannot be found."},
		{"two roles", "AWS::IAM::InstanceProfile", map[string]any{"Roles": []any{"a", "b"}}, "expected maximum item count: 1"},
		{"policy for users", "AWS::IAM::Policy", map[string]any{"PolicyName": "p", "PolicyDocument": map[string]any{}, "Users": []any{"u"}}, "no IAM users"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := types[tt.typ].Create(ctx, svcCall(tt.typ, "R", tt.props))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
	// The role that failed on its managed policy was not left behind.
	if _, ok := cloud.iam.TrustPolicy("Leftover"); ok {
		t.Error("a failed role was left behind")
	}
}
