package nodegroup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// cordon marks a node unschedulable and excluded from external load balancers, as EKS
// does to the nodes an update replaces.
func (r *Reconciler) cordon(ctx context.Context, n *corev1.Node) error {
	if n == nil || n.Spec.Unschedulable && n.Labels[v1alpha1.LabelExcludeFromLBs] == "true" {
		return nil
	}
	patch := client.MergeFrom(n.DeepCopy())
	c := n.DeepCopy()
	c.Spec.Unschedulable = true
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[v1alpha1.LabelExcludeFromLBs] = "true"
	if err := r.Client.Patch(ctx, c, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cordoning node %s: %w", n.Name, err)
	}
	n.Spec.Unschedulable, n.Labels = true, c.Labels
	return nil
}

// drainResult is one pass of a drain.
type drainResult struct {
	// done: nothing but DaemonSet, mirror and finished pods is left on the node.
	done             bool
	evicted, deleted int
	// blocking names the pods whose eviction was refused, with the budgets refusing.
	blocking []string
}

// drain makes one pass over the pods of a node: each pod that must go is evicted
// through the Eviction API, which honours PodDisruptionBudgets (a refusal, 429, is
// retried on the next pass); with force the pods are deleted instead.
func (r *Reconciler) drain(ctx context.Context, node string, force bool) (drainResult, error) {
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return drainResult{}, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	var res drainResult
	pending := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || !mustGo(p) {
			continue
		}
		pending++
		if p.DeletionTimestamp != nil {
			continue // already going
		}
		if force {
			if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			res.deleted++
			r.metrics.Evictions.WithLabelValues("deleted").Inc()
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := r.Client.SubResource("eviction").Create(ctx, p, ev)
		switch {
		case err == nil:
			res.evicted++
			r.metrics.Evictions.WithLabelValues("evicted").Inc()
		case apierrors.IsNotFound(err):
			pending--
		case apierrors.IsTooManyRequests(err):
			// A PodDisruptionBudget refuses it now.
			r.metrics.Evictions.WithLabelValues("blocked").Inc()
			res.blocking = append(res.blocking, r.blocker(ctx, p))
		default:
			r.metrics.Evictions.WithLabelValues("error").Inc()
			return res, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	res.done = pending == 0
	slices.Sort(res.blocking)
	return res, nil
}

// mustGo reports whether a drain has to remove the pod: not a mirror pod, not a
// DaemonSet's pod (its controller would put it back), not finished.
func mustGo(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if c := metav1.GetControllerOf(p); c != nil && c.Kind == "DaemonSet" {
		return false
	}
	return true
}

// blocker names a pod and the PodDisruptionBudgets that select it.
func (r *Reconciler) blocker(ctx context.Context, p *corev1.Pod) string {
	name := "pod " + p.Namespace + "/" + p.Name
	var pdbs policyv1.PodDisruptionBudgetList
	if err := r.Reader.List(ctx, &pdbs, client.InNamespace(p.Namespace)); err != nil {
		return name
	}
	var names []string
	for _, b := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		names = append(names, fmt.Sprintf("PodDisruptionBudget %s/%s (%d disruptions allowed)", b.Namespace, b.Name, b.Status.DisruptionsAllowed))
	}
	slices.Sort(names)
	for i, n := range names {
		if i == 0 {
			name += " blocked by "
		} else {
			name += ", "
		}
		name += n
	}
	return name
}
