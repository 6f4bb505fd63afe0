package nodegroup

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestDeleteDrainsAndDeletes(t *testing.T) {
	h := newHarness(t, baseGroup(2))
	h.until("active", 40, active)
	h.addWorkload("web", 2, 0)
	ng := h.get()
	if !slices.Contains(ng.Finalizers, v1alpha1.NodeGroupFinalizer) {
		t.Fatalf("finalizers %q", ng.Finalizers)
	}
	if err := h.client.Delete(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := h.client.Get(context.Background(), types.NamespacedName{Name: "ng1"}, &v1alpha1.NodeGroup{}); err != nil {
			break
		}
		h.tick()
	}
	if len(h.cloud.groups) != 0 || len(h.cloud.templates) != 0 {
		t.Errorf("left in the cloud: %d groups, %d templates", len(h.cloud.groups), len(h.cloud.templates))
	}
	var nodes corev1.NodeList
	if err := h.client.List(context.Background(), &nodes); err != nil || len(nodes.Items) != 0 {
		t.Errorf("nodes left: %d (%v)", len(nodes.Items), err)
	}
	if ev := testutil.ToFloat64(h.r.metrics.Evictions.WithLabelValues("evicted")); !h.rec.has("Deleted") || ev < 2 {
		t.Errorf("%v pods evicted; events %q", ev, h.rec.events)
	}
}
