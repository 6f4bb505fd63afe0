package nodegroup

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// foreignLabel marks the Nodes a test adds outside the harness's group, which the
// simulated kubelets leave alone.
const foreignLabel = "test.nodejoin.io/foreign"

// addForeignNode registers a Node outside the group (providerID "" for a control-plane
// Node without one) with one pod on it.
func (h *harness) addForeignNode(name, providerID string) {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{foreignLabel: "true"}}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-pod"},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	if err := h.client.Create(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	if err := h.client.Create(ctx, p); err != nil {
		h.t.Fatal(err)
	}
}

// untouched fails unless the foreign Node is still there, schedulable, with its pod.
func (h *harness) untouched(name string) {
	h.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := h.client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		h.t.Fatalf("node %s: %v (events %q)", name, err, h.rec.events)
	}
	if n.Spec.Unschedulable || n.Labels[v1alpha1.LabelExcludeFromLBs] != "" {
		h.t.Errorf("node %s was cordoned", name)
	}
	p := &corev1.Pod{}
	if err := h.client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name + "-pod"}, p); err != nil || p.DeletionTimestamp != nil {
		h.t.Errorf("the pod of node %s was evicted or deleted: %v", name, err)
	}
}

// writeStatus stands for a user allowed to patch the NodeGroup's status subresource.
func (h *harness) writeStatus(f func(*v1alpha1.NodeGroup)) {
	ng := h.get()
	f(ng)
	if err := h.client.Status().Update(context.Background(), ng); err != nil {
		h.t.Fatal(err)
	}
}

// A NodeGroup status edited to name a foreign Node (another group's, or a control-plane
// Node) never makes the controller cordon, drain or delete it: the Nodes it acts on are
// those whose providerID names an instance its own Auto Scaling group lists. Each
// ignored name is said in a ForeignNodeIgnored event naming the node and why.
func TestStatusNamingAForeignNodeIsIgnored(t *testing.T) {
	const other = "i-0bbbbbbbbbbbbbbbb" // another group's instance
	for _, tc := range []struct {
		name string
		// entry is the scale-in entry written into the status, given the group's first
		// instance.
		entry func(own string) v1alpha1.UpdateNode
		want  string // in the event
	}{
		{
			name: "an instance outside the group, naming the control plane",
			entry: func(string) v1alpha1.UpdateNode {
				return v1alpha1.UpdateNode{InstanceID: "i-0ccccccccccccccccc", NodeName: "control-plane", Step: v1alpha1.NodeStepDraining}
			},
			want: "the status names node control-plane for instance i-0ccccccccccccccccc, but Auto Scaling group eks-ng1-3f6c2b1e-0000-4000-8000-000000000001 does not list that instance and this controller never saw it there",
		},
		{
			name: "another group's instance and its node",
			entry: func(string) v1alpha1.UpdateNode {
				return v1alpha1.UpdateNode{InstanceID: other, NodeName: "ip-other", Step: v1alpha1.NodeStepDraining}
			},
			want: "the status names node ip-other for instance " + other + ", but Auto Scaling group",
		},
		{
			name: "the group's own instance, naming another group's node",
			entry: func(own string) v1alpha1.UpdateNode {
				return v1alpha1.UpdateNode{InstanceID: own, NodeName: "ip-other", Step: v1alpha1.NodeStepCordoned}
			},
			want: "the status names node ip-other for instance %s, but the Node whose providerID names that instance is %s (node ip-other has providerID aws:///us-west-2a/" + other + ")",
		},
		{
			name: "the group's own instance, naming the control plane",
			entry: func(own string) v1alpha1.UpdateNode {
				return v1alpha1.UpdateNode{InstanceID: own, NodeName: "control-plane", Step: v1alpha1.NodeStepDraining, DrainStart: ptr.To(metav1.Now())}
			},
			want: "the status names node control-plane for instance %s, but the Node whose providerID names that instance is %s: node control-plane is neither cordoned, drained nor deleted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseGroup(2))
			h.until("active", 40, active)
			h.addForeignNode("control-plane", "")
			h.addForeignNode("ip-other", "aws:///us-west-2a/"+other)
			own := h.get().Status.Instances[0].InstanceID
			h.writeStatus(func(ng *v1alpha1.NodeGroup) { ng.Status.ScaleIn = []v1alpha1.UpdateNode{tc.entry(own)} })
			h.until("the entry is done", 60, func(ng *v1alpha1.NodeGroup) bool { return len(ng.Status.ScaleIn) == 0 && active(ng) })
			h.untouched("control-plane")
			h.untouched("ip-other")
			want := tc.want
			if strings.Contains(want, "%s") {
				want = strings.Replace(strings.Replace(want, "%s", own, 1), "%s", nodeName(own), 1)
			}
			found := false
			for _, e := range h.rec.events {
				found = found || strings.HasPrefix(e, "Warning "+ReasonForeignNodeIgnored+": ") && strings.Contains(e, want)
			}
			if !found {
				t.Errorf("no %s event %q in %q", ReasonForeignNodeIgnored, want, h.rec.events)
			}
		})
	}
}

// The Node of an instance the group terminated is deleted by the controller (its
// providerID names an instance it saw in the group), the Node of one it never saw is
// not.
func TestGoneInstanceNodeDeletion(t *testing.T) {
	h := newHarness(t, baseGroup(1))
	h.until("active", 40, active)
	ctx := context.Background()
	own := h.get().Status.Instances[0]
	h.tick() // the controller has listed the instance
	node := &corev1.Node{}
	if err := h.client.Get(ctx, types.NamespacedName{Name: own.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	st := &state{ng: h.get(), asgName: h.get().Status.AutoScalingGroupName, byInstance: map[string]*corev1.Node{own.InstanceID: node},
		byName: map[string]*corev1.Node{node.Name: node}}
	if st.asgName == "" {
		st.asgName, _ = ResourceNames(st.ng)
	}
	// Never seen: the Node stays.
	stranger := v1alpha1.UpdateNode{InstanceID: own.InstanceID, NodeName: own.NodeName}
	h.r.members.forget(own.InstanceID, "")
	if err := h.r.deleteGoneNode(ctx, st, &stranger); err != nil || stranger.NodeName != "" {
		t.Fatalf("deleteGoneNode of an instance never seen: %v, %q", err, stranger.NodeName)
	}
	if err := h.client.Get(ctx, types.NamespacedName{Name: own.NodeName}, &corev1.Node{}); err != nil {
		t.Fatalf("the Node of an instance never seen in the group was deleted: %v", err)
	}
	// Seen: deleted.
	h.r.members.record(st.asgName, []groupInstance{{ID: own.InstanceID, LifecycleState: "InService"}}, func(string) bool { return false })
	seen := v1alpha1.UpdateNode{InstanceID: own.InstanceID, NodeName: "control-plane"}
	if err := h.r.deleteGoneNode(ctx, st, &seen); err != nil || seen.NodeName != own.NodeName {
		t.Fatalf("deleteGoneNode: %v, %q", err, seen.NodeName)
	}
	if err := h.client.Get(ctx, types.NamespacedName{Name: own.NodeName}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Node of a gone instance the group held: %v, want deleted", err)
	}
}
