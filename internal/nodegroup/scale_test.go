package nodegroup

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestScaleInDrainsFirst(t *testing.T) {
	ng := baseGroup(3)
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{Duration: 10 * time.Second}
	h := newHarness(t, ng)
	h.until("active", 40, active)
	h.addWorkload("web", 3, 2)
	ops := len(h.cloud.ops)
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Scaling.DesiredSize = ptr.To[int32](1) })
	h.until("scaled in", 200, func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && len(ng.Status.Instances) == 1 && len(ng.Status.ScaleIn) == 0
	})
	if g := h.cloud.group(); g.desired != 1 || len(g.instances) != 1 {
		t.Errorf("Auto Scaling group: desired %d, %d instances", g.desired, len(g.instances))
	}
	if w := h.workloads[0]; w.minHealthy < 2 || len(h.lostPods) > 0 {
		t.Errorf("fewest healthy pods %d (PDB minAvailable 2); lost with their node: %q", w.minHealthy, h.lostPods)
	}
	for _, o := range h.cloud.opsSince(ops) {
		if strings.HasPrefix(o, "scale-in") || strings.HasPrefix(o, "launch") {
			t.Errorf("Auto Scaling picked or launched an instance itself: %q", h.cloud.opsSince(ops))
		}
	}
	if !h.rec.has("NodeDrained") || h.rec.has("UpdateStarted") || h.rec.has("DrainForced") {
		t.Errorf("events %q", h.rec.events)
	}
}

// A scale-in whose drain a PDB blocks deletes the pods after the drain timeout, as
// EKS terminates the node then, and says so.
func TestScaleInForcesAfterDrainTimeout(t *testing.T) {
	h := newHarness(t, baseGroup(2))
	h.until("active", 40, active)
	h.addWorkload("db", 2, 2)
	start := h.now
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Scaling.DesiredSize = ptr.To[int32](1) })
	for range 20 {
		h.tick()
	}
	if si := h.get().Status.ScaleIn; len(si) != 1 || si[0].Step != v1alpha1.NodeStepDraining || len(si[0].Blocking) == 0 {
		t.Fatalf("while the PDB refuses: scaleIn %+v", si)
	}
	h.until("scaled in", 400, func(ng *v1alpha1.NodeGroup) bool { return len(ng.Status.Instances) == 1 && len(ng.Status.ScaleIn) == 0 })
	if h.now.Sub(start) < 15*time.Minute || !h.rec.has("DrainForced") || testutil.ToFloat64(h.r.metrics.Evictions.WithLabelValues("deleted")) == 0 {
		t.Errorf("scale-in took %s; events %q", h.now.Sub(start), h.rec.events)
	}
}

// The NodeGroup owns its group's size: sizes set on the Auto Scaling group itself (as
// aws autoscaling set-desired-capacity or update-auto-scaling-group would) are put
// back, with an event saying so, and the status agrees with the group after.
func TestSizeChangedOnTheGroupIsPutBack(t *testing.T) {
	tests := []struct {
		name              string
		min, max, desired int32
	}{
		{"desired raised", 1, 6, 2},
		{"desired lowered", 0, 6, 0},
		{"min and max changed", 2, 10, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, baseGroup(1))
			h.until("active", 40, active)
			h.cloud.mu.Lock()
			for _, g := range h.cloud.groups {
				g.min, g.max, g.desired = tt.min, tt.max, tt.desired
			}
			h.cloud.mu.Unlock()
			h.until("put back", 200, func(ng *v1alpha1.NodeGroup) bool {
				g := h.cloud.group()
				return active(ng) && g.min == 1 && g.max == 6 && g.desired == 1 && len(g.instances) == 1 && len(ng.Status.Instances) == 1
			})
			if ng := h.get(); ng.Status.DesiredSize != 1 || ng.Status.ReadySize != 1 {
				t.Errorf("status: desired %d, ready %d", ng.Status.DesiredSize, ng.Status.ReadySize)
			}
			if !h.rec.has("SizeRestored") {
				t.Errorf("no SizeRestored event: %q", h.rec.events)
			}
		})
	}
}

// A resize through the NodeGroup's spec is not drift.
func TestSpecResizeIsNotDrift(t *testing.T) {
	h := newHarness(t, baseGroup(1))
	h.until("active", 40, active)
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Scaling.DesiredSize = ptr.To[int32](2) })
	h.until("scaled out", 60, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.ReadySize == 2 })
	// Lowering the maximum below the group's size too: scale-in first keeps the group's
	// maximum at its size while it drains, which is not drift either.
	h.mutate(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Scaling.DesiredSize, ng.Spec.Scaling.MaxSize = ptr.To[int32](1), 1
	})
	h.until("scaled in", 200, func(ng *v1alpha1.NodeGroup) bool {
		g := h.cloud.group()
		return active(ng) && len(ng.Status.Instances) == 1 && len(ng.Status.ScaleIn) == 0 && g.max == 1 && g.desired == 1
	})
	for range 5 {
		h.tick()
	}
	if h.rec.has("SizeRestored") {
		t.Errorf("a spec resize was taken for drift: %q", h.rec.events)
	}
}
