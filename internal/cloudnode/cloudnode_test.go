package cloudnode

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

type staticInventory map[string]*inventory.Instance

func (i staticInventory) InstanceForNode(_ context.Context, node string) (*inventory.Instance, error) {
	if inst, ok := i[node]; ok {
		return inst, nil
	}
	return nil, inventory.ErrNotFound
}

const name = "ip-198-18-0-11.local.internal"

func node(mutate func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0aaa", Taints: []corev1.Taint{
			{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "198.18.0.11"},
			{Type: corev1.NodeHostName, Address: name},
		}},
	}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func TestNodeIsInitializedOnlyWhenItMatchesItsInstance(t *testing.T) {
	inv := staticInventory{name: {ID: "i-0aaa", State: "running", DNSNames: []string{name}, IPs: []netip.Addr{netip.MustParseAddr("198.18.0.11")}}}
	for _, tc := range []struct {
		desc   string
		node   *corev1.Node
		inv    staticInventory
		reason string // "" when the taint goes
	}{
		{"matches", node(nil), inv, ""},
		{"no instance", node(nil), staticInventory{}, "no instance is known for node " + name},
		{"stopped", node(nil), staticInventory{name: {ID: "i-0aaa", State: "stopped"}}, "instance i-0aaa is stopped, not running"},
		{"no providerID", node(func(n *corev1.Node) { n.Spec.ProviderID = "" }), inv, "the Node has no providerID"},
		{"another instance", node(func(n *corev1.Node) { n.Spec.ProviderID = "aws:///us-west-2a/i-0bbb" }), inv,
			"providerID aws:///us-west-2a/i-0bbb names instance i-0bbb, but node " + name + " is instance i-0aaa"},
		{"foreign address", node(func(n *corev1.Node) { n.Status.Addresses[0].Address = "198.18.0.12" }), inv,
			"address 198.18.0.12 (InternalIP) that the kubelet reports is not an address of instance i-0aaa"},
		{"foreign name", node(func(n *corev1.Node) { n.Status.Addresses[1].Address = "evil.example" }), inv,
			"name evil.example (Hostname) that the kubelet reports is not a name of instance i-0aaa"},
		{"no address yet", node(func(n *corev1.Node) { n.Status.Addresses = nil }), inv, "the kubelet has reported no InternalIP yet"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			client := fake.NewClientset(tc.node)
			var initialized []string
			rec := events.NewFakeRecorder(10)
			c := &Controller{Client: client, Inventory: tc.inv, Recorder: rec, OnInitialized: func(n string) { initialized = append(initialized, n) }}
			reason, err := c.Initialize(t.Context(), tc.node.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if reason != tc.reason {
				t.Errorf("reason %q, want %q", reason, tc.reason)
			}
			got, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, tt := range got.Spec.Taints {
				keys = append(keys, tt.Key)
			}
			tainted := slices.Contains(keys, TaintUninitialized)
			if tainted != (tc.reason != "") {
				t.Errorf("taints after: %v", keys)
			}
			if !slices.Contains(keys, "node.kubernetes.io/not-ready") {
				t.Errorf("another taint was removed: %v", keys)
			}
			if (len(initialized) == 1) != (tc.reason == "") {
				t.Errorf("OnInitialized calls: %v", initialized)
			}
			close(rec.Events)
			var evs []string
			for e := range rec.Events {
				evs = append(evs, e)
			}
			if tc.reason == "" && (len(evs) != 1 || !strings.Contains(evs[0], "NodeInitialized") || !strings.Contains(evs[0], "i-0aaa")) {
				t.Errorf("events: %q", evs)
			}
		})
	}
}
