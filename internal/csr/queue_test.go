package csr

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func queuedCSR(name, signer, rv string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer},
	}
}

// Serving CSRs are settled before client CSRs that came earlier; within a kind, first
// come first served; copies from the first list or a resync come after new events.
func TestServingFirst(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	h := servingFirst()
	ctx := t.Context()
	h.Create(ctx, event.CreateEvent{Object: queuedCSR("listed-serving", SignerKubeletServing, "1"), IsInInitialList: true}, q)
	h.Create(ctx, event.CreateEvent{Object: queuedCSR("client-1", SignerKubeletClient, "2")}, q)
	h.Create(ctx, event.CreateEvent{Object: queuedCSR("client-2", SignerKubeletClient, "3")}, q)
	h.Create(ctx, event.CreateEvent{Object: queuedCSR("serving-1", SignerKubeletServing, "4")}, q)
	resync := queuedCSR("resynced-client", SignerKubeletClient, "5")
	h.Update(ctx, event.UpdateEvent{ObjectOld: resync, ObjectNew: resync}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: queuedCSR("serving-2", SignerKubeletServing, "6"), ObjectNew: queuedCSR("serving-2", SignerKubeletServing, "7")}, q)

	want := []string{"serving-1", "serving-2", "client-1", "client-2", "listed-serving", "resynced-client"}
	for i, name := range want {
		item, _, shutdown := q.GetWithPriority()
		if shutdown {
			t.Fatalf("queue shut down after %d items", i)
		}
		if item.Name != name {
			t.Errorf("item %d: %s, want %s (order wanted %v)", i, item.Name, name, want)
		}
		q.Done(item)
	}
}
