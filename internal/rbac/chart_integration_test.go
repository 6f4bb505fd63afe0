package rbac

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

// The chart's roles, as helm renders them (add-ons and node groups on), applied to a
// real kube-apiserver: what `kubectl auth can-i ... --as system:serviceaccount:...`
// answers for each of the chart's service accounts, through SubjectAccessReviews.
func TestChartRolesOnARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	for _, mode := range []string{"addons", "nodegroups"} {
		if err := ApplyObjects(ctx, env.Client, renderedRBAC(t, mode), "test-admin"); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
	}
	const ns = "nodejoin-system" // the namespace test/chart renders into
	for _, tt := range []struct {
		sa, verb, resource, namespace, name string
		allowed                             bool
	}{
		// No Secrets for anyone: the CA key and bootstrap tokens stay out of reach.
		{ServiceAccount.Name, "list", "secrets", "kube-system", "", false},
		{ServiceAccount.Name, "get", "secrets", "kube-system", "", false},
		{ServiceAccount.Name, "delete", "secrets", "kube-system", "", false},
		{AddonsServiceAccount, "list", "secrets", "kube-system", "", false},
		{NodeGroupsServiceAccount, "list", "secrets", "kube-system", "", false},
		// ConfigMaps: the approver's record by name, nothing else.
		{ServiceAccount.Name, "update", "configmaps", "kube-system", IssuedConfigMapName, true},
		{ServiceAccount.Name, "create", "configmaps", "kube-system", "", false},
		{ServiceAccount.Name, "update", "configmaps", "kube-system", "kube-proxy", false},
		{ServiceAccount.Name, "get", "configmaps", "kube-system", "aws-auth", true},
		// Each component holds its own rights only.
		{ServiceAccount.Name, "patch", "daemonsets", "kube-system", "kube-proxy", false},
		{AddonsServiceAccount, "patch", "daemonsets", "kube-system", "kube-proxy", true},
		{ServiceAccount.Name, "delete", "nodes", "", "", false},
		{NodeGroupsServiceAccount, "delete", "nodes", "", "", true},
		{AddonsServiceAccount, "update", "certificatesigningrequests/approval", "", "", false},
		{AddonsServiceAccount, "update", "leases", "kube-system", AddonsServiceAccount, true},
		{AddonsServiceAccount, "update", "leases", "kube-system", LeaseName, false},
	} {
		user := "system:serviceaccount:" + ns + ":" + tt.sa
		group, resource, sub := "", tt.resource, ""
		switch tt.resource {
		case "daemonsets":
			group = "apps"
		case "certificatesigningrequests/approval":
			group, resource, sub = "certificates.k8s.io", "certificatesigningrequests", "approval"
		case "leases":
			group = "coordination.k8s.io"
		}
		sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tt.namespace, Verb: tt.verb, Group: group, Resource: resource, Subresource: sub, Name: tt.name},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tt.allowed {
			t.Errorf("can-i %s %s %q -n %q --as %s = %v, want %v (%s)", tt.verb, tt.resource, tt.name, tt.namespace, user, sar.Status.Allowed, tt.allowed, sar.Status.Reason)
		}
	}
}
