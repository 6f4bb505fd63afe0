package cloudnode

// This file holds the node lifecycle half of a cloud controller manager: a Node whose
// instance is gone (terminated, or no longer known to EC2 while the Node's providerID
// names an instance) is deleted, so that terminating an instance — scaling in a
// self-managed Auto Scaling group, deleting its CloudFormation stack — leaves no
// NotReady Node behind. Deny-by-default: a Node is deleted only when it is not Ready
// and the inventory says its instance is terminated; an inventory error deletes
// nothing.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// Lifecycle deletes the Nodes of terminated instances.
type Lifecycle struct {
	Client    kubernetes.Interface
	Inventory Inventory
	Log       *slog.Logger
	Recorder  events.EventRecorder
	// Recheck is how often a Node that is not Ready is looked at again (its instance
	// may terminate later, and a dead kubelet changes nothing on its Node). Default 15
	// seconds.
	Recheck time.Duration

	reader client.Reader
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetupWithManager registers the controller with mgr; it watches the Nodes that are
// not Ready.
func (l *Lifecycle) SetupWithManager(mgr ctrl.Manager) error {
	l.reader = mgr.GetClient()
	notReady := predicate.NewPredicateFuncs(func(o client.Object) bool {
		n, ok := o.(*corev1.Node)
		return ok && !ready(n)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodelifecycle").
		For(&corev1.Node{}, builder.WithPredicates(notReady)).
		Complete(l)
}

// Gone reports why a Node's instance is gone ("" when it is not, or not known to be).
func (l *Lifecycle) Gone(ctx context.Context, node *corev1.Node) (string, error) {
	inst, err := l.Inventory.InstanceForNode(ctx, node.Name)
	id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		if strings.HasPrefix(node.Spec.ProviderID, "aws://") && strings.HasPrefix(id, "i-") {
			return "instance " + id + " no longer exists", nil
		}
		return "", nil
	case err != nil:
		return "", err
	case inst.State != "terminated":
		return "", nil
	case node.Spec.ProviderID != "" && id != inst.ID:
		// The name now belongs to another instance than the Node's: not this Node's.
		return "", nil
	}
	return "instance " + inst.ID + " was terminated", nil
}

// Reconcile deletes the Node a request names when its instance is gone.
func (l *Lifecycle) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	recheck := l.Recheck
	if recheck == 0 {
		recheck = 15 * time.Second
	}
	var node corev1.Node
	if err := l.reader.Get(ctx, req.NamespacedName, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ready(&node) || !node.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	reason, err := l.Gone(ctx, &node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if reason == "" {
		return reconcile.Result{RequeueAfter: recheck}, nil
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The precondition keeps a Node of the same name registered meanwhile.
	uid := node.UID
	err = l.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return reconcile.Result{}, err
	}
	log.Info("deleted the node of a gone instance", "node", node.Name, "reason", reason)
	if l.Recorder != nil {
		l.Recorder.Eventf(&node, nil, corev1.EventTypeNormal, "DeletingNode", "Delete", "Deleting node %s because %s", node.Name, reason)
	}
	return reconcile.Result{}, nil
}
