package nodegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// joinTimeouts reports instances that did not become Ready nodes in time as
// NodeCreationFailure, and replaces them one at a time with backoff.
func (r *Reconciler) joinTimeouts(ctx context.Context, st *state) error {
	ng, timeout := st.ng, st.spec.Spec.Timeouts.JoinTimeout.Duration
	inUpdate := func(id string) bool {
		return ng.Status.Update != nil && slices.ContainsFunc(ng.Status.Update.Nodes, func(x v1alpha1.UpdateNode) bool { return x.InstanceID == id })
	}
	var late []v1alpha1.InstanceStatus
	allReady := true
	for _, is := range ng.Status.Instances {
		if !(groupInstance{LifecycleState: is.LifecycleState}).live() || inUpdate(is.InstanceID) {
			continue
		}
		if st.ready(is.InstanceID) {
			continue
		}
		allReady = false
		if is.JoinedAt != nil {
			continue // joined once: not a failed join
		}
		if left := timeout - st.now.Sub(is.FirstSeen.Time); left > 0 {
			st.after(min(left, pollBusy))
			continue
		}
		late = append(late, is)
	}
	if len(late) == 0 {
		if allReady && ng.Status.Replacement != nil {
			ng.Status.Replacement = nil
		}
		return nil
	}
	var ids, why []string
	for _, is := range late {
		ids = append(ids, is.InstanceID)
		why = append(why, is.InstanceID+": "+st.diagnose(is))
	}
	st.issues = append(st.issues, v1alpha1.Issue{Code: v1alpha1.IssueNodeCreationFailure,
		Message: "Instances failed to join the kubernetes cluster: " + strings.Join(why, "; "), ResourceIDs: ids})
	rep := ng.Status.Replacement
	if rep != nil && st.now.Before(rep.NotBefore.Time) {
		st.after(min(rep.NotBefore.Sub(st.now), pollBusy))
		return nil
	}
	victim := late[0]
	if err := r.cloud.terminate(ctx, victim.InstanceID, false); err != nil {
		return err
	}
	failures := int32(1)
	if rep != nil {
		failures = rep.Failures + 1
	}
	backoff := backoffMin << min(failures-1, 10)
	backoff = min(backoff, backoffMax)
	ng.Status.Replacement = &v1alpha1.ReplacementStatus{Failures: failures, NotBefore: metav1.NewTime(st.now.Add(backoff))}
	r.metrics.Replaced.WithLabelValues("join_timeout").Inc()
	r.event(ng, corev1.EventTypeWarning, string(v1alpha1.IssueNodeCreationFailure), "TerminateInstanceInAutoScalingGroup",
		"instance %s did not join within %s (%s); replacing it (failure %d, next replacement not before %s)",
		victim.InstanceID, timeout, st.diagnose(victim), failures, backoff)
	if n := st.nodes[victim.InstanceID]; n != nil {
		if err := r.deleteNode(ctx, n); err != nil {
			return err
		}
	}
	st.after(pollBusy)
	return nil
}

// diagnose says how far an instance got in joining.
func (s *state) diagnose(is v1alpha1.InstanceStatus) string {
	n := s.nodes[is.InstanceID]
	switch {
	case n == nil && strings.HasPrefix(is.LifecycleState, "Pending"):
		return "instance still " + is.LifecycleState + " in the Auto Scaling group, no Node registered"
	case n == nil:
		return "instance " + is.LifecycleState + ", no Node registered (the kubelet never authenticated, or its user data did not start it)"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return fmt.Sprintf("Node %s registered, Ready=%s (%s: %s)", n.Name, c.Status, c.Reason, c.Message)
		}
	}
	return "Node " + n.Name + " registered, no Ready condition yet (the kubelet has not posted status)"
}

// launchFailures reports the group's standing failed launch activities.
func (r *Reconciler) launchFailures(ctx context.Context, st *state) error {
	failed, err := r.cloud.failedLaunches(ctx, st.asgName)
	if err != nil {
		return err
	}
	if len(failed) == 0 {
		return nil
	}
	code := v1alpha1.IssueAsgInstanceLaunchFailures
	msg := aws.ToString(failed[0].StatusMessage)
	if msg == "" {
		msg = aws.ToString(failed[0].Description)
	}
	switch {
	// Auto Scaling's activity carries EC2's message, not its code: "You have requested
	// more instances (N) than your current instance limit of M allows …" (or "… vCPU
	// limit …").
	case strings.Contains(msg, "InstanceLimitExceeded") || strings.Contains(msg, "VcpuLimitExceeded") ||
		strings.Contains(msg, "current instance limit") || strings.Contains(msg, "current vCPU limit"):
		code = v1alpha1.IssueInstanceLimitExceeded
	case strings.Contains(msg, "InsufficientFreeAddresses"):
		code = v1alpha1.IssueInsufficientFreeAddresses
	}
	if len(msg) > 512 {
		msg = msg[:512]
	}
	prev := hasIssue(st.ng.Status.Health.Issues, code)
	st.issues = append(st.issues, v1alpha1.Issue{Code: code, Message: msg, ResourceIDs: []string{st.asgName}})
	if !prev {
		r.event(st.ng, corev1.EventTypeWarning, string(code), "Launch", "%d failed launches; the latest: %s", len(failed), msg)
	}
	st.after(pollBusy)
	return nil
}
