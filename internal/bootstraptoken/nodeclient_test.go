package bootstraptoken_test

import (
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// A token minted for node group "workers" binds nodeclient to that group's
// bootstrappers only: the real kube-apiserver allows the SubjectAccessReview the CSR
// policy makes for a bootstrapper of "workers", and denies it to a bootstrapper of
// another group, or of none; nodejoin's roles no longer bind it to every bootstrapper,
// and applying them removes the binding that did.
func TestNodeClientOnlyForTheTokensNodeGroup(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	// The binding of older releases, granting nodeclient to every bootstrapper.
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nodejoin:nodeclient"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.NodeClientRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Get(ctx, "nodejoin:nodeclient", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the binding of every bootstrapper to nodeclient survived Apply: %v", err)
	}
	if _, err := bootstraptoken.Mint(ctx, env.Client, "workers", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		groups []string
		allow  bool
	}{
		{[]string{"system:bootstrappers", "system:bootstrappers:workers", "system:authenticated"}, true},
		{[]string{"system:bootstrappers", "system:bootstrappers:batch", "system:authenticated"}, false},
		{[]string{"system:bootstrappers", "system:authenticated"}, false},
		// A node authenticated by the token webhook is in system:bootstrappers too.
		{[]string{"system:bootstrappers", "system:nodes", "system:authenticated"}, false},
	} {
		sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:bootstrap:abcdef", Groups: tc.groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allow {
			t.Errorf("groups %v: nodeclient allowed = %v, want %v (%s)", tc.groups, sar.Status.Allowed, tc.allow, sar.Status.Reason)
		}
	}
}
