package csr

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodejoin/nodejoin/internal/pki"
)

// cachedCopy is a client.Reader that answers with one CSR, as a lagging cache would.
type cachedCopy struct {
	csr *certificatesv1.CertificateSigningRequest
}

func (r *cachedCopy) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.csr.DeepCopyInto(obj.(*certificatesv1.CertificateSigningRequest))
	return nil
}

func (r *cachedCopy) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// A cached copy that the controller's own writes replaced is not settled again (no
// review, no request); the newer version is looked at as usual.
func TestReconcileSkipsVersionsItReplaced(t *testing.T) {
	user := "system:node:" + nodeA
	c := servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}})
	c.ResourceVersion = "1"
	clientset := versioned(fake.NewClientset(c))
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var reviews atomic.Int32
	cache := &cachedCopy{csr: c.DeepCopy()}
	ctrl := &Controller{
		Client: clientset,
		Policy: &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
			reviews.Add(1)
			return true, nil
		}},
		Signer: &Signer{CA: ca},
		reader: cache,
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}}
	reconcileOnce := func(step string) {
		t.Helper()
		if res, err := ctrl.Reconcile(t.Context(), req); err != nil || !res.IsZero() {
			t.Fatalf("%s: reconcile: %+v, %v", step, res, err)
		}
	}

	reconcileOnce("first")
	issued, err := clientset.CertificatesV1().CertificateSigningRequests().Get(t.Context(), c.Name, metav1.GetOptions{})
	if err != nil || len(issued.Status.Certificate) == 0 {
		t.Fatalf("not issued: %v", err)
	}
	if n := reviews.Load(); n != 1 {
		t.Fatalf("reviews after the first reconcile = %d, want 1", n)
	}

	// The cache still shows the version the approval replaced.
	actions := len(clientset.Actions())
	reconcileOnce("stale copy")
	if n := reviews.Load(); n != 1 {
		t.Errorf("reviews after reconciling a replaced version = %d, want 1", n)
	}
	if got := clientset.Actions()[actions:]; len(got) != 0 {
		t.Errorf("requests for a replaced version: %v", got)
	}

	// The cache catches up: nothing to do, and the replaced versions are forgotten.
	cache.csr = issued
	reconcileOnce("current copy")
	if n := reviews.Load(); n != 1 {
		t.Errorf("reviews after reconciling the issued version = %d, want 1", n)
	}
	if len(ctrl.superseded) != 0 {
		t.Errorf("replaced versions kept after the cache caught up: %v", ctrl.superseded)
	}
}
