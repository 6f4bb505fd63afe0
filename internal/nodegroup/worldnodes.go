package nodegroup

// This file decides which Node the controller may cordon, drain or delete. A
// NodeGroup's status is written by the controller, but anyone allowed to patch the
// status subresource can write it too, so a node name or instance ID read from it is a
// record, never an authority: the Node acted on is the Node whose spec.providerID names
// an instance that the group's own Auto Scaling group lists (read this pass), or, once
// that instance has left the group, one this controller saw in it.

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// ReasonForeignNodeIgnored is the event reason when the status names a Node that is not
// the Node of the group's instance: that Node is neither drained nor deleted.
const ReasonForeignNodeIgnored = "ForeignNodeIgnored"

// members remembers which instances this controller saw in which Auto Scaling group
// (instance ID -> group name), from the group's own listing, so that the Node of an
// instance that has since left the group can still be recognised as the group's. It
// lives in memory only: after a restart such Nodes are left to the node lifecycle
// controller (internal/cloudnode), which deletes the Nodes of terminated instances.
type members struct {
	mu   sync.Mutex
	seen map[string]string
}

// record notes the group's listed instances, and forgets instances of the group that
// it no longer lists and that keep names no longer need (not in keep).
func (m *members) record(asg string, listed []groupInstance, keep func(id string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]string{}
	}
	for id, g := range m.seen {
		if g == asg && !keep(id) && !slices.ContainsFunc(listed, func(i groupInstance) bool { return i.ID == id }) {
			delete(m.seen, id)
		}
	}
	for _, i := range listed {
		m.seen[i.ID] = asg
	}
}

// in reports whether id was seen in group asg.
func (m *members) in(id, asg string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[id] == asg
}

// forget drops id, or every instance of asg when id is "".
func (m *members) forget(id, asg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range m.seen {
		if i == id || id == "" && g == asg {
			delete(m.seen, i)
		}
	}
}

// inFlight reports whether the status's update or scale-in lists instance id.
func inFlight(ng *v1alpha1.NodeGroup, id string) bool {
	has := func(ns []v1alpha1.UpdateNode) bool {
		return slices.ContainsFunc(ns, func(n v1alpha1.UpdateNode) bool { return n.InstanceID == id })
	}
	return has(ng.Status.ScaleIn) || ng.Status.Update != nil && has(ng.Status.Update.Nodes)
}

// groupNode returns the Node of n's instance, which the caller has found live in the
// group this pass: the Node whose providerID names it (nil when none registered). A
// different node name in the status is overwritten, and when a Node of that name
// exists, it is left alone and an event says so.
func (r *Reconciler) groupNode(st *state, n *v1alpha1.UpdateNode) *corev1.Node {
	node := st.nodes[n.InstanceID]
	r.checkRecord(st, "Drain", n, node)
	n.NodeName = nameOf(node)
	return node
}

// checkRecord reports a status entry naming an existing Node other than node, the Node
// of its instance; action is what the name was read for.
func (r *Reconciler) checkRecord(st *state, action string, n *v1alpha1.UpdateNode, node *corev1.Node) {
	if n.NodeName == "" || n.NodeName == nameOf(node) || st.byName[n.NodeName] == nil {
		return // no record, the right one, or a Node gone since: nothing to leave alone
	}
	why := "no Node's providerID names that instance"
	if node != nil {
		why = "the Node whose providerID names that instance is " + node.Name
	}
	if other := st.byName[n.NodeName].Spec.ProviderID; other != "" {
		why += " (node " + n.NodeName + " has providerID " + other + ")"
	}
	r.foreignNode(st, action, n.NodeName, n.InstanceID, why)
}

// deleteGoneNode deletes the Node of n's instance, which the group no longer lists (or
// lists as terminated): the Node whose providerID names it, provided this controller
// saw the instance in the group. Otherwise nothing is deleted and an event says why.
// n.NodeName is set to the Node deleted, "" for none.
func (r *Reconciler) deleteGoneNode(ctx context.Context, st *state, n *v1alpha1.UpdateNode) error {
	node := st.byInstance[n.InstanceID]
	if !r.members.in(n.InstanceID, st.asgName) {
		name := n.NodeName
		if st.byName[name] == nil {
			name = nameOf(node)
		}
		if name != "" {
			r.foreignNode(st, "DeleteNode", name, n.InstanceID, fmt.Sprintf("Auto Scaling group %s does not list that instance and this controller never saw it there (the node lifecycle controller deletes the Nodes of terminated instances)", st.asgName))
		}
		n.NodeName = ""
		return nil
	}
	r.checkRecord(st, "DeleteNode", n, node)
	n.NodeName = nameOf(node)
	if err := r.deleteNode(ctx, node); err != nil {
		return err
	}
	r.members.forget(n.InstanceID, "")
	return nil
}

// deleteNode deletes a Node read from the world this pass, as a cloud controller
// manager's node lifecycle controller does for a terminated instance; the UID
// precondition leaves alone a Node registered under the same name since.
func (r *Reconciler) deleteNode(ctx context.Context, node *corev1.Node) error {
	if node == nil {
		return nil
	}
	err := r.Client.Delete(ctx, &corev1.Node{ObjectMeta: node.ObjectMeta}, client.Preconditions{UID: &node.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting node %s: %w", node.Name, err)
	}
	return nil
}

// foreignNode says that the status named node for instance id, and why that Node is
// left alone: a log line, and a Warning event about the group whose related object is
// that Node. The events library counts events of the same object, reason, action and
// related object within minutes as one series keeping the first note, so each foreign
// Node and each action (Drain, DeleteNode) gets an event of its own.
func (r *Reconciler) foreignNode(st *state, action, node, id, why string) {
	msg := fmt.Sprintf("the status names node %s for instance %s, but %s: node %s is neither cordoned, drained nor deleted", node, id, why, node)
	r.opts.Log.Warn("node group event", "nodegroup", st.ng.Name, "reason", ReasonForeignNodeIgnored, "message", msg)
	if r.Recorder == nil {
		return
	}
	var related runtime.Object
	if n := st.byName[node]; n != nil {
		related = n
	}
	r.Recorder.Eventf(st.ng, related, corev1.EventTypeWarning, ReasonForeignNodeIgnored, action, "%s", msg)
}

func nameOf(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Name
}
