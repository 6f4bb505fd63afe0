package nodegroup

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestJoinTimeoutReplacesWithBackoff(t *testing.T) {
	ng := baseGroup(2)
	ng.Spec.Timeouts.JoinTimeout = &metav1.Duration{Duration: time.Minute}
	h := newHarness(t, ng)
	h.breakAll = true
	h.until("NodeCreationFailure", 200, func(ng *v1alpha1.NodeGroup) bool {
		return hasIssue(ng.Status.Health.Issues, v1alpha1.IssueNodeCreationFailure)
	})
	ng = h.get()
	is := ng.Status.Health.Issues[0]
	if len(is.ResourceIDs) != 2 || !strings.Contains(is.Message, "Instances failed to join the kubernetes cluster") ||
		!strings.Contains(is.Message, is.ResourceIDs[0]+": instance InService, no Node registered") {
		t.Errorf("issue = %+v", is)
	}
	if ng.Status.Phase != v1alpha1.PhaseCreateFailed {
		t.Errorf("phase %s, want CREATE_FAILED", ng.Status.Phase)
	}
	// Replacements back off: 30 s, 60 s, 120 s, ...
	var at []time.Time
	ops := 0
	for range 150 {
		h.tick()
		if n := strings.Count(strings.Join(h.cloud.opsSince(ops), "\n"), "terminate"); n > len(at) {
			at = append(at, h.now)
		}
	}
	if len(at) < 3 {
		t.Fatalf("%d replacements in 150 steps", len(at))
	}
	for i := 2; i < len(at); i++ {
		if at[i].Sub(at[i-1]) < at[i-1].Sub(at[i-2]) {
			t.Errorf("replacement gaps shrink: %v", at)
		}
	}
	if !h.rec.has(string(v1alpha1.IssueNodeCreationFailure)) {
		t.Errorf("no NodeCreationFailure event")
	}
	// Instances join again: the issue clears and the group becomes ACTIVE.
	h.breakAll = false
	h.broken = map[string]bool{}
	h.until("active", 400, active)
	if ng := h.get(); len(ng.Status.Health.Issues) != 0 || ng.Status.Replacement != nil {
		t.Errorf("after recovery: issues %+v replacement %+v", ng.Status.Health.Issues, ng.Status.Replacement)
	}
}

func TestLaunchFailuresReported(t *testing.T) {
	h := newHarness(t, baseGroup(2))
	h.cloud.failLaunch = "You have requested more instances (2) than your current instance limit of 0 allows for the specified instance type. Launching EC2 instance failed. InstanceLimitExceeded"
	h.until("InstanceLimitExceeded", 20, func(ng *v1alpha1.NodeGroup) bool {
		return hasIssue(ng.Status.Health.Issues, v1alpha1.IssueInstanceLimitExceeded)
	})
	if ng := h.get(); ng.Status.Health.Issues[0].ResourceIDs[0] != ng.Status.AutoScalingGroupName {
		t.Errorf("issue = %+v", ng.Status.Health.Issues[0])
	}
	h.cloud.failLaunch = "Launching EC2 instance failed. The requested configuration is currently not supported."
	h.until("AsgInstanceLaunchFailures", 20, func(ng *v1alpha1.NodeGroup) bool {
		return hasIssue(ng.Status.Health.Issues, v1alpha1.IssueAsgInstanceLaunchFailures)
	})
	h.cloud.failLaunch = ""
	h.until("active", 40, func(ng *v1alpha1.NodeGroup) bool { return active(ng) && len(ng.Status.Health.Issues) == 0 })
}

// A termination that failed after the group's last launch (Auto Scaling tries it again)
// is not a launch failure: the group stays ACTIVE, with no health issue.
func TestFailedTerminationIsNoLaunchFailure(t *testing.T) {
	h := newHarness(t, baseGroup(2))
	h.until("active", 40, active)
	h.cloud.mu.Lock()
	g := h.cloud.groups[h.get().Status.AutoScalingGroupName]
	g.activities = append(g.activities, astypes.Activity{ActivityId: aws.String("t1"), AutoScalingGroupName: aws.String(g.name),
		Description: aws.String("Terminating EC2 instance: " + g.instances[0].id), StatusCode: astypes.ScalingActivityStatusCodeFailed,
		StatusMessage: aws.String("the instance's network namespace is busy"), StartTime: aws.Time(h.now.Add(time.Second))})
	h.cloud.mu.Unlock()
	for range 5 {
		h.tick()
	}
	if ng := h.get(); !active(ng) || len(ng.Status.Health.Issues) != 0 {
		t.Errorf("after a failed termination: phase %s, issues %+v", ng.Status.Phase, ng.Status.Health.Issues)
	}
	// A launch that fails after it is still reported.
	h.cloud.failLaunch = "Launching EC2 instance failed. The requested configuration is currently not supported."
	h.cloud.mu.Lock()
	g.desired++
	h.cloud.mu.Unlock()
	h.until("AsgInstanceLaunchFailures", 20, func(ng *v1alpha1.NodeGroup) bool {
		return hasIssue(ng.Status.Health.Issues, v1alpha1.IssueAsgInstanceLaunchFailures)
	})
}
