package nodegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// The rolling update, as EKS managed node groups run it (docs/nodegroups.md draws it):
//
//	Setup     point the Auto Scaling group at the new launch template version; fix
//	          maxUnavailable and (DEFAULT) the surge; raise max and desired by the surge
//	ScaleUp   (DEFAULT) wait until the surge's new nodes are Ready; cordon every old node
//	Upgrade   pick old nodes up to maxUnavailable (never taking availability below
//	          desired - maxUnavailable), cordon, drain through the Eviction API, wait,
//	          terminate through Auto Scaling (which launches a replacement); repeat
//	          until no instance runs an older version
//	ScaleDown (DEFAULT) lower desired by one at a time back to the spec's
//	Failed    a drain outlasted drainTimeout without force: PodEvictionFailure; a spec
//	          change or force resumes Upgrade
//
// Each call advances the state as far as it can without waiting and records it in the
// status, so a restarted controller carries on from there.
func (r *Reconciler) rollOrScale(ctx context.Context, st *state) error {
	ng := st.ng
	target := ng.Status.LaunchTemplate.Version
	u := ng.Status.Update
	if u == nil {
		if len(st.old(target)) == 0 {
			return r.scale(ctx, st)
		}
		u = r.startUpdate(st, target)
	}
	if u.TargetVersion != target {
		r.event(ng, corev1.EventTypeNormal, "UpdateRetargeted", "Update", "the template changed again: rolling onto launch template version %s instead of %s", target, u.TargetVersion)
		u.TargetVersion = target
		if err := r.cloud.updateGroup(ctx, r.updateGroupSpec(st, u)); err != nil {
			return err
		}
	}
	for range 8 { // advance through phases that need no waiting
		phase := u.Phase
		var err error
		switch u.Phase {
		case v1alpha1.UpdatePhaseSetup:
			err = r.setup(ctx, st, u)
		case v1alpha1.UpdatePhaseScaleUp:
			err = r.scaleUp(ctx, st, u)
		case v1alpha1.UpdatePhaseUpgrade:
			err = r.upgrade(ctx, st, u)
		case v1alpha1.UpdatePhaseScaleDown:
			err = r.scaleDown(ctx, st, u)
		case v1alpha1.UpdatePhaseFailed:
			r.resumeFailed(st, u)
		}
		if err != nil {
			return err
		}
		if ng.Status.Update == nil || u.Phase == phase {
			break
		}
		u.PhaseTime = metav1.NewTime(st.now)
		r.metrics.Phases.WithLabelValues(string(u.Phase)).Inc()
	}
	if ng.Status.Update != nil {
		st.after(pollBusy)
	}
	return nil
}

// old returns the live instances on another launch template version than target.
func (s *state) old(target string) []groupInstance {
	var out []groupInstance
	for _, i := range s.live() {
		if i.Version != target {
			out = append(out, i)
		}
	}
	return out
}

func (r *Reconciler) startUpdate(st *state, target string) *v1alpha1.UpdateStatus {
	desired := st.desired()
	u := &v1alpha1.UpdateStatus{
		Phase: v1alpha1.UpdatePhaseSetup, TargetVersion: target, Strategy: st.spec.Spec.UpdateStrategy,
		MaxUnavailable:  st.spec.Spec.UpdateConfig.MaxUnavailableNodes(desired),
		OriginalMaxSize: st.group.Max, OriginalDesiredSize: st.group.Desired,
		StartTime: metav1.NewTime(st.now), PhaseTime: metav1.NewTime(st.now),
	}
	st.ng.Status.Update = u
	r.metrics.Phases.WithLabelValues(string(u.Phase)).Inc()
	r.event(st.ng, corev1.EventTypeNormal, "UpdateStarted", "Update", "rolling %d instances onto launch template version %s (%s, maxUnavailable %d)",
		len(st.old(target)), target, u.Strategy, u.MaxUnavailable)
	return u
}

// updateGroupSpec is the Auto Scaling group during an update: on the target version,
// with the surge added.
func (r *Reconciler) updateGroupSpec(st *state, u *v1alpha1.UpdateStatus) *groupSpec {
	s := r.groupSpec(st)
	s.LaunchTemplateVersion = u.TargetVersion
	s.Desired += u.Surge
	s.Max = max(s.Max, s.Desired)
	return s
}

func (r *Reconciler) setup(ctx context.Context, st *state, u *v1alpha1.UpdateStatus) error {
	old := st.old(u.TargetVersion)
	if u.Strategy == v1alpha1.UpdateStrategyDefault {
		// EKS raises max and desired by the larger of twice the zones and
		// maxUnavailable; there is no use in more new nodes than old ones.
		zones := map[string]bool{}
		for _, i := range old {
			zones[i.AZ] = true
		}
		u.Surge = min(max(2*int32(len(zones)), u.MaxUnavailable), int32(len(old))) //nolint:gosec // G115: a group's instances and zones number at most its int32 MaxSize.
	}
	if err := r.cloud.updateGroup(ctx, r.updateGroupSpec(st, u)); err != nil {
		return err
	}
	if u.Surge > 0 {
		u.Phase = v1alpha1.UpdatePhaseScaleUp
		u.Message = fmt.Sprintf("launching %d new nodes", u.Surge)
	} else {
		u.Phase = v1alpha1.UpdatePhaseUpgrade
	}
	return nil
}

func (r *Reconciler) scaleUp(ctx context.Context, st *state, u *v1alpha1.UpdateStatus) error {
	var ready int32
	for _, i := range st.live() {
		if i.Version == u.TargetVersion && st.ready(i.ID) {
			ready++
		}
	}
	if ready < u.Surge {
		u.Message = fmt.Sprintf("waiting for new nodes to be Ready: %d of %d", ready, u.Surge)
		return nil
	}
	// Old nodes take no new pods from here on.
	for _, i := range st.old(u.TargetVersion) {
		if err := r.cordon(ctx, st.nodes[i.ID]); err != nil {
			return err
		}
	}
	r.event(st.ng, corev1.EventTypeNormal, "NodesLaunched", "Update", "%d new nodes are Ready; old nodes cordoned", ready)
	u.Phase = v1alpha1.UpdatePhaseUpgrade
	return nil
}

// available counts the Ready nodes an update has not taken out (cordoned old nodes
// still run their pods, so they count).
func (s *state) available(u *v1alpha1.UpdateStatus) int32 {
	var n int32
	for _, i := range s.live() {
		if s.ready(i.ID) && !slices.ContainsFunc(u.Nodes, func(x v1alpha1.UpdateNode) bool { return x.InstanceID == i.ID }) {
			n++
		}
	}
	return n
}

func (r *Reconciler) upgrade(ctx context.Context, st *state, u *v1alpha1.UpdateStatus) error {
	ng := st.ng
	// Advance the nodes in flight.
	failed, err := r.advanceInFlight(ctx, st, u, false, func(n v1alpha1.UpdateNode) {
		u.Replaced++
		r.metrics.Replaced.WithLabelValues("update").Inc()
		r.event(ng, corev1.EventTypeNormal, "NodeTerminated", "Update", "instance %s (node %s) terminated", n.InstanceID, n.NodeName)
	})
	if err != nil || failed {
		return err
	}
	// Pick more old nodes: unready ones first (taking them out costs nothing), then by
	// instance ID. EKS picks at random; the order here is deterministic.
	old := st.old(u.TargetVersion)
	slices.SortStableFunc(old, func(a, b groupInstance) int {
		ra, rb := st.ready(a.ID), st.ready(b.ID)
		switch {
		case ra == rb:
			return strings.Compare(a.ID, b.ID)
		case !ra:
			return -1
		}
		return 1
	})
	desired := st.desired()
	avail := st.available(u)
	for _, i := range old {
		if int32(len(u.Nodes)) >= u.MaxUnavailable { //nolint:gosec // G115: a group's instances number at most its int32 MaxSize.
			break
		}
		if slices.ContainsFunc(u.Nodes, func(x v1alpha1.UpdateNode) bool { return x.InstanceID == i.ID }) {
			continue
		}
		ready := st.ready(i.ID)
		if ready && desired-(avail-1) > u.MaxUnavailable {
			break // taking it out would leave too few nodes
		}
		n := v1alpha1.UpdateNode{InstanceID: i.ID, Step: v1alpha1.NodeStepCordoned, Since: metav1.NewTime(st.now)}
		if node := st.nodes[i.ID]; node != nil {
			n.NodeName = node.Name
			if err := r.cordon(ctx, node); err != nil {
				return err
			}
		}
		if ready {
			avail--
		}
		r.event(ng, corev1.EventTypeNormal, "NodeCordoned", "Update", "instance %s (node %s) selected for replacement and cordoned", n.InstanceID, n.NodeName)
		failed, err := r.advanceNode(ctx, st, u, &n, false)
		if err != nil {
			return err
		}
		u.Nodes = append(u.Nodes, n)
		if failed {
			return nil
		}
	}
	if len(old) == 0 && len(u.Nodes) == 0 {
		if u.Surge > 0 {
			u.Phase = v1alpha1.UpdatePhaseScaleDown
			u.Message = "scaling back to the desired size"
		} else {
			r.endUpdate(st, u)
		}
		return nil
	}
	u.Message = fmt.Sprintf("%d old instances left; replacing %d", len(old), len(u.Nodes))
	return nil
}

// advanceInFlight advances the update's nodes in flight; one whose instance is gone is
// told to gone, has its Node deleted and leaves the list. It reports whether the update
// failed (then the list keeps the failed node and those after it as they were).
func (r *Reconciler) advanceInFlight(ctx context.Context, st *state, u *v1alpha1.UpdateStatus, decrement bool, gone func(v1alpha1.UpdateNode)) (bool, error) {
	var keep []v1alpha1.UpdateNode
	for idx := 0; idx < len(u.Nodes); idx++ {
		n := u.Nodes[idx]
		i := slices.IndexFunc(st.group.Instances, func(g groupInstance) bool { return g.ID == n.InstanceID })
		if i < 0 || !st.group.Instances[i].live() {
			if err := r.deleteGoneNode(ctx, st, &n); err != nil {
				return false, err
			}
			gone(n)
			continue
		}
		failed, err := r.advanceNode(ctx, st, u, &n, decrement)
		if err != nil {
			return false, err
		}
		keep = append(keep, n)
		if failed {
			u.Nodes = append(keep, u.Nodes[idx+1:]...)
			return true, nil
		}
	}
	u.Nodes = keep
	return false, nil
}

// advanceNode takes one old node as far as it goes now: drain, wait, terminate. It
// reports whether the update failed.
func (r *Reconciler) advanceNode(ctx context.Context, st *state, u *v1alpha1.UpdateStatus, n *v1alpha1.UpdateNode, decrement bool) (bool, error) {
	ng, spec := st.ng, st.spec.Spec
	// The Node drained is the instance's own (its providerID names it), whatever
	// node name the status holds.
	r.groupNode(st, n)
	for range 4 {
		step := n.Step
		switch n.Step {
		case v1alpha1.NodeStepCordoned:
			n.Step, n.Since, n.DrainStart = v1alpha1.NodeStepDraining, metav1.NewTime(st.now), ptrTime(st.now)
		case v1alpha1.NodeStepDraining:
			if n.NodeName == "" {
				// Never joined: nothing runs on it.
				n.Step, n.Since = v1alpha1.NodeStepWaiting, metav1.NewTime(st.now)
				continue
			}
			if n.DrainStart == nil {
				n.DrainStart = ptrTime(st.now)
			}
			timedOut := st.now.Sub(n.DrainStart.Time) >= spec.Timeouts.DrainTimeout.Duration
			// Outside an update (u nil: scale-in) a drain that timed out deletes the
			// pods, as EKS terminates a scaled-in node after its drain timeout.
			force := timedOut && (spec.Force || u == nil)
			if force && !n.Forced {
				n.Forced = true
				r.event(ng, corev1.EventTypeWarning, "DrainForced", "Drain", "node %s: the drain outlasted %s; deleting its pods: %s",
					n.NodeName, spec.Timeouts.DrainTimeout.Duration, strings.Join(n.Blocking, "; "))
			}
			res, err := r.drain(ctx, n.NodeName, force)
			if err != nil {
				return false, err
			}
			n.Blocking = res.blocking
			switch {
			case res.done:
				n.Step, n.Since, n.Blocking = v1alpha1.NodeStepWaiting, metav1.NewTime(st.now), nil
				r.event(ng, corev1.EventTypeNormal, "NodeDrained", "Drain", "node %s drained in %s; terminating it after %s", n.NodeName,
					st.now.Sub(n.DrainStart.Time).Round(time.Second), spec.Timeouts.PostDrainWait.Duration)
			case timedOut && !force:
				r.fail(st, u, n)
				return true, nil
			default:
				if len(res.blocking) > 0 {
					r.event(ng, corev1.EventTypeWarning, "PodEvictionBlocked", "Drain", "node %s: evictions refused, retrying: %s", n.NodeName, strings.Join(res.blocking, "; "))
				}
			}
		case v1alpha1.NodeStepWaiting:
			if wait := spec.Timeouts.PostDrainWait.Duration - st.now.Sub(n.Since.Time); wait > 0 {
				st.after(min(wait, pollBusy))
				return false, nil
			}
			// Upgrade: without decrementing, so the group launches a replacement on the
			// new version. Scale-down: with it.
			if err := r.cloud.terminate(ctx, n.InstanceID, decrement); err != nil {
				return false, err
			}
			n.Step, n.Since = v1alpha1.NodeStepTerminating, metav1.NewTime(st.now)
			r.event(ng, corev1.EventTypeNormal, "NodeTerminating", "TerminateInstanceInAutoScalingGroup", "instance %s (node %s) terminating", n.InstanceID, n.NodeName)
		case v1alpha1.NodeStepTerminating:
			// Gone once the group no longer lists it (upgrade).
			return false, nil
		}
		if n.Step == step {
			return false, nil
		}
	}
	return false, nil
}

// fail ends the update with PodEvictionFailure naming the blocking pods and budgets.
func (r *Reconciler) fail(st *state, u *v1alpha1.UpdateStatus, n *v1alpha1.UpdateNode) {
	ng := st.ng
	msg := fmt.Sprintf("Reached max retries while trying to evict pods from nodes in node group %s", ng.Name)
	if len(n.Blocking) > 0 {
		msg += ": " + strings.Join(n.Blocking, "; ")
	}
	u.Phase, u.Message, u.FailedGeneration = v1alpha1.UpdatePhaseFailed, msg, ng.Generation
	st.issues = append(st.issues, v1alpha1.Issue{Code: v1alpha1.IssuePodEvictionFailure, Message: msg, ResourceIDs: []string{n.NodeName}})
	r.metrics.Updates.WithLabelValues("failed").Observe(st.now.Sub(u.StartTime.Time).Seconds())
	r.event(ng, corev1.EventTypeWarning, string(v1alpha1.IssuePodEvictionFailure), "Drain", "%s (set spec.force to delete them, or change the spec to retry)", msg)
}

// resumeFailed restarts a failed update when the spec changed since, or force is set.
func (r *Reconciler) resumeFailed(st *state, u *v1alpha1.UpdateStatus) {
	if st.ng.Generation == u.FailedGeneration && !st.spec.Spec.Force {
		return
	}
	u.Phase, u.Message = v1alpha1.UpdatePhaseUpgrade, "resumed"
	if len(st.old(u.TargetVersion)) == 0 && st.group.Desired > st.desired() {
		u.Phase = v1alpha1.UpdatePhaseScaleDown // it failed draining a scale-down's node
	}
	if !st.spec.Spec.Force {
		// A new drain timeout; with force, the one that ran out lets the drain delete
		// the pods at once.
		for i := range u.Nodes {
			if u.Nodes[i].Step == v1alpha1.NodeStepDraining {
				u.Nodes[i].DrainStart = ptrTime(st.now)
			}
		}
	}
	r.event(st.ng, corev1.EventTypeNormal, "UpdateResumed", "Update", "resuming the update to launch template version %s (force %t)", u.TargetVersion, st.spec.Spec.Force)
}

func (r *Reconciler) scaleDown(ctx context.Context, st *state, u *v1alpha1.UpdateStatus) error {
	ng, g, desired := st.ng, st.group, st.desired()
	// The surge left is what the group's desired size still has over the spec's; a
	// termination with decrement lowers it, so it is read back, not counted.
	u.Surge = max(g.Desired-desired, 0)
	// EKS decrements by one at a time back to the size before the update. Letting Auto
	// Scaling pick the instance would terminate a node with its pods still on it (every
	// pod the update moved sits on a new node), so the controller picks it, drains it
	// through the Eviction API like an old node, and terminates it with decrement.
	failed, err := r.advanceInFlight(ctx, st, u, true, func(n v1alpha1.UpdateNode) {
		r.event(ng, corev1.EventTypeNormal, "NodeTerminated", "Update", "instance %s (node %s) terminated; desired size now %d", n.InstanceID, n.NodeName, g.Desired)
	})
	if err != nil || failed {
		return err
	}
	if len(u.Nodes) > 0 {
		u.Message = fmt.Sprintf("scaling down to %d: removing node %s", desired+u.Surge-1, u.Nodes[0].NodeName)
		return nil
	}
	if int32(len(st.live())) > g.Desired { //nolint:gosec // G115: a group's instances number at most its int32 MaxSize.
		u.Message = fmt.Sprintf("waiting for the group to shrink to %d", g.Desired)
		return nil // the last termination is still being carried out
	}
	if u.Surge > 0 {
		victim, err := r.scaleDownVictim(ctx, st, func(string) bool { return false })
		if err != nil || victim == nil {
			return err
		}
		n := v1alpha1.UpdateNode{InstanceID: victim.ID, Step: v1alpha1.NodeStepCordoned, Since: metav1.NewTime(st.now)}
		if node := st.nodes[victim.ID]; node != nil {
			n.NodeName = node.Name
			if err := r.cordon(ctx, node); err != nil {
				return err
			}
		}
		r.event(ng, corev1.EventTypeNormal, "NodeCordoned", "Update", "instance %s (node %s) selected to scale down to %d and cordoned", n.InstanceID, n.NodeName, g.Desired-1)
		failed, err := r.advanceNode(ctx, st, u, &n, true)
		if err != nil {
			return err
		}
		u.Nodes = append(u.Nodes, n)
		if !failed {
			u.Message = fmt.Sprintf("scaling down to %d: removing node %s", g.Desired-1, n.NodeName)
		}
		return nil
	}
	if err := r.cloud.updateGroup(ctx, r.groupSpec(st)); err != nil {
		return err
	}
	r.endUpdate(st, u)
	return nil
}

// scaleDownVictim picks the instance a scale-down removes: one that is not a Ready
// node first (removing it costs nothing), then the node with the fewest pods to move,
// then by instance ID.
func (r *Reconciler) scaleDownVictim(ctx context.Context, st *state, taken func(id string) bool) (*groupInstance, error) {
	type candidate struct {
		i     groupInstance
		ready bool
		pods  int
	}
	var cs []candidate
	for _, i := range st.live() {
		if taken(i.ID) {
			continue
		}
		c := candidate{i: i, ready: st.ready(i.ID)}
		if n := st.nodes[i.ID]; n != nil {
			var pods corev1.PodList
			if err := r.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
				return nil, fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
			}
			for j := range pods.Items {
				if p := &pods.Items[j]; p.Spec.NodeName == n.Name && mustGo(p) {
					c.pods++
				}
			}
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(cs, func(a, b candidate) int {
		switch {
		case a.ready != b.ready:
			if !a.ready {
				return -1
			}
			return 1
		case a.pods != b.pods:
			return a.pods - b.pods
		}
		return strings.Compare(a.i.ID, b.i.ID)
	})
	return &cs[0].i, nil
}

func (r *Reconciler) endUpdate(st *state, u *v1alpha1.UpdateStatus) {
	r.metrics.Updates.WithLabelValues("succeeded").Observe(st.now.Sub(u.StartTime.Time).Seconds())
	r.event(st.ng, corev1.EventTypeNormal, "UpdateSucceeded", "Update", "every instance runs launch template version %s (%d replaced in %s)",
		u.TargetVersion, u.Replaced, st.now.Sub(u.StartTime.Time).Round(time.Second))
	st.ng.Status.Update = nil
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
