package bootstraptoken_test

import (
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// A token minted for node group "workers" binds nodeclient to that group's
// bootstrappers only: the real kube-apiserver allows the SubjectAccessReview the CSR
// policy makes for a bootstrapper of "workers", and denies it to a bootstrapper of
// another group, or of none.
func TestNodeClientOnlyForTheTokensNodeGroup(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
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
