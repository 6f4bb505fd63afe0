package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	adminPolicy = AccessPolicyARNPrefix + "AmazonEKSClusterAdminPolicy"
	viewPolicy  = AccessPolicyARNPrefix + "AmazonEKSViewPolicy"
)

func TestStandardEntryValidate(t *testing.T) {
	user := "arn:aws:iam::111122223333:user/alice"
	cluster := AccessScope{Type: AccessScopeCluster}
	for _, tc := range []struct {
		name string
		spec NodeAccessEntrySpec
		want string
	}{
		{"admin user", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard,
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: adminPolicy, AccessScope: cluster}}}, ""},
		{"groups and username", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard, Username: "alice-{{AccessKeyID}}",
			KubernetesGroups: []string{"devs"}}, ""},
		{"namespaces", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard,
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: viewPolicy, AccessScope: AccessScope{Type: AccessScopeNamespace, Namespaces: []string{"a", "b"}}}}}, ""},
		{"system:masters", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard, KubernetesGroups: []string{"system:masters"}}, "may not start with system:"},
		{"policy group by hand", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard, KubernetesGroups: []string{AccessPolicyGroup("AmazonEKSClusterAdminPolicy", "")}}, "may not start with nodejoin:"},
		{"eks: username", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard, Username: "eks:me"}, "may not start with eks:"},
		{"node template", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard, Username: "{{EC2PrivateDNSName}}"}, "unknown template"},
		{"unknown policy", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard,
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: AccessPolicyARNPrefix + "AmazonEKSRootPolicy", AccessScope: cluster}}}, "Unsupported value"},
		{"wildcard namespace", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard,
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: viewPolicy, AccessScope: AccessScope{Type: AccessScopeNamespace, Namespaces: []string{"dev*"}}}}}, "wildcards are not supported"},
		{"empty namespace scope", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryStandard,
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: viewPolicy, AccessScope: AccessScope{Type: AccessScopeNamespace}}}}, "1 to 100 namespaces"},
		{"node entry with policy", NodeAccessEntrySpec{PrincipalARN: "arn:aws:iam::111122223333:role/Nodes",
			AccessPolicies: []AccessPolicyAssociation{{PolicyARN: adminPolicy, AccessScope: cluster}}}, "only STANDARD entries"},
		{"node entry with groups", NodeAccessEntrySpec{PrincipalARN: "arn:aws:iam::111122223333:role/Nodes", Type: AccessEntryEC2Linux,
			KubernetesGroups: []string{"admins"}}, "only STANDARD entries"},
		{"node entry of a user", NodeAccessEntrySpec{PrincipalARN: user, Type: AccessEntryEC2Linux}, "want an IAM role ARN"},
	} {
		e := &NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: tc.spec}
		err := e.Validate().ToAggregate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestPolicyGroupsAndDefaultUsername(t *testing.T) {
	e := &NodeAccessEntry{Spec: NodeAccessEntrySpec{PrincipalARN: "arn:aws:iam::111122223333:role/a/Admin", Type: AccessEntryStandard,
		AccessPolicies: []AccessPolicyAssociation{
			{PolicyARN: adminPolicy, AccessScope: AccessScope{Type: AccessScopeCluster}},
			{PolicyARN: viewPolicy, AccessScope: AccessScope{Type: AccessScopeNamespace, Namespaces: []string{"dev", "qa"}}},
		}}}
	want := []string{"nodejoin:access-policy:AmazonEKSClusterAdminPolicy", "nodejoin:access-policy:AmazonEKSViewPolicy:dev", "nodejoin:access-policy:AmazonEKSViewPolicy:qa"}
	if got := e.PolicyGroups(); !slices.Equal(got, want) {
		t.Errorf("PolicyGroups = %v, want %v", got, want)
	}
	node := &NodeAccessEntry{Spec: NodeAccessEntrySpec{PrincipalARN: e.Spec.PrincipalARN, AccessPolicies: e.Spec.AccessPolicies}}
	if got := node.PolicyGroups(); got != nil {
		t.Errorf("a node entry's PolicyGroups = %v, want none", got)
	}
	for arn, want := range map[string]string{
		e.Spec.PrincipalARN:                      "arn:aws:sts::111122223333:assumed-role/Admin/{{SessionName}}",
		"arn:aws:iam::111122223333:user/x/alice": "arn:aws:iam::111122223333:user/alice",
	} {
		if got := DefaultUsername(arn); got != want {
			t.Errorf("DefaultUsername(%s) = %s, want %s", arn, got, want)
		}
	}
}
