package nodegroup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// delete drains the group's nodes (for at most deleteDrainTimeout), then deletes its
// Auto Scaling group and launch template and lets the NodeGroup go.
func (r *Reconciler) delete(ctx context.Context, st *state) (bool, error) {
	ng := st.ng
	if !slices.Contains(ng.Finalizers, v1alpha1.NodeGroupFinalizer) {
		return true, nil
	}
	if ng.Status.Phase != v1alpha1.PhaseDeleting {
		ng.Status.Phase = v1alpha1.PhaseDeleting
		r.event(ng, corev1.EventTypeNormal, "Deleting", "Delete", "draining the group's nodes, then deleting Auto Scaling group %s", st.asgName)
	}
	g, err := r.cloud.describeGroup(ctx, st.asgName)
	if err != nil {
		return false, err
	}
	if g != nil {
		st.group = g
		if err := r.observe(ctx, st); err != nil {
			return false, err
		}
		drained := true
		force := st.now.Sub(ng.DeletionTimestamp.Time) >= st.spec.Spec.Timeouts.DeleteDrainTimeout.Duration
		if !force {
			for _, i := range st.live() {
				n := st.nodes[i.ID]
				if n == nil {
					continue
				}
				if err := r.cordon(ctx, n); err != nil {
					return false, err
				}
				res, err := r.drain(ctx, n.Name, false)
				if err != nil {
					return false, err
				}
				drained = drained && res.done
			}
		}
		if !drained {
			st.after(pollBusy)
			return false, nil
		}
		if err := r.cloud.deleteGroup(ctx, st.asgName); err != nil {
			return false, err
		}
		for _, n := range st.nodes {
			if err := r.deleteNode(ctx, n); err != nil {
				return false, err
			}
		}
		r.members.forget("", st.asgName)
	}
	if err := r.cloud.deleteTemplate(ctx, st.ltName); err != nil {
		return false, err
	}
	r.event(ng, corev1.EventTypeNormal, "Deleted", "Delete", "Auto Scaling group %s and launch template %s deleted", st.asgName, st.ltName)
	r.metrics.forget(ng.Name)
	patch := ng.DeepCopy()
	patch.Finalizers = slices.DeleteFunc(patch.Finalizers, func(f string) bool { return f == v1alpha1.NodeGroupFinalizer })
	if err := r.Client.Update(ctx, patch); err != nil {
		return false, fmt.Errorf("removing the finalizer of NodeGroup %s: %w", ng.Name, err)
	}
	return true, nil
}
