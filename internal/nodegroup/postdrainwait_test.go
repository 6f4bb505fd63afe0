package nodegroup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// The wait between a drained node and its termination in an update is EKS's 60 s when
// the spec leaves spec.timeouts.postDrainWait unset, and what the spec says when it
// sets it (tests shorten it): measured on the harness's clock, from the tick that
// reports NodeDrained to the one that reports NodeTerminating.
func TestPostDrainWaitDefaultsToEKSMinute(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *metav1.Duration
		want time.Duration
	}{
		{"unset", nil, v1alpha1.DefaultPostDrainWait},
		{"shortened", &metav1.Duration{Duration: 5 * time.Second}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.set == nil && v1alpha1.DefaultPostDrainWait != time.Minute {
				t.Fatalf("DefaultPostDrainWait = %s, want EKS's 60s", v1alpha1.DefaultPostDrainWait)
			}
			ng := baseGroup(1)
			ng.Spec.Timeouts.PostDrainWait = tc.set
			h := newHarness(t, ng)
			h.until("active", 40, active)
			h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.Labels = map[string]string{"release": "v2"} })
			var drained, terminating time.Time
			for i := 0; i < 200 && terminating.IsZero(); i++ {
				at := h.now // the reconcile of this tick sees this time
				h.tick()
				if drained.IsZero() && h.rec.has("NodeDrained") {
					drained = at
				}
				if !drained.IsZero() && h.rec.has("NodeTerminating") {
					terminating = at
				}
			}
			if drained.IsZero() || terminating.IsZero() {
				t.Fatalf("no drain then termination in 200 steps; events %q", h.rec.events)
			}
			// The harness ticks every 5 s: the termination comes on the first tick at or
			// after the wait.
			if got := terminating.Sub(drained); got < tc.want || got >= tc.want+5*time.Second {
				t.Errorf("drained at %s, terminating at %s: waited %s, want %s", drained.Format(time.TimeOnly), terminating.Format(time.TimeOnly), got, tc.want)
			}
		})
	}
}
