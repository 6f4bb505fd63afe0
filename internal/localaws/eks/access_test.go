package eks

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

const (
	clusterAdminPolicy = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
	viewPolicy         = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
)

// A STANDARD entry through the SDK: created by default, policies associated in a scope,
// listed, filtered by, disassociated; bad policies and scopes refused by name.
func TestStandardAccessEntries(t *testing.T) {
	c, _, _, _ := serve(t)
	ctx := t.Context()
	user := "arn:aws:iam::000000000000:user/alice"
	demo := aws.String("demo")
	out, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(user), KubernetesGroups: []string{"devs"}})
	if err != nil || aws.ToString(out.AccessEntry.Type) != "STANDARD" {
		t.Fatalf("CreateAccessEntry = %+v, %v", out, err)
	}
	a, err := c.AssociateAccessPolicy(ctx, &awseks.AssociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(user),
		PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace, Namespaces: []string{"dev"}}})
	if err != nil || aws.ToString(a.AssociatedAccessPolicy.PolicyArn) != viewPolicy || !slices.Equal(a.AssociatedAccessPolicy.AccessScope.Namespaces, []string{"dev"}) ||
		aws.ToString(a.PrincipalArn) != user || a.AssociatedAccessPolicy.AssociatedAt == nil {
		t.Fatalf("AssociateAccessPolicy = %+v, %v", a, err)
	}
	for _, tc := range []struct {
		name, code, want string
		in               awseks.AssociateAccessPolicyInput
	}{
		{"unknown policy", "ResourceNotFoundException", "AmazonEKSViewPolicy", awseks.AssociateAccessPolicyInput{
			PolicyArn: aws.String("arn:aws:eks::aws:cluster-access-policy/AmazonEKSRootPolicy"), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}},
		{"namespace scope without namespaces", "InvalidParameterException", "at least one namespace", awseks.AssociateAccessPolicyInput{
			PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace}}},
		{"cluster scope with namespaces", "InvalidParameterException", "names no namespaces", awseks.AssociateAccessPolicyInput{
			PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster, Namespaces: []string{"dev"}}}},
		{"bad scope type", "InvalidParameterException", "want cluster or namespace", awseks.AssociateAccessPolicyInput{
			PolicyArn: aws.String(viewPolicy), AccessScope: &ekstypes.AccessScope{Type: "world"}}},
	} {
		in := tc.in
		in.ClusterName, in.PrincipalArn = demo, aws.String(user)
		_, err := c.AssociateAccessPolicy(ctx, &in)
		if code, _ := awstest.APICode(t, err); code != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: AssociateAccessPolicy = %v; want %s saying %q", tc.name, err, tc.code, tc.want)
		}
	}
	if _, err := c.AssociateAccessPolicy(ctx, &awseks.AssociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(user),
		PolicyArn: aws.String(clusterAdminPolicy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListAssociatedAccessPolicies(ctx, &awseks.ListAssociatedAccessPoliciesInput{ClusterName: demo, PrincipalArn: aws.String(user)})
	if err != nil || len(l.AssociatedAccessPolicies) != 2 || aws.ToString(l.AssociatedAccessPolicies[0].PolicyArn) != clusterAdminPolicy {
		t.Fatalf("ListAssociatedAccessPolicies = %+v, %v", l, err)
	}
	node := "arn:aws:iam::000000000000:role/nodes"
	if _, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(node), Type: aws.String("EC2_LINUX")}); err != nil {
		t.Fatal(err)
	}
	le, err := c.ListAccessEntries(ctx, &awseks.ListAccessEntriesInput{ClusterName: demo, AssociatedPolicyArn: aws.String(clusterAdminPolicy)})
	if err != nil || !slices.Equal(le.AccessEntries, []string{user}) {
		t.Fatalf("ListAccessEntries(associatedPolicyArn) = %+v, %v", le, err)
	}
	ap, err := c.ListAccessPolicies(ctx, &awseks.ListAccessPoliciesInput{})
	if err != nil || len(ap.AccessPolicies) != 4 || aws.ToString(ap.AccessPolicies[1].Arn) != clusterAdminPolicy {
		t.Fatalf("ListAccessPolicies = %+v, %v", ap, err)
	}
	if _, err := c.DisassociateAccessPolicy(ctx, &awseks.DisassociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(user), PolicyArn: aws.String(clusterAdminPolicy)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DisassociateAccessPolicy(ctx, &awseks.DisassociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(user), PolicyArn: aws.String(clusterAdminPolicy)})
	if code, _ := awstest.APICode(t, err); code != "ResourceNotFoundException" {
		t.Errorf("second DisassociateAccessPolicy = %v", err)
	}
	u, err := c.UpdateAccessEntry(ctx, &awseks.UpdateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(user), KubernetesGroups: []string{"ops"}})
	if err != nil || !slices.Equal(u.AccessEntry.KubernetesGroups, []string{"ops"}) {
		t.Fatalf("UpdateAccessEntry = %+v, %v", u, err)
	}
	_, err = c.UpdateAccessEntry(ctx, &awseks.UpdateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(user), KubernetesGroups: []string{"system:masters"}})
	if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" || !strings.Contains(err.Error(), "system:masters") {
		t.Errorf("UpdateAccessEntry(system:masters) = %v", err)
	}
}
