package iam

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
)

const nodeTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["ec2.amazonaws.com"]},"Action":["sts:AssumeRole"]}]}`

// wantCode fails the test unless err is an AWS error of code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("error = %v, want %s", err, code)
	}
	if ae.ErrorMessage() == "" {
		t.Errorf("%s has no message", code)
	}
}

// A created role is what GetRole, STS's trust check and a created instance profile (as
// Auto Scaling resolves it) see; it cannot be deleted while a profile or a policy holds
// it.
func TestIAMCreatedRolesAndProfilesWithTheAWSClient(t *testing.T) {
	i := New(awstest.Account, instanceRoles{"held"})
	c := newIAMClient(t, i)
	ctx := t.Context()
	created, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("NodeInstanceRole"), Path: aws.String("/eks/"),
		AssumeRolePolicyDocument: aws.String(nodeTrust), Description: aws.String("nodes"),
		Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("a b")}}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(created.Role.Arn) != "arn:aws:iam::111122223333:role/eks/NodeInstanceRole" || aws.ToInt32(created.Role.MaxSessionDuration) != 3600 {
		t.Errorf("created %+v", created.Role)
	}
	got, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("NodeInstanceRole")})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := url.QueryUnescape(aws.ToString(got.Role.AssumeRolePolicyDocument))
	if err != nil || doc != nodeTrust {
		t.Errorf("trust policy as answered = %q (%v)", doc, err)
	}
	if aws.ToString(got.Role.RoleId) != aws.ToString(created.Role.RoleId) || len(got.Role.Tags) != 1 || aws.ToString(got.Role.Description) != "nodes" {
		t.Errorf("GetRole = %+v", got.Role)
	}
	if trust, ok := i.TrustPolicy("NodeInstanceRole"); !ok || trust != nodeTrust {
		t.Errorf("STS's trust policy = %q, %v", trust, ok)
	}
	_, err = c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("held"), AssumeRolePolicyDocument: aws.String(nodeTrust)})
	wantCode(t, err, "EntityAlreadyExists")

	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := i.InstanceProfileRole("arn:aws:iam::111122223333:instance-profile/NodeProfile"); !ok {
		t.Error("the created profile does not resolve")
	}
	add := func(role string) error {
		_, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile"), RoleName: aws.String(role)})
		return err
	}
	wantCode(t, add("absent"), "NoSuchEntity")
	if err := add("NodeInstanceRole"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, add("held"), "LimitExceeded")
	if role, ok := i.InstanceProfileRole("NodeProfile"); !ok || role != "NodeInstanceRole" {
		t.Errorf("InstanceProfileRole = %q, %v", role, ok)
	}
	prof, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile")})
	if err != nil || len(prof.InstanceProfile.Roles) != 1 || aws.ToString(prof.InstanceProfile.Roles[0].RoleId) != aws.ToString(created.Role.RoleId) {
		t.Fatalf("GetInstanceProfile = %+v, %v", prof, err)
	}
	list, err := c.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String("NodeInstanceRole")})
	if err != nil || len(list.InstanceProfiles) != 1 || aws.ToString(list.InstanceProfiles[0].InstanceProfileName) != "NodeProfile" {
		t.Fatalf("ListInstanceProfilesForRole = %+v, %v", list, err)
	}
	held, err := c.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String("held")})
	if err != nil || len(held.InstanceProfiles) != 1 {
		t.Fatalf("the instance's profile is not listed: %+v, %v", held, err)
	}

	deleteRole := func() error {
		_, err := c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("NodeInstanceRole")})
		return err
	}
	wantCode(t, deleteRole(), "DeleteConflict")
	_, err = c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile")})
	wantCode(t, err, "DeleteConflict")
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile"), RoleName: aws.String("NodeInstanceRole")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("NodeInstanceRole"), PolicyArn: aws.String("arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy")}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, deleteRole(), "DeleteConflict")
	if _, err := c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String("NodeInstanceRole"), PolicyArn: aws.String("arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy")}); err != nil {
		t.Fatal(err)
	}
	if err := deleteRole(); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("NodeInstanceRole")})
	wantCode(t, err, "NoSuchEntity")
	if _, ok := i.TrustPolicy("NodeInstanceRole"); ok {
		t.Error("the deleted role still has a trust policy")
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("NodeProfile")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := i.InstanceProfileRole("NodeProfile"); ok {
		t.Error("the deleted profile still resolves")
	}
}

// Managed and inline policies are recorded; customer managed ones must exist, and
// cannot be deleted while attached.
func TestIAMRolePoliciesWithTheAWSClient(t *testing.T) {
	c := newIAMClient(t, New(awstest.Account, nil))
	ctx := t.Context()
	role := aws.String("r")
	if _, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: role, AssumeRolePolicyDocument: aws.String(nodeTrust)}); err != nil {
		t.Fatal(err)
	}
	const perms = `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}}`
	customer := aws.String("arn:aws:iam::111122223333:policy/custom")
	_, err := c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role, PolicyArn: customer})
	wantCode(t, err, "NoSuchEntity")
	pol, err := c.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("custom"), PolicyDocument: aws.String(perms)})
	if err != nil || aws.ToString(pol.Policy.Arn) != *customer {
		t.Fatalf("CreatePolicy = %+v, %v", pol, err)
	}
	for _, arn := range []string{*customer, "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"} {
		if _, err := c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role, PolicyArn: aws.String(arn)}); err != nil {
			t.Fatal(err)
		}
	}
	attached, err := c.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: role})
	if err != nil || len(attached.AttachedPolicies) != 2 || aws.ToString(attached.AttachedPolicies[1].PolicyName) != "AmazonEC2ContainerRegistryReadOnly" {
		t.Fatalf("ListAttachedRolePolicies = %+v, %v", attached, err)
	}
	_, err = c.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: customer})
	wantCode(t, err, "DeleteConflict")
	got, err := c.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: customer})
	if err != nil || aws.ToInt32(got.Policy.AttachmentCount) != 1 {
		t.Fatalf("GetPolicy = %+v, %v", got, err)
	}
	if _, err := c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: role, PolicyName: aws.String("inline"), PolicyDocument: aws.String(perms)}); err != nil {
		t.Fatal(err)
	}
	inline, err := c.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: role, PolicyName: aws.String("inline")})
	if err != nil {
		t.Fatal(err)
	}
	if doc, _ := url.QueryUnescape(aws.ToString(inline.PolicyDocument)); doc != perms {
		t.Errorf("inline policy = %q", doc)
	}
	names, err := c.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: role})
	if err != nil || len(names.PolicyNames) != 1 {
		t.Fatalf("ListRolePolicies = %+v, %v", names, err)
	}
	_, err = c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: role})
	wantCode(t, err, "DeleteConflict")
	if _, err := c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: role, PolicyName: aws.String("inline")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: role, PolicyName: aws.String("inline")})
	wantCode(t, err, "NoSuchEntity")
	if _, err := c.TagRole(ctx, &iam.TagRoleInput{RoleName: role, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("b"), Value: aws.String("2")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UntagRole(ctx, &iam.UntagRoleInput{RoleName: role, TagKeys: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: role})
	if err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "b" {
		t.Fatalf("ListRoleTags = %+v, %v", tags, err)
	}
}

// Bad names and policy documents are refused with IAM's codes.
func TestIAMRefusesBadInput(t *testing.T) {
	c := newIAMClient(t, New(awstest.Account, nil))
	for _, tt := range []struct {
		name, role, doc, code string
	}{
		{"name too long", "r234567890123456789012345678901234567890123456789012345678901234x", nodeTrust, "ValidationError"},
		{"name with a slash", "a/b", nodeTrust, "ValidationError"},
		{"not JSON", "r", `{"Statement":`, "MalformedPolicyDocument"},
		{"no statement", "r", `{"Version":"2012-10-17"}`, "MalformedPolicyDocument"},
		{"bad effect", "r", `{"Statement":{"Effect":"Maybe","Principal":"*","Action":"sts:AssumeRole"}}`, "MalformedPolicyDocument"},
		{"no principal", "r", `{"Statement":{"Effect":"Allow","Action":"sts:AssumeRole"}}`, "MalformedPolicyDocument"},
		{"resource in a trust policy", "r", `{"Statement":{"Effect":"Allow","Principal":"*","Action":"sts:AssumeRole","Resource":"*"}}`, "MalformedPolicyDocument"},
		{"action without vendor", "r", `{"Statement":{"Effect":"Allow","Principal":"*","Action":"AssumeRole"}}`, "MalformedPolicyDocument"},
		{"bad version", "r", `{"Version":"2020-01-01","Statement":{"Effect":"Allow","Principal":"*","Action":"sts:AssumeRole"}}`, "MalformedPolicyDocument"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: aws.String(tt.role), AssumeRolePolicyDocument: aws.String(tt.doc)})
			wantCode(t, err, tt.code)
		})
	}
	_, err := c.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: aws.String("bounded"), AssumeRolePolicyDocument: aws.String(nodeTrust),
		PermissionsBoundary: aws.String("arn:aws:iam::" + awstest.Account + ":policy/absent")})
	wantCode(t, err, "NoSuchEntity")
	_, err = c.PutRolePolicy(t.Context(), &iam.PutRolePolicyInput{RoleName: aws.String("absent"), PolicyName: aws.String("p"), PolicyDocument: aws.String(`{"Statement":[]}`)})
	wantCode(t, err, "MalformedPolicyDocument")
	_, err = c.AttachRolePolicy(t.Context(), &iam.AttachRolePolicyInput{RoleName: aws.String("absent"), PolicyArn: aws.String("arn:aws:iam::aws:policy/X")})
	wantCode(t, err, "NoSuchEntity")
}

// Any document checkPolicy accepts is one JSON object with statements, and no document
// makes it panic or answer without a code and a message.
func FuzzCheckPolicy(f *testing.F) {
	for _, seed := range []string{nodeTrust, `{"Statement":{}}`, `[]`, `{"Statement":[null]}`, `{"Statement":{"Effect":"Allow","Action":["a:b"],"Resource":"*"}}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, kind := range []docKind{trustPolicy, permissionsPolicy} {
			aerr := checkPolicy(doc, kind)
			if aerr != nil {
				if aerr.Code == "" || aerr.Message == "" {
					t.Fatalf("checkPolicy(%q) = %+v", doc, aerr)
				}
				continue
			}
			var top map[string]any
			if err := json.Unmarshal([]byte(doc), &top); err != nil || top["Statement"] == nil {
				t.Fatalf("checkPolicy accepted %q", doc)
			}
		}
	})
}

// The trust policy of a created role is the one STS evaluates: a role only EC2 may
// assume no longer admits the account's administrators, as the default policy does;
// UpdateAssumeRolePolicy changes what STS sees.
func TestCreatedRolesTrustPolicyIsWhatSTSChecks(t *testing.T) {
	i := New(awstest.Account, nil)
	c := newIAMClient(t, i)
	admin := protocol.Caller{ARN: "arn:aws:iam::" + awstest.Account + ":user/nodejoin-admin", Account: awstest.Account}
	if _, err := c.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: aws.String("ec2only"), AssumeRolePolicyDocument: aws.String(nodeTrust)}); err != nil {
		t.Fatal(err)
	}
	if doc, _ := i.TrustPolicy("ec2only"); sts.TrustAllows(doc, admin, awstest.Account) {
		t.Error("STS lets the administrator assume a role only EC2 may assume")
	}
	adminTrust := `{"Statement":{"Effect":"Allow","Principal":{"AWS":"` + admin.ARN + `"},"Action":"sts:AssumeRole"}}`
	if _, err := c.UpdateAssumeRolePolicy(t.Context(), &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String("ec2only"), PolicyDocument: aws.String(adminTrust)}); err != nil {
		t.Fatal(err)
	}
	if doc, _ := i.TrustPolicy("ec2only"); !sts.TrustAllows(doc, admin, awstest.Account) {
		t.Errorf("STS does not see the new trust policy: %s", doc)
	}
}

// A created role's name resolves, for Auto Scaling's launches, to the role itself: the
// instance profile EKS makes for a managed node group's role, which the local EKS names
// by the role's name. A name that is neither a profile nor a role resolves to nothing.
func TestCreatedRoleNameLaunchesAsItsProfile(t *testing.T) {
	i := New("111122223333", nil)
	c := newIAMClient(t, i)
	if _, err := c.CreateRole(t.Context(), &iam.CreateRoleInput{RoleName: aws.String("eksctl-c1-nodegroup-ng-NodeInstanceRole-ABC"), AssumeRolePolicyDocument: aws.String(nodeTrust)}); err != nil {
		t.Fatal(err)
	}
	if role, ok := i.InstanceProfileRole("eksctl-c1-nodegroup-ng-NodeInstanceRole-ABC"); !ok || role != "eksctl-c1-nodegroup-ng-NodeInstanceRole-ABC" {
		t.Errorf("InstanceProfileRole = %q, %v", role, ok)
	}
	if _, ok := i.InstanceProfileRole("nobody"); ok {
		t.Error("a name that is no profile and no role resolved")
	}
}
