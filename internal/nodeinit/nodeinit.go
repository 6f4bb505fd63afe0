// Package nodeinit initializes Nodes the way a cloud controller manager does for nodes
// whose kubelet runs with --cloud-provider=external: such a kubelet registers its Node
// with the node.cloudprovider.kubernetes.io/uninitialized taint, and nothing schedules
// there until a controller has checked the Node against its instance and removed the
// taint.
//
// Checks are deny-by-default: the taint goes only when an instance is known for the
// node's name and running, the Node's providerID names that instance, and every
// address the kubelet reports belongs to it. Otherwise the taint stays, and a Warning
// Event on the Node and a log line give the reason.
package nodeinit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodejoin/nodejoin/internal/events"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// TaintUninitialized is the taint a kubelet with an external cloud provider registers with.
const TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// Controller removes the uninitialized taint from Nodes that match their instance.
type Controller struct {
	Client    kubernetes.Interface
	Inventory Inventory
	Log       *slog.Logger
	// Recheck is how soon a node that failed the checks is looked at again (its
	// instance may still be pending). Default 30 seconds.
	Recheck time.Duration
	// OnInitialized, when set, is called after a node's taint was removed.
	OnInitialized func(node string)
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

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	recheck := c.Recheck
	if recheck == 0 {
		recheck = 30 * time.Second
	}
	factory := informers.NewSharedInformerFactory(c.Client, 10*time.Minute)
	informer := factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && uninitialized(n) {
			queue.Add(n.Name)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return ctx.Err()
	}
	lister := informer.Lister()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	// A refusal is reported once per reason, not at every status update.
	reported := map[string]string{}
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		node, err := lister.Get(name)
		switch {
		case apierrors.IsNotFound(err):
			delete(reported, name)
			queue.Forget(name)
		case err != nil:
			queue.AddRateLimited(name)
		case !uninitialized(node):
			queue.Forget(name)
		default:
			reason, err := c.Reconcile(ctx, node.DeepCopy())
			switch {
			case err != nil && ctx.Err() == nil:
				c.logger().Warn("node not initialized, retrying", "node", name, "err", err)
				queue.AddRateLimited(name)
			case reason != "":
				if reported[name] != reason {
					reported[name] = reason
					c.logger().Warn("node left uninitialized", "node", name, "reason", reason)
					c.event(ctx, node, false, "NodeNotInitialized", reason)
				}
				queue.Forget(name)
				queue.AddAfter(name, recheck)
			default:
				delete(reported, name)
				queue.Forget(name)
			}
		}
		queue.Done(name)
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

// Reconcile checks an uninitialized node and removes its taint when it passes; it
// returns the reason when it does not.
func (c *Controller) Reconcile(ctx context.Context, node *corev1.Node) (string, error) {
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
	c.event(ctx, node, true, "NodeInitialized", "the Node matches its instance: "+node.Spec.ProviderID)
	if c.OnInitialized != nil {
		c.OnInitialized(node.Name)
	}
	return "", nil
}

// event records a Kubernetes Event on the Node; failures to record are only logged.
func (c *Controller) event(ctx context.Context, node *corev1.Node, normal bool, reason, msg string) {
	ref := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
	if err := events.Record(ctx, c.Client, ref, normal, reason, msg); err != nil {
		c.logger().Warn("recording event failed", "node", node.Name, "err", err)
	}
}

// owns reports whether addr is one of ips.
func owns(ips []netip.Addr, addr string) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && slices.Contains(ips, ip.Unmap())
}
