// Package cloudnode initializes Nodes the way a cloud controller manager does for nodes
// whose kubelet runs with --cloud-provider=external: such a kubelet registers its Node
// with the node.cloudprovider.kubernetes.io/uninitialized taint, and nothing schedules
// there until a controller has checked the Node against its instance and removed the
// taint.
//
// Checks are deny-by-default: the taint goes only when an instance is known for the
// node's name and running, the Node's providerID names that instance, and every
// address the kubelet reports belongs to it. Otherwise the taint stays, and a Warning
// Event on the Node and a log line give the reason.
package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// TaintUninitialized is the taint a kubelet with an external cloud provider registers with.
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// Controller removes the uninitialized taint from Nodes that match their instance. It
// is a controller-runtime reconciler; SetupWithManager watches the uninitialized Nodes.
type Controller struct {
	Client    kubernetes.Interface
	Inventory Inventory
	Log       *slog.Logger
	// Recheck is how soon a node that failed the checks is looked at again (its
	// instance may still be pending). Default 30 seconds.
	Recheck time.Duration
	// OnInitialized, when set, is called after a node's taint was removed.
	OnInitialized func(node string)
	// Recorder, when set, records Events about initialized and refused Nodes.
	Recorder events.EventRecorder

	// reader reads Nodes from the manager's cache.
	reader client.Reader
	// reported holds the reason last reported per node: a refusal is reported once
	// per reason, not at every status update.
	mu       sync.Mutex
	reported map[string]string
}

func (c *Controller) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func uninitialized(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUninitialized })
}

// SetupWithManager registers the controller with mgr, checking up to workers Nodes at
// once (at least one).
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	c.reader = mgr.GetClient()
	tainted := predicate.NewPredicateFuncs(func(o client.Object) bool {
		n, ok := o.(*corev1.Node)
		return ok && uninitialized(n)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeinit").
		For(&corev1.Node{}, builder.WithPredicates(tainted)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(c)
}

// report reports whether reason is new for the node, and remembers it ("" forgets).
func (c *Controller) report(node, reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason == "" {
		delete(c.reported, node)
		return false
	}
	if c.reported == nil {
		c.reported = map[string]string{}
	}
	if c.reported[node] == reason {
		return false
	}
	c.reported[node] = reason
	return true
}

// Reconcile checks the Node a request names, read from the manager's cache.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	recheck := c.Recheck
	if recheck == 0 {
		recheck = 30 * time.Second
	}
	var node corev1.Node
	err := c.reader.Get(ctx, req.NamespacedName, &node)
	switch {
	case apierrors.IsNotFound(err):
		c.report(req.Name, "")
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	case !uninitialized(&node):
		return reconcile.Result{}, nil
	}
	reason, err := c.Initialize(ctx, &node)
	switch {
	case err != nil && ctx.Err() == nil:
		c.logger().Warn("node not initialized, retrying", "node", node.Name, "err", err)
		return reconcile.Result{}, err
	case reason != "":
		if c.report(node.Name, reason) {
			c.logger().Warn("node left uninitialized", "node", node.Name, "reason", reason)
			c.event(&node, false, "NodeNotInitialized", reason)
		}
		return reconcile.Result{RequeueAfter: recheck}, nil
	default:
		c.report(node.Name, "")
		return reconcile.Result{}, nil
	}
}

// Check returns why node does not match its instance, or "" when it does. An error
// means the inventory could not be asked.
func (c *Controller) Check(ctx context.Context, node *corev1.Node) (string, error) {
	inst, err := c.Inventory.InstanceForNode(ctx, node.Name)
	if err != nil {
		if errors.Is(err, inventory.ErrNotFound) {
			return fmt.Sprintf("no instance is known for node %s", node.Name), nil
		}
		return "", err
	}
	if inst.State != "running" {
		return fmt.Sprintf("instance %s is %s, not running", inst.ID, inst.State), nil
	}
	if node.Spec.ProviderID == "" {
		return "the Node has no providerID", nil
	}
	if id := node.Spec.ProviderID[strings.LastIndexByte(node.Spec.ProviderID, '/')+1:]; id != inst.ID {
		return fmt.Sprintf("providerID %s names instance %s, but node %s is instance %s", node.Spec.ProviderID, id, node.Name, inst.ID), nil
	}
	internal := false
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if !owns(inst.IPs, a.Address) {
				return fmt.Sprintf("address %s (%s) that the kubelet reports is not an address of instance %s", a.Address, a.Type, inst.ID), nil
			}
			internal = internal || a.Type == corev1.NodeInternalIP
		case corev1.NodeInternalDNS, corev1.NodeExternalDNS, corev1.NodeHostName:
			if !slices.Contains(inst.DNSNames, strings.ToLower(a.Address)) {
				return fmt.Sprintf("name %s (%s) that the kubelet reports is not a name of instance %s", a.Address, a.Type, inst.ID), nil
			}
		}
	}
	if !internal {
		return "the kubelet has reported no InternalIP yet", nil
	}
	return "", nil
}

// Initialize checks an uninitialized node and removes its taint when it passes; it
// returns the reason when it does not.
func (c *Controller) Initialize(ctx context.Context, node *corev1.Node) (string, error) {
	reason, err := c.Check(ctx, node)
	if err != nil || reason != "" {
		return reason, err
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUninitialized })
	// Update carries the resourceVersion read: a Node changed meanwhile is read and
	// checked again.
	if _, err := c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("removing the %s taint: %w", TaintUninitialized, err)
	}
	c.logger().Info("node initialized", "node", node.Name, "providerID", node.Spec.ProviderID)
	c.event(node, true, "NodeInitialized", "the Node matches its instance: "+node.Spec.ProviderID)
	if c.OnInitialized != nil {
		c.OnInitialized(node.Name)
	}
	return "", nil
}

// event records a Kubernetes Event on the Node, when a recorder is set; the recorder
// sends it in the background.
func (c *Controller) event(node *corev1.Node, normal bool, reason, msg string) {
	if c.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if !normal {
		typ = corev1.EventTypeWarning
	}
	c.Recorder.Eventf(node, nil, typ, reason, "Initialize", "%s", msg)
}

// owns reports whether addr is one of ips.
func owns(ips []netip.Addr, addr string) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && slices.Contains(ips, ip.Unmap())
}
