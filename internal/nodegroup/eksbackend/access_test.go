package eksbackend_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
)

// The wire's and the API's lists of access policies are the same.
func TestAccessPolicyNamesAgree(t *testing.T) {
	var names []string
	for _, p := range v1alpha1.AccessPolicies {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, eksapi.AccessPolicyNames) {
		t.Errorf("v1alpha1.AccessPolicies %v, eksapi.AccessPolicyNames %v", names, eksapi.AccessPolicyNames)
	}
}

// STANDARD entries through the SDK land in NodeAccessEntry objects: username and groups,
// policies in spec.accessPolicies; a node entry takes no policy; the cluster creator's
// entry is made idempotently.
func TestStandardEntriesOverNodeAccessEntries(t *testing.T) {
	c, kc := setup(t)
	ctx := t.Context()
	demo := aws.String("demo")
	role := "arn:aws:iam::000000000000:role/ops/Admin"
	out, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(role), KubernetesGroups: []string{"devs"}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.AccessEntry.Username) != "arn:aws:sts::000000000000:assumed-role/Admin/{{SessionName}}" ||
		!slices.Equal(out.AccessEntry.KubernetesGroups, []string{"devs"}) || aws.ToString(out.AccessEntry.Type) != "STANDARD" {
		t.Errorf("CreateAccessEntry = %+v", out.AccessEntry)
	}
	if _, err := c.AssociateAccessPolicy(ctx, &awseks.AssociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(role),
		PolicyArn: aws.String(v1alpha1.AccessPolicyARNPrefix + "AmazonEKSEditPolicy"), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeNamespace, Namespaces: []string{"a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	var e v1alpha1.NodeAccessEntry
	if err := kc.Get(ctx, client.ObjectKey{Name: eksbackend.AccessEntryName(role)}, &e); err != nil {
		t.Fatal(err)
	}
	if want := []string{"nodejoin:access-policy:AmazonEKSEditPolicy:a", "nodejoin:access-policy:AmazonEKSEditPolicy:b"}; !slices.Equal(e.PolicyGroups(), want) {
		t.Errorf("PolicyGroups = %v, want %v", e.PolicyGroups(), want)
	}
	// The API server refuses what the wire would have: a system: group written by hand.
	e.Spec.KubernetesGroups = []string{"system:masters"}
	if err := kc.Update(ctx, &e); err == nil {
		t.Error("the API server accepted a STANDARD entry with group system:masters")
	}

	node := "arn:aws:iam::000000000000:role/nodes"
	if _, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(node), Type: aws.String("EC2_LINUX")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.AssociateAccessPolicy(ctx, &awseks.AssociateAccessPolicyInput{ClusterName: demo, PrincipalArn: aws.String(node),
		PolicyArn: aws.String(eksbackend.ClusterAdminPolicyARN), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}})
	if apiCode(err) != "InvalidParameterException" {
		t.Errorf("AssociateAccessPolicy on a node entry = %v, want InvalidParameterException", err)
	}

	b := eksbackend.New(kc, info, releases{})
	admin := "arn:aws:iam::000000000000:user/nodejoin-admin"
	for range 2 {
		if err := b.EnsureClusterCreatorAdmin(ctx, admin); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.DescribeAccessEntry(ctx, &awseks.DescribeAccessEntryInput{ClusterName: demo, PrincipalArn: aws.String(admin)})
	if err != nil || aws.ToString(d.AccessEntry.Username) != admin || aws.ToString(d.AccessEntry.Type) != "STANDARD" {
		t.Fatalf("DescribeAccessEntry(admin) = %+v, %v", d, err)
	}
	l, err := c.ListAssociatedAccessPolicies(ctx, &awseks.ListAssociatedAccessPoliciesInput{ClusterName: demo, PrincipalArn: aws.String(admin)})
	if err != nil || len(l.AssociatedAccessPolicies) != 1 || aws.ToString(l.AssociatedAccessPolicies[0].PolicyArn) != eksbackend.ClusterAdminPolicyARN ||
		l.AssociatedAccessPolicies[0].AccessScope.Type != ekstypes.AccessScopeTypeCluster {
		t.Fatalf("ListAssociatedAccessPolicies(admin) = %+v, %v", l, err)
	}
}
