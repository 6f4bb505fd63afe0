package rbac

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

func standard(name string, policies ...nodejoinv1alpha1.AccessPolicyAssociation) nodejoinv1alpha1.NodeAccessEntry {
	return nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodejoinv1alpha1.NodeAccessEntrySpec{
		PrincipalARN: "arn:aws:iam::111122223333:user/" + name, Type: nodejoinv1alpha1.AccessEntryStandard, AccessPolicies: policies}}
}

func policy(name string, namespaces ...string) nodejoinv1alpha1.AccessPolicyAssociation {
	scope := nodejoinv1alpha1.AccessScope{Type: nodejoinv1alpha1.AccessScopeCluster}
	if len(namespaces) > 0 {
		scope = nodejoinv1alpha1.AccessScope{Type: nodejoinv1alpha1.AccessScopeNamespace, Namespaces: namespaces}
	}
	return nodejoinv1alpha1.AccessPolicyAssociation{PolicyARN: nodejoinv1alpha1.AccessPolicyARNPrefix + name, AccessScope: scope}
}

// The cluster-scope bindings bind each policy's group to its ClusterRole, and only
// that; the controller may bind exactly the policies' ClusterRoles.
func TestForAccessPolicies(t *testing.T) {
	o := ForAccessPolicies(&ServiceAccount)
	want := map[string]string{
		"nodejoin:access-policy:AmazonEKSClusterAdminPolicy": "cluster-admin", "nodejoin:access-policy:AmazonEKSAdminPolicy": "admin",
		"nodejoin:access-policy:AmazonEKSEditPolicy": "edit", "nodejoin:access-policy:AmazonEKSViewPolicy": "view",
		AccessPoliciesRole: AccessPoliciesRole,
	}
	for _, b := range o.ClusterRoleBindings {
		if want[b.Name] != b.RoleRef.Name || len(b.Subjects) != 1 {
			t.Errorf("binding %s → %s %+v", b.Name, b.RoleRef.Name, b.Subjects)
		}
		if b.Name != AccessPoliciesRole && (b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != b.Name) {
			t.Errorf("binding %s binds %+v, want its own group", b.Name, b.Subjects)
		}
	}
	for _, r := range o.ClusterRoles[0].Rules {
		if slices.Contains(r.Verbs, "bind") && !slices.Equal(r.ResourceNames, []string{"cluster-admin", "admin", "edit", "view"}) {
			t.Errorf("the controller may bind %v", r.ResourceNames)
		}
		if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			t.Errorf("the controller's access-policy role grants %v", r.Verbs)
		}
	}
}

func TestAccessPolicyRoleBindings(t *testing.T) {
	invalid := standard("bad", policy("AmazonEKSViewPolicy", "dev"))
	invalid.Spec.KubernetesGroups = []string{"system:masters"}
	node := nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: "nodes"}, Spec: nodejoinv1alpha1.NodeAccessEntrySpec{
		PrincipalARN: "arn:aws:iam::111122223333:role/nodes", AccessPolicies: []nodejoinv1alpha1.AccessPolicyAssociation{policy("AmazonEKSAdminPolicy", "kube-system")}}}
	got := AccessPolicyRoleBindings([]nodejoinv1alpha1.NodeAccessEntry{
		standard("a", policy("AmazonEKSViewPolicy", "qa", "dev"), policy("AmazonEKSClusterAdminPolicy")),
		standard("b", policy("AmazonEKSViewPolicy", "dev"), policy("AmazonEKSEditPolicy", "dev")),
		invalid, node,
	})
	var names []string
	for _, b := range got {
		names = append(names, b.Namespace+"/"+b.Name+"→"+b.RoleRef.Name+":"+b.Subjects[0].Name)
	}
	want := []string{
		"dev/nodejoin:access-policy:AmazonEKSEditPolicy→edit:nodejoin:access-policy:AmazonEKSEditPolicy:dev",
		"dev/nodejoin:access-policy:AmazonEKSViewPolicy→view:nodejoin:access-policy:AmazonEKSViewPolicy:dev",
		"qa/nodejoin:access-policy:AmazonEKSViewPolicy→view:nodejoin:access-policy:AmazonEKSViewPolicy:qa",
	}
	if !slices.Equal(names, want) {
		t.Errorf("bindings\n%v\nwant\n%v", names, want)
	}
}

// Against a real API server: a namespace-scoped policy lets its group act in that
// namespace only (cluster-admin's, as the test's API server runs no controller manager
// to aggregate view's rules); removing the policy removes the binding; a namespace created
// later gets its binding on the next sync.
func TestSyncAccessPolicyBindings(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	for _, ns := range []string{"dev", "qa"} {
		if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	group := nodejoinv1alpha1.AccessPolicyGroup("AmazonEKSClusterAdminPolicy", "dev")
	can := func(c kubernetes.Interface, verb, ns string) bool {
		t.Helper()
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "pods"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	alice := env.As(t, "alice", group)
	entries := []nodejoinv1alpha1.NodeAccessEntry{standard("alice", policy("AmazonEKSClusterAdminPolicy", "dev", "later"))}
	if err := SyncAccessPolicyBindings(ctx, env.Client, entries, "test"); err != nil {
		t.Fatal(err)
	}
	// The authorizer sees bindings through its informers: wait for it.
	eventually := func(what string, want bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return can(alice, "list", "dev") == want, nil
		}); err != nil {
			t.Fatalf("%s: alice's list in dev never became %v", what, want)
		}
	}
	eventually("after the sync", true)
	if !can(alice, "delete", "dev") || can(alice, "list", "qa") {
		t.Errorf("cluster-admin in dev: delete dev %v, list qa %v", can(alice, "delete", "dev"), can(alice, "list", "qa"))
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := SyncAccessPolicyBindings(ctx, env.Client, entries, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings("later").Get(ctx, "nodejoin:access-policy:AmazonEKSClusterAdminPolicy", metav1.GetOptions{}); err != nil {
		t.Errorf("the later namespace's binding: %v", err)
	}
	if err := SyncAccessPolicyBindings(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	l, err := env.Client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: AccessPolicyLabel})
	if err != nil || len(l.Items) != 0 {
		t.Errorf("after the policy went: %d bindings, %v", len(l.Items), err)
	}
	eventually("after the policy went", false)
}
