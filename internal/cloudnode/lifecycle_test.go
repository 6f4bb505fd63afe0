package cloudnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A Node goes only when it is not Ready and its own instance is terminated or no
// longer known; anything else keeps it.
func TestLifecycleDeletesOnlyTheNodesOfGoneInstances(t *testing.T) {
	notReady := func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	}
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		inv     staticInventory
		deleted bool
	}{
		{"terminated", node(notReady), staticInventory{name: {ID: "i-0aaa", State: "terminated"}}, true},
		{"forgotten by EC2", node(notReady), staticInventory{}, true},
		{"running", node(notReady), staticInventory{name: {ID: "i-0aaa", State: "running"}}, false},
		{"stopped", node(notReady), staticInventory{name: {ID: "i-0aaa", State: "stopped"}}, false},
		{"ready", node(func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}), staticInventory{name: {ID: "i-0aaa", State: "terminated"}}, false},
		{"the name is another instance's", node(notReady), staticInventory{name: {ID: "i-0bbb", State: "terminated"}}, false},
		{"no providerID, unknown", node(func(n *corev1.Node) { notReady(n); n.Spec.ProviderID = "" }), staticInventory{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.node)
			l := &Lifecycle{Client: cs, Inventory: tc.inv, reader: ctrlfake.NewClientBuilder().WithObjects(tc.node).Build()}
			res, err := l.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != tc.deleted {
				t.Errorf("deleted = %v, want %v (err %v)", gone, tc.deleted, err)
			}
			if !tc.deleted && !ready(tc.node) && res.RequeueAfter == 0 {
				t.Error("a Node that is not Ready is not looked at again")
			}
		})
	}
}
