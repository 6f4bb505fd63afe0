package eksbackend

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// A group's EKS status: CREATING before the controller's first pass, UPDATING from the
// moment a change is accepted until the controller acts on it (eksctl scale --wait
// waits for ACTIVE after it), DELETING once deleted, else the controller's phase.
func TestStatus(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name             string
		phase            v1alpha1.NodeGroupPhase
		generation, seen int64
		deleted          bool
		want             string
	}{
		{"new", "", 1, 0, false, "CREATING"},
		{"active", v1alpha1.PhaseActive, 2, 2, false, "ACTIVE"},
		{"changed, not yet seen", v1alpha1.PhaseActive, 3, 2, false, "UPDATING"},
		{"rolling", v1alpha1.PhaseUpdating, 3, 3, false, "UPDATING"},
		{"failed creation stays failed", v1alpha1.PhaseCreateFailed, 2, 1, false, "CREATE_FAILED"},
		{"degraded", v1alpha1.PhaseDegraded, 2, 2, false, "DEGRADED"},
		{"deleted", v1alpha1.PhaseActive, 2, 2, true, "DELETING"},
	} {
		ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Generation: tc.generation}}
		ng.Status.Phase, ng.Status.ObservedGeneration = tc.phase, tc.seen
		if tc.deleted {
			ng.DeletionTimestamp = &now
		}
		if got := Status(ng); got != tc.want {
			t.Errorf("%s: Status = %s, want %s", tc.name, got, tc.want)
		}
	}
}
