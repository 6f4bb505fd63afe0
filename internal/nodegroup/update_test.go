package nodegroup

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestCreateAndScale(t *testing.T) {
	h := newHarness(t, baseGroup(2))
	h.until("active with 2 nodes", 40, active)
	ng := h.get()
	if ng.Status.LaunchTemplate == nil || ng.Status.LaunchTemplate.Version != "1" || ng.Status.AutoScalingGroupName == "" {
		t.Fatalf("status = %+v", ng.Status)
	}
	g := h.cloud.group()
	for k, v := range map[string]string{"eks:cluster-name": testCluster, "eks:nodegroup-name": "ng1", "kubernetes.io/cluster/c1": "owned",
		"k8s.io/cluster-autoscaler/enabled": "true", "k8s.io/cluster-autoscaler/c1": "owned"} {
		if g.tags[k] != v {
			t.Errorf("Auto Scaling group tag %s = %q, want %q", k, g.tags[k], v)
		}
	}
	lt := h.cloud.templates[ng.Status.LaunchTemplate.Name]
	data := lt.versions[0].data
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if !strings.Contains(string(ud), "apiVersion: node.eks.aws/v1alpha1") || !strings.Contains(string(ud), "eks.amazonaws.com/nodegroup=ng1") {
		t.Errorf("user data is not AL2023 NodeConfig for ng1:\n%s", ud)
	}
	// The image the controller chose is the release AMI EKS labels managed nodes with.
	if !strings.Contains(string(ud), "eks.amazonaws.com/nodegroup-image=ami-0123456789abcdef0") {
		t.Errorf("user data lacks the nodegroup-image label of the controller's AMI:\n%s", ud)
	}
	if aws.ToString(data.ImageId) != "ami-0123456789abcdef0" || string(data.InstanceType) != "m5.large" || aws.ToInt32(data.MetadataOptions.HttpPutResponseHopLimit) != 1 {
		t.Errorf("launch template data = %+v", data)
	}
	if ng.Status.InstanceType != "m5.large" || !h.rec.has("AutoScalingGroupCreated") {
		t.Errorf("instanceType %q, events %q", ng.Status.InstanceType, h.rec.events)
	}

	for _, want := range []int32{4, 1} {
		h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Scaling.DesiredSize = ptr.To(want) })
		h.until("scaled", 40, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.ReadySize == want })
		if g := h.cloud.group(); g.desired != want || g.min != 1 || g.max != 6 {
			t.Errorf("Auto Scaling group size = %d/%d/%d, want 1/6/%d", g.min, g.max, g.desired, want)
		}
	}
	// Scaling is not an update: one launch template version, no update events.
	if len(lt.versions) != 1 || h.rec.has("UpdateStarted") {
		t.Errorf("scaling made %d versions; events %q", len(lt.versions), h.rec.events)
	}
}

// rollingUpdate changes the template of a settled group of 3 nodes running a
// 3-replica workload with a PDB (minAvailable 2) and runs the update to the end.
func rollingUpdate(t *testing.T, strategy v1alpha1.UpdateStrategy, restart bool) (*harness, []string) {
	ng := baseGroup(3)
	ng.Spec.UpdateStrategy = strategy
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{Duration: 20 * time.Second}
	h := newHarness(t, ng)
	h.until("active", 40, active)
	h.addWorkload("web", 3, 2)
	h.restart = restart
	ops := len(h.cloud.ops)
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.Labels = map[string]string{"team": "blue"} })
	h.until("updated", 400, func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.UpdatedSize == 3 && ng.Status.LaunchTemplate.Version == "2"
	})
	if v := h.instanceVersions(); v["2"] != 3 || len(v) != 1 {
		t.Errorf("instances by version = %v, want 3 on version 2", v)
	}
	if g := h.cloud.group(); g.desired != 3 || g.max != 6 || g.version != "2" {
		t.Errorf("Auto Scaling group after the update: desired %d max %d version %s", g.desired, g.max, g.version)
	}
	for _, e := range []string{"UpdateStarted", "NodeCordoned", "NodeDrained", "NodeTerminating", "NodeTerminated", "UpdateSucceeded"} {
		if !h.rec.has(e) {
			t.Errorf("no %s event: %q", e, h.rec.events)
		}
	}
	if h.maxInFlight != 1 {
		t.Errorf("at most %d nodes were taken out at once, want 1 (maxUnavailable)", h.maxInFlight)
	}
	// The PDB held throughout, and no pod went down with its node: scale-down too
	// drains first (its nodes carry the pods the update moved).
	if w := h.workloads[0]; w.minHealthy < w.minAvailable {
		t.Errorf("as few as %d pods of %s were healthy, its PodDisruptionBudget wants %d", w.minHealthy, w.name, w.minAvailable)
	}
	if len(h.lostPods) > 0 {
		t.Errorf("pods terminated with their node instead of evicted: %q", h.lostPods)
	}
	return h, h.cloud.opsSince(ops)
}

func firstIndex(ops []string, prefix, suffix string) int {
	return slices.IndexFunc(ops, func(o string) bool { return strings.HasPrefix(o, prefix) && strings.HasSuffix(o, suffix) })
}

func TestRollingUpdateDefaultLaunchesFirst(t *testing.T) {
	h, ops := rollingUpdate(t, v1alpha1.UpdateStrategyDefault, false)
	launch, term := firstIndex(ops, "launch", "v2"), firstIndex(ops, "terminate", "v1")
	if launch < 0 || term < 0 || launch > term {
		t.Errorf("DEFAULT: want a launch of v2 before the first termination of v1: %q", ops)
	}
	// The surge: 2 zones x 2 = 4, capped by the 3 old nodes.
	if h.ltMax != 6 || firstIndex(ops, "launch", "v2") != 0 {
		t.Errorf("max size during the update %d; ops %q", h.ltMax, ops)
	}
	if n := strings.Count(strings.Join(ops, "\n"), "launch"); n < 3 {
		t.Errorf("%d launches, want at least 3: %q", n, ops)
	}
	// The surge kept every node available throughout.
	if h.minAvail < 3 {
		t.Errorf("DEFAULT: as few as %d nodes were available, want 3 (the surge covers the drained node)", h.minAvail)
	}
}

func TestRollingUpdateMinimalTerminatesFirst(t *testing.T) {
	h, ops := rollingUpdate(t, v1alpha1.UpdateStrategyMinimal, false)
	launch, term := firstIndex(ops, "launch", "v2"), firstIndex(ops, "terminate", "v1")
	if launch < 0 || term < 0 || term > launch {
		t.Errorf("MINIMAL: want a termination of v1 before the first launch of v2: %q", ops)
	}
	if h.ltMax != 6 {
		t.Errorf("MINIMAL raised the group's max to %d", h.ltMax)
	}
	if g := h.cloud.group(); g.desired != 3 {
		t.Errorf("desired %d", g.desired)
	}
	if h.minAvail != 2 {
		t.Errorf("MINIMAL: fewest available nodes %d, want 2 (desired 3 - maxUnavailable 1)", h.minAvail)
	}
}

// A new Reconciler at every step (a controller restart) carries the update through
// from the status alone, without terminating anything twice.
func TestRestartMidUpgradeResumes(t *testing.T) {
	for _, s := range []v1alpha1.UpdateStrategy{v1alpha1.UpdateStrategyDefault, v1alpha1.UpdateStrategyMinimal} {
		t.Run(string(s), func(t *testing.T) {
			_, ops := rollingUpdate(t, s, true)
			seen := map[string]bool{}
			for _, o := range ops {
				if strings.HasPrefix(o, "terminate") && strings.HasSuffix(o, " v1") {
					if seen[o] {
						t.Errorf("%s twice: %q", o, ops)
					}
					seen[o] = true
				}
			}
			if len(seen) != 3 {
				t.Errorf("%d old instances terminated, want 3: %q", len(seen), ops)
			}
		})
	}
}

func TestMaxUnavailableTwo(t *testing.T) {
	ng := baseGroup(5)
	ng.Spec.UpdateStrategy = v1alpha1.UpdateStrategyMinimal
	ng.Spec.UpdateConfig = &v1alpha1.UpdateConfig{MaxUnavailable: ptr.To[int32](2)}
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{}
	h := newHarness(t, ng)
	h.until("active", 40, active)
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.MaxPods = ptr.To[int32](20) })
	h.until("updated", 400, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.UpdatedSize == 5 })
	if h.maxInFlight != 2 || h.minAvail != 3 {
		t.Errorf("in flight at most %d (want 2), fewest available %d (want 3)", h.maxInFlight, h.minAvail)
	}
}

// blockedUpdate starts an update of 2 nodes whose workload's PDB refuses every
// eviction, and runs it until a drain is refused.
func blockedUpdate(t *testing.T, force bool) *harness {
	ng := baseGroup(2)
	ng.Spec.UpdateStrategy = v1alpha1.UpdateStrategyMinimal
	ng.Spec.Force = force
	h := newHarness(t, ng)
	h.until("active", 40, active)
	h.addWorkload("db", 2, 2)
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.Labels = map[string]string{"tier": "db"} })
	h.until("blocked", 40, func(ng *v1alpha1.NodeGroup) bool {
		u := ng.Status.Update
		return u != nil && len(u.Nodes) == 1 && len(u.Nodes[0].Blocking) > 0
	})
	b := h.get().Status.Update.Nodes[0].Blocking[0]
	if !strings.HasPrefix(b, "pod default/db-") || !strings.Contains(b, "blocked by PodDisruptionBudget default/db") {
		t.Errorf("blocking = %q", b)
	}
	if !h.rec.has("PodEvictionBlocked") {
		t.Errorf("no PodEvictionBlocked event: %q", h.rec.events)
	}
	return h
}

func TestPDBBlocksThenReleases(t *testing.T) {
	h := blockedUpdate(t, false)
	for range 20 {
		h.tick()
	}
	if u := h.get().Status.Update; u == nil || u.Phase != v1alpha1.UpdatePhaseUpgrade || u.Nodes[0].Step != v1alpha1.NodeStepDraining {
		t.Fatalf("while the PDB refuses: update %+v", u)
	}
	h.setPDB("db", 1)
	h.until("updated", 400, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.UpdatedSize == 2 })
	if h.rec.has(string(v1alpha1.IssuePodEvictionFailure)) || testutil.ToFloat64(h.r.metrics.Evictions.WithLabelValues("deleted")) != 0 {
		t.Errorf("released PDB: events %q", h.rec.events)
	}
}

func TestDrainTimeoutPodEvictionFailureThenForce(t *testing.T) {
	h := blockedUpdate(t, false)
	// 15 minutes of 5 s steps.
	h.until("failed", 200, func(ng *v1alpha1.NodeGroup) bool {
		return ng.Status.Update != nil && ng.Status.Update.Phase == v1alpha1.UpdatePhaseFailed
	})
	ng := h.get()
	u := ng.Status.Update
	if d := u.PhaseTime.Sub(u.Nodes[0].DrainStart.Time); d < 15*time.Minute || d > 15*time.Minute+10*time.Second {
		t.Errorf("failed %s after the drain started, want 15m", d)
	}
	if len(ng.Status.Health.Issues) != 1 {
		t.Fatalf("issues = %+v", ng.Status.Health.Issues)
	}
	is := ng.Status.Health.Issues[0]
	if is.Code != v1alpha1.IssuePodEvictionFailure || !strings.Contains(is.Message, "Reached max retries while trying to evict pods from nodes in node group ng1") ||
		!strings.Contains(is.Message, "PodDisruptionBudget default/db") || len(is.ResourceIDs) != 1 || is.ResourceIDs[0] != u.Nodes[0].NodeName {
		t.Errorf("issue = %+v", is)
	}
	if ng.Status.Phase != v1alpha1.PhaseDegraded || !h.rec.has(string(v1alpha1.IssuePodEvictionFailure)) {
		t.Errorf("phase %s, events %q", ng.Status.Phase, h.rec.events)
	}
	// It stays failed: nothing more is terminated.
	ops := len(h.cloud.ops)
	for range 30 {
		h.tick()
	}
	if got := h.cloud.opsSince(ops); len(got) != 0 || h.get().Status.Update.Phase != v1alpha1.UpdatePhaseFailed {
		t.Errorf("a failed update went on: %q", got)
	}
	// Force deletes the pods the budget protects and finishes.
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Force = true })
	h.until("updated", 400, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.UpdatedSize == 2 })
	if testutil.ToFloat64(h.r.metrics.Evictions.WithLabelValues("deleted")) == 0 || !h.rec.has("UpdateResumed") {
		t.Errorf("force deleted no pods; events %q", h.rec.events)
	}
	if len(h.get().Status.Health.Issues) != 0 {
		t.Errorf("issues after the forced update: %+v", h.get().Status.Health.Issues)
	}
}

func TestForceDeletesAfterDrainTimeout(t *testing.T) {
	h := blockedUpdate(t, true)
	start := h.now
	h.until("updated", 600, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.UpdatedSize == 2 })
	if h.now.Sub(start) < 15*time.Minute || h.rec.has(string(v1alpha1.IssuePodEvictionFailure)) {
		t.Errorf("forced update took %s; events %q", h.now.Sub(start), h.rec.events)
	}
	if testutil.ToFloat64(h.r.metrics.Evictions.WithLabelValues("deleted")) == 0 {
		t.Error("no pod was deleted")
	}
}

// Lowering the desired size drains the nodes it removes (the PDB holds, no pod goes
// down with its node) and terminates them with decrement, without an update.
