package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// A NodeGroup status edited (by whoever may patch nodegroups/status) to name another
// group's node makes the controller neither cordon, drain nor delete that node: group
// a's status gets a scale-in entry for group b's instance and node, and one for a's own
// instance naming b's node; a is then scaled 2 -> 1. b's Node stays the same object,
// schedulable, and a ForeignNodeIgnored event names it; a scales in through its own node.
func TestNodeGroupStatusNamingAForeignNode(t *testing.T) {
	name := "e2e-ngstatus"
	// upCluster downs the cluster when the test ends (a down bound to the test's context
	// would be cancelled before it ran, and leave the cluster running).
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "0", "--kubelet", "sim", "--nodegroup-kubelet", "sim")
	client, _ := adminClient(t, kubeconfig)

	c.run("create", "nodegroup", "-f", writeTemp(t, "a.yaml", nodeGroupManifest("a", 1, 2, 2, nil)), "--cluster", name)
	c.run("create", "nodegroup", "-f", writeTemp(t, "b.yaml", nodeGroupManifest("b", 1, 1, 1, nil)), "--cluster", name)
	a := c.getNodeGroup(name, "a")
	b := c.getNodeGroup(name, "b")
	if len(a.Status.Instances) != 2 || len(b.Status.Instances) != 1 || b.Status.Instances[0].NodeName == "" {
		t.Fatalf("groups not as created: a %+v, b %+v", a.Status.Instances, b.Status.Instances)
	}
	victim := b.Status.Instances[0]
	before, err := client.CoreV1().Nodes().Get(t.Context(), victim.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	now := metav1.Now()
	entries := []v1alpha1.UpdateNode{
		{InstanceID: victim.InstanceID, NodeName: victim.NodeName, Step: v1alpha1.NodeStepDraining, Since: now, DrainStart: &now},
		{InstanceID: a.Status.Instances[0].InstanceID, NodeName: victim.NodeName, Step: v1alpha1.NodeStepCordoned, Since: now},
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"scaleIn": entries}})
	c.kubectl(kubeconfig, "patch", "nodegroup", "a", "--subresource=status", "--type=merge", "-p", string(patch))
	c.run("scale", "nodegroup", "--name", "a", "--nodes", "1", "--cluster", name)
	c.assertGroupSize(client, name, "a", 1, nil)
	c.assertGroupSize(client, name, "b", 1, nil)

	after, err := client.CoreV1().Nodes().Get(t.Context(), victim.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("group b's node %s after a's scale-in: %v", victim.NodeName, err)
	}
	if after.UID != before.UID || after.Spec.Unschedulable || after.Labels[v1alpha1.LabelExcludeFromLBs] != "" {
		t.Errorf("group b's node %s after a's scale-in: UID %s (was %s), unschedulable %v, labels %v", victim.NodeName, after.UID, before.UID, after.Spec.Unschedulable, after.Labels)
	}
	var msgs []string
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		msgs = nil
		for _, e := range evs.Items {
			if e.Reason == "ForeignNodeIgnored" && e.Regarding.Name == "a" {
				msgs = append(msgs, e.Note)
			}
		}
		return slices.ContainsFunc(msgs, func(m string) bool {
			return strings.Contains(m, "node "+victim.NodeName+" for instance "+victim.InstanceID)
		}) &&
			slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "the Node whose providerID names that instance is") }), nil
	})
	if err != nil {
		t.Errorf("no ForeignNodeIgnored events naming %s for both entries: %q", victim.NodeName, msgs)
	}
}
