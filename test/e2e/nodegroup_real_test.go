package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// groupPods returns the Ready pods of the workload selected by selector, not being
// deleted, by node.
func groupPods(ctx context.Context, client kubernetes.Interface, selector string) (map[string][]string, error) {
	list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	byNode := map[string][]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ready(&p) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
		}
	}
	return byNode, nil
}

// A node group of real kubelets (AmazonLinux2023 user data through nodeadm init, as
// `up --nodegroup-kubelet real` runs the Auto Scaling instances): two nodes join under
// their instances' private DNS names with the group's labels, run a workload, and a
// scale-in to one drains the node it removes, whose pods end Ready on the other, before
// the instance is terminated and its Node deleted; deleting the group removes the rest.
func TestNodeGroupRealKubelets(t *testing.T) {
	name := "e2e-ngreal"
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "0", "--nodegroup-kubelet", "real")
	client, _ := adminClient(t, kubeconfig)
	ctx := t.Context()
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			t.Fatalf("%s: %v\nnodes:\n%s\npods:\n%s\nevents:\n%s", what, err, c.kubectl(kubeconfig, "get", "nodes", "-o", "wide", "--show-labels"),
				c.kubectl(kubeconfig, "get", "pods", "-A", "-o", "wide"), c.kubectl(kubeconfig, "get", "events", "-A", "--sort-by=.lastTimestamp"))
		}
	}

	file := writeTemp(t, "workers.yaml", nodeGroupManifest("workers", 1, 2, 2, map[string]string{"tier": "real-kubelets"}))
	out := c.run("create", "nodegroup", "-f", file, "--cluster", name)
	if want := "✓ workers: ACTIVE, 2/2 Ready"; !strings.Contains(out, want) {
		t.Errorf("create output lacks %q:\n%s", want, out)
	}
	nodes := c.assertGroupSize(client, name, "workers", 2, nil)
	ng := c.getNodeGroup(name, "workers")

	// Each node is its instance's: named by the instance's private DNS name in EC2,
	// with its provider ID, the group's labels from the user data, and a real kubelet
	// behind it (containerd, and the API server reaches its serving endpoint).
	var ids []string
	nodeOf := map[string]string{} // instance ID -> node name, from the group's status
	for _, in := range ng.Status.Instances {
		ids = append(ids, in.InstanceID)
		nodeOf[in.InstanceID] = in.NodeName
	}
	desc, err := c.clusterEC2(name).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatalf("DescribeInstances %v: %v", ids, err)
	}
	described := 0
	for _, r := range desc.Reservations {
		for _, in := range r.Instances {
			described++
			id, dns := ptr.Deref(in.InstanceId, ""), ptr.Deref(in.PrivateDnsName, "")
			if dns == "" || nodeOf[id] != dns {
				t.Errorf("instance %s: private DNS name %q, node %q", id, dns, nodeOf[id])
			}
		}
	}
	if described != len(ids) {
		t.Errorf("DescribeInstances %v returned %d instances", ids, described)
	}
	for id, n := range nodeOf {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(node.Spec.ProviderID, "/"+id) {
			t.Errorf("node %s: provider ID %q, want instance %s", n, node.Spec.ProviderID, id)
		}
		for k, v := range map[string]string{"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "ON_DEMAND", "tier": "real-kubelets"} {
			if node.Labels[k] != v {
				t.Errorf("node %s: label %s=%q, want %q", n, k, node.Labels[k], v)
			}
		}
		if rt := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") || strings.HasSuffix(rt, "-sim") {
			t.Errorf("node %s: container runtime %q, want a real containerd", n, rt)
		}
		if got := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/nodes/"+n+"/proxy/healthz"); got != "ok" {
			t.Errorf("node %s: kubelet healthz through the API server = %q", n, got)
		}
	}

	// A workload on the group's nodes, spread over both when the scheduler can.
	labels := map[string]string{"app": "ngreal"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "ngreal", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"eks.amazonaws.com/nodegroup": "workers"},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname},
					}}}},
					Containers: []corev1.Container{{
						Name: "netexec", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:           []string{"netexec", "--http-port=8080"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before map[string][]string
	poll("two Ready workload pods on the group's nodes", 5*time.Minute, func(ctx context.Context) (bool, error) {
		byNode, err := groupPods(ctx, client, "app=ngreal")
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		before = byNode
		n := 0
		for node, pods := range byNode {
			if !slices.Contains(nodes, node) {
				return false, fmt.Errorf("pods %v run on %s, not a node of the group %v", pods, node, nodes)
			}
			n += len(pods)
		}
		return n == 2, nil
	})
	t.Logf("workload pods before the scale-in: %v", before)

	// Scale in: the controller picks a node, cordons and drains it, then terminates its
	// instance with decrement and deletes its Node.
	out = c.run("scale", "nodegroup", "--name", "workers", "--nodes", "1", "--cluster", name)
	if want := "Node group workers scaled to 1 Ready node"; !strings.Contains(out, want) {
		t.Errorf("scale output lacks %q:\n%s", want, out)
	}
	after := c.getNodeGroup(name, "workers")
	if len(after.Status.Instances) != 1 {
		t.Fatalf("after the scale-in: instances %+v", after.Status.Instances)
	}
	kept := after.Status.Instances[0].NodeName
	removed := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == kept })
	if len(removed) != 1 || !slices.Contains(nodes, kept) {
		t.Fatalf("nodes before %v, after %s", nodes, kept)
	}
	c.assertGroupSize(client, name, "workers", 1, removed)
	poll("the removed node's Node object deleted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, removed[0], metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	poll("the workload's two pods Ready on the remaining node", 5*time.Minute, func(ctx context.Context) (bool, error) {
		byNode, err := groupPods(ctx, client, "app=ngreal")
		return err == nil && len(byNode) == 1 && len(byNode[kept]) == 2, nil
	})
	now, _ := groupPods(ctx, client, "app=ngreal")
	for _, p := range before[removed[0]] {
		if slices.Contains(now[kept], p) {
			t.Errorf("pod %s of the removed node %s is still counted on %s", p, removed[0], kept)
		}
	}
	// The node was drained before its instance went: the controller said so.
	poll("a NodeDrained event for the removed node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Reason == "NodeDrained" && e.Regarding.Kind == "NodeGroup" && e.Regarding.Name == "workers" && strings.Contains(e.Note, removed[0])
		}), nil
	})

	out = c.run("delete", "nodegroup", "--name", "workers", "--cluster", name)
	if !strings.Contains(out, "Node group workers deleted in") {
		t.Errorf("delete output:\n%s", out)
	}
	poll("the group's nodes deleted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "eks.amazonaws.com/nodegroup=workers"})
		return err == nil && len(list.Items) == 0, nil
	})
	var l struct{ Items []v1alpha1.NodeGroup }
	c.runJSON(false, &l, "get", "nodegroup", "--cluster", name, "-o", "json")
	if len(l.Items) != 0 {
		t.Errorf("after delete, node groups: %+v", l.Items)
	}
	// get nodes follows the local EC2: the group's terminated instances leave it, and
	// --terminated shows them as terminated.
	type listed struct{ InstanceID, State, InstanceState string }
	var shown, all []listed
	poll("the group's instances gone from get nodes", time.Minute, func(context.Context) (bool, error) {
		c.runJSON(false, &shown, "get", "nodes", "--name", name, "-o", "json")
		return !slices.ContainsFunc(shown, func(n listed) bool { return slices.Contains(ids, n.InstanceID) }), nil
	})
	c.runJSON(false, &all, "get", "nodes", "--name", name, "--terminated", "-o", "json")
	for _, id := range ids {
		if i := slices.IndexFunc(all, func(n listed) bool { return n.InstanceID == id }); i < 0 || all[i].State != "terminated" || all[i].InstanceState != "terminated" {
			t.Errorf("get nodes --terminated: instance %s of the deleted group missing or not terminated: %+v", id, all)
		}
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
