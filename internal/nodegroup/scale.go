package nodegroup

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// scale keeps the group at the spec's size and version outside updates. The NodeGroup
// owns the group's size, as EKS managed node groups own theirs: a size changed on the
// Auto Scaling group itself is put back (see restoreSize).
func (r *Reconciler) scale(ctx context.Context, st *state) error {
	s, g := r.groupSpec(st), st.group
	r.restoreSize(st, s)
	if done, err := r.scaleIn(ctx, st, s); err != nil || !done {
		return err
	}
	if g.Min == s.Min && g.Max == s.Max && g.Desired == s.Desired && g.LaunchTemplateVersion == s.LaunchTemplateVersion {
		return nil
	}
	if g.Min == s.Min && g.Max == s.Max && g.LaunchTemplateVersion == s.LaunchTemplateVersion {
		if err := r.cloud.setDesired(ctx, s.Name, s.Desired); err != nil {
			return err
		}
	} else if err := r.cloud.updateGroup(ctx, s); err != nil {
		return err
	}
	if g.Desired != s.Desired {
		r.event(st.ng, corev1.EventTypeNormal, "Scaled", "UpdateAutoScalingGroup", "desired size %d -> %d (min %d, max %d)", g.Desired, s.Desired, s.Min, s.Max)
	}
	st.after(pollBusy)
	return nil
}

// restoreSize notices a group whose min, max or desired size differ from the spec
// although the spec did not change since the last pass (the generation was observed)
// and no scale-in is under way: something else (aws autoscaling set-desired-capacity,
// update-auto-scaling-group) changed them. It says so in an event; scale then puts
// them back, a larger size through scaleIn's drains, so that no pod is lost to it.
func (r *Reconciler) restoreSize(st *state, s *groupSpec) {
	ng, g := st.ng, st.group
	if ng.Status.ObservedGeneration != ng.Generation || len(ng.Status.ScaleIn) > 0 {
		return
	}
	if g.Min == s.Min && g.Max == s.Max && g.Desired == s.Desired {
		return
	}
	r.opts.Log.Info("an Auto Scaling group's size drifted from its NodeGroup", "nodegroup", ng.Name, "group", g.Name,
		"min", g.Min, "max", g.Max, "desired", g.Desired, "specMin", s.Min, "specMax", s.Max, "specDesired", s.Desired)
	r.event(ng, corev1.EventTypeWarning, "SizeRestored", "UpdateAutoScalingGroup",
		"Auto Scaling group %s was resized outside the NodeGroup to min %d, max %d, desired %d; the NodeGroup owns its size, so it is put back to min %d, max %d, desired %d (resize with nodejoin scale nodegroup or spec.scaling)",
		g.Name, g.Min, g.Max, g.Desired, s.Min, s.Max, s.Desired)
}

// scaleIn removes the instances a lowered desired size no longer wants, draining each
// first: Auto Scaling, left to pick, would terminate nodes with their pods on them.
// It reports whether the group is down to the spec's size, so that scale may go on.
func (r *Reconciler) scaleIn(ctx context.Context, st *state, s *groupSpec) (bool, error) {
	ng, g := st.ng, st.group
	var keep []v1alpha1.UpdateNode
	pending := int32(0)
	for _, n := range ng.Status.ScaleIn {
		i := slices.IndexFunc(g.Instances, func(x groupInstance) bool { return x.ID == n.InstanceID })
		if i < 0 || !g.Instances[i].live() {
			if err := r.deleteGoneNode(ctx, st, &n); err != nil {
				return false, err
			}
			r.event(ng, corev1.EventTypeNormal, "NodeTerminated", "ScaleIn", "instance %s (node %s) terminated; desired size now %d", n.InstanceID, n.NodeName, g.Desired)
			continue
		}
		// The group's desired size, read before this pass, counts the decrement of an
		// instance already terminating, not of one terminated now.
		if n.Step != v1alpha1.NodeStepTerminating {
			pending++
		}
		if _, err := r.advanceNode(ctx, st, nil, &n, true); err != nil {
			return false, err
		}
		keep = append(keep, n)
	}
	ng.Status.ScaleIn = keep
	excess := g.Desired - pending - s.Desired
	if excess <= 0 {
		if len(keep) > 0 {
			st.after(pollBusy)
		}
		return len(keep) == 0, nil
	}
	// Any change of min, max or version goes first, with the desired size kept; the
	// decrements then lower it.
	if g.Min != s.Min || g.Max != s.Max || g.LaunchTemplateVersion != s.LaunchTemplateVersion {
		keepSize := *s
		keepSize.Desired = g.Desired
		keepSize.Max = max(keepSize.Max, g.Desired)
		if err := r.cloud.updateGroup(ctx, &keepSize); err != nil {
			return false, err
		}
	}
	for range excess {
		victim, err := r.scaleDownVictim(ctx, st, func(id string) bool {
			return slices.ContainsFunc(ng.Status.ScaleIn, func(x v1alpha1.UpdateNode) bool { return x.InstanceID == id })
		})
		if err != nil {
			return false, err
		}
		if victim == nil {
			break
		}
		n := v1alpha1.UpdateNode{InstanceID: victim.ID, Step: v1alpha1.NodeStepCordoned, Since: metav1.NewTime(st.now)}
		if node := st.nodes[victim.ID]; node != nil {
			n.NodeName = node.Name
			if err := r.cordon(ctx, node); err != nil {
				return false, err
			}
		}
		r.event(ng, corev1.EventTypeNormal, "NodeCordoned", "ScaleIn", "instance %s (node %s) selected to scale in towards %d and cordoned", n.InstanceID, n.NodeName, s.Desired)
		if _, err := r.advanceNode(ctx, st, nil, &n, true); err != nil {
			return false, err
		}
		ng.Status.ScaleIn = append(ng.Status.ScaleIn, n)
	}
	st.after(pollBusy)
	return false, nil
}
