package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// nodeGroupManifest is a NodeGroup with a short post-drain wait, so that a rolling
// update of a few nodes takes minutes, not the EKS default's one per node.
func nodeGroupManifest(name string, minSize, maxSize, desired int, labels map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata:\n  name: %s\nspec:\n", name)
	fmt.Fprintf(&b, "  scaling: {minSize: %d, maxSize: %d, desiredSize: %d}\n", minSize, maxSize, desired)
	b.WriteString("  timeouts: {postDrainWait: 2s, joinTimeout: 10m}\n  template:\n    instanceTypes: [m5.large]\n")
	if len(labels) > 0 {
		b.WriteString("    labels:\n")
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(&b, "      %s: %q\n", k, labels[k])
		}
	}
	return b.String()
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// getNodeGroup reads the group through `nodejoin get nodegroup NAME -o json`.
func (c *cli) getNodeGroup(cluster, name string) v1alpha1.NodeGroup {
	c.t.Helper()
	var l struct{ Items []v1alpha1.NodeGroup }
	c.runJSON(false, &l, "get", "nodegroup", "--name", name, "--cluster", cluster, "-o", "json")
	if len(l.Items) != 1 {
		c.t.Fatalf("get nodegroup %s: %d items", name, len(l.Items))
	}
	return l.Items[0]
}

// readyNodes returns which of names are Nodes whose Ready condition is true.
func readyOf(ctx context.Context, client kubernetes.Interface, names []string) ([]string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes.Items {
		if !slices.Contains(names, n.Name) {
			continue
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				out = append(out, n.Name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// assertGroupSize checks, once the CLI said the group is scaled, that its status and
// the cluster agree: n instances, n Ready, each instance's node Ready in the API, and
// none of the nodes in left (nodes that left the group) Ready any more. It returns the
// group's nodes.
func (c *cli) assertGroupSize(client kubernetes.Interface, cluster, group string, n int, left []string) []string {
	c.t.Helper()
	ng := c.getNodeGroup(cluster, group)
	st := ng.Status
	if st.Phase != v1alpha1.PhaseActive || st.ReadySize != int32(n) || st.DesiredSize != int32(n) || len(st.Instances) != n { //nolint:gosec // G115: n is a test's small node count.
		c.t.Errorf("group %s: phase %s, desired %d, ready %d, %d instances; want ACTIVE and %d", group, st.Phase, st.DesiredSize, st.ReadySize, len(st.Instances), n)
	}
	var names []string
	for _, in := range st.Instances {
		if in.NodeName == "" || !in.Ready {
			c.t.Errorf("group %s: instance %s has node %q, ready %v", group, in.InstanceID, in.NodeName, in.Ready)
		}
		names = append(names, in.NodeName)
	}
	slices.Sort(names)
	if got, err := readyOf(c.t.Context(), client, names); err != nil || !slices.Equal(got, names) {
		c.t.Errorf("group %s: of its nodes %v, Ready in the API: %v (%v)", group, names, got, err)
	}
	// A node that left is deleted, or turns NotReady once its lease expires: the
	// deadline is generous.
	var still []string
	err := wait.PollUntilContextTimeout(c.t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		still, err = readyOf(ctx, client, left)
		return err == nil && len(still) == 0, nil
	})
	if err != nil {
		c.t.Errorf("group %s: nodes that left are still Ready: %v", group, still)
	}
	if issues := st.Health.Issues; len(issues) > 0 {
		c.t.Errorf("group %s has health issues: %+v", group, issues)
	}
	return names
}

// assertNodeLabels checks that every named Node carries the wanted labels.
func assertNodeLabels(t *testing.T, client kubernetes.Interface, names []string, want map[string]string) {
	t.Helper()
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node %s: %v", n, err)
			continue
		}
		for k, v := range want {
			if got, ok := node.Labels[k]; !ok || got != v {
				t.Errorf("node %s: label %s = %q (set: %t), want %q", n, k, got, ok, v)
			}
		}
	}
}

// A node group of simulated kubelets created from a manifest, scaled 2 → 4 → 1: nodes
// join and leave, and the status, the CLI and the cluster agree at each size.
func TestNodeGroupScaleSimulated(t *testing.T) {
	c := newCLI(t)
	name := "e2e-ngscale"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })
	c.run("up", "--name", name, "--nodes", "0", "--kubelet", "sim", "--nodegroup-kubelet", "sim", "--detach")
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	client, _ := adminClient(t, kubeconfig)

	templateLabels := map[string]string{"team": "blue"}
	file := writeTemp(t, "workers.yaml", nodeGroupManifest("workers", 1, 4, 2, templateLabels))
	out := c.run("create", "nodegroup", "-f", file, "--cluster", name)
	for _, want := range []string{"Creating 1 node group in cluster " + name, "✓ created node group workers: 2 nodes (min 1, max 4)", "✓ workers: ACTIVE, 2/2 Ready", "Created 1 node group in"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	nodes := c.assertGroupSize(client, name, "workers", 2, nil)
	// The simulated kubelets register with what the user data's --node-labels says,
	// as EKS's kubelets do: the group's label and the template's.
	wantLabels := map[string]string{"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
	maps.Copy(wantLabels, templateLabels)
	assertNodeLabels(t, client, nodes, wantLabels)
	table := strings.Split(strings.TrimSpace(c.run("get", "nodegroup", "--cluster", name)), "\n")
	if len(table) != 2 || !strings.HasPrefix(table[0], "CLUSTER") || !slices.Equal(strings.Fields(table[1])[:7], []string{name, "workers", "ACTIVE", strings.Fields(table[1])[3], "1", "4", "2"}) {
		t.Errorf("get nodegroup:\n%s", strings.Join(table, "\n"))
	}

	for _, n := range []int{4, 1} {
		out := c.run("scale", "nodegroup", "--name", "workers", "--nodes", fmt.Sprint(n), "--cluster", name)
		if want := fmt.Sprintf("Node group workers scaled to %s", map[int]string{4: "4 Ready nodes", 1: "1 Ready node"}[n]); !strings.Contains(out, want) {
			t.Errorf("scale output lacks %q:\n%s", want, out)
		}
		now := c.assertGroupSize(client, name, "workers", n, nil)
		var left []string
		for _, old := range nodes {
			if !slices.Contains(now, old) {
				left = append(left, old)
			}
		}
		if len(left) != max(0, len(nodes)-n) {
			t.Errorf("scaling %d -> %d: nodes before %v, after %v", len(nodes), n, nodes, now)
		}
		c.assertGroupSize(client, name, "workers", n, left)
		assertNodeLabels(t, client, now, wantLabels)
		nodes = now
	}
	// A size outside the bounds is refused, naming the flag to add.
	if out, err := c.command("scale", "nodegroup", "--name", "workers", "--nodes", "5", "--cluster", name).CombinedOutput(); err == nil || !strings.Contains(string(out), "pass --nodes-max 5 too") {
		t.Errorf("scale to 5: %v\n%s", err, out)
	}

	var d struct {
		Nodegroup struct {
			NodegroupName, Status string
			ScalingConfig         struct{ MinSize, MaxSize, DesiredSize int }
			Resources             struct{ AutoScalingGroups []struct{ Name string } }
			Health                struct{ Issues []any }
		}
	}
	c.runJSON(false, &d, "describe", "nodegroup", "--name", "workers", "--cluster", name, "-o", "json")
	if ng := d.Nodegroup; ng.NodegroupName != "workers" || ng.Status != "ACTIVE" || ng.ScalingConfig.DesiredSize != 1 ||
		ng.ScalingConfig.MinSize != 1 || ng.ScalingConfig.MaxSize != 4 || len(ng.Resources.AutoScalingGroups) != 1 || ng.Health.Issues == nil {
		t.Errorf("describe nodegroup: %+v", ng)
	}

	out = c.run("delete", "nodegroup", "--name", "workers", "--cluster", name)
	if !strings.Contains(out, "Node group workers deleted in") {
		t.Errorf("delete output:\n%s", out)
	}
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		still, err := readyOf(ctx, client, nodes)
		return err == nil && len(still) == 0, nil
	})
	if err != nil {
		t.Errorf("after delete, the group's node %v is still Ready", nodes)
	}
}

// availability watches the pods of a workload and records the fewest available
// (Ready, not being deleted) at any moment, from the first event on.
type availability struct {
	mu      sync.Mutex
	pods    map[types.UID]bool // by pod: available
	seen    map[types.UID]bool
	started bool
	min     int
	minAt   time.Time
	current int
}

func watchAvailability(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, selector string) *availability {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	a := &availability{pods: map[types.UID]bool{}, seen: map[types.UID]bool{}}
	for i := range list.Items {
		a.observe(watch.Added, &list.Items[i])
	}
	a.mu.Lock()
	a.started, a.min = true, a.count()
	a.mu.Unlock()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return client.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if p, ok := ev.Object.(*corev1.Pod); ok {
					a.observe(ev.Type, p)
				}
			}
		}
	}()
	return a
}

func (a *availability) count() int {
	n := 0
	for _, ok := range a.pods {
		if ok {
			n++
		}
	}
	return n
}

func (a *availability) observe(typ watch.EventType, p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen[p.UID] = true
	if typ == watch.Deleted {
		delete(a.pods, p.UID)
	} else {
		a.pods[p.UID] = ready(p) && p.DeletionTimestamp == nil
	}
	a.current = a.count()
	if a.started && a.current < a.min {
		a.min, a.minAt = a.current, time.Now()
	}
}

func (a *availability) result() (minimum, distinct, current int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.min, len(a.seen), a.current
}

// A rolling update of a 3-node group under a 3-replica Deployment whose PDB keeps 2
// available: a watcher counts available pods throughout and never sees fewer than 2,
// pods are really moved (new pods replace evicted ones), and every node ends on the
// new launch template version with the new template's label.
func TestNodeGroupUpgradeHonoursPDB(t *testing.T) {
	c := newCLI(t)
	name := "e2e-ngupgrade"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })
	c.run("up", "--name", name, "--nodes", "0", "--kubelet", "sim", "--nodegroup-kubelet", "sim", "--detach")
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	client, _ := adminClient(t, kubeconfig)
	ctx := t.Context()

	v1 := writeTemp(t, "web-v1.yaml", nodeGroupManifest("web", 3, 6, 3, map[string]string{"release": "v1"}))
	c.run("create", "nodegroup", "-f", v1, "--cluster", name)
	oldNodes := c.assertGroupSize(client, name, "web", 3, nil)
	before := c.getNodeGroup(name, "web")

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{{Name: "web", Image: agnhost, Args: []string{"netexec"}}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 3 {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		p, err := client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == 3 && p.Status.DisruptionsAllowed == 1, nil
	})
	if err != nil {
		t.Fatalf("the workload did not become available with its PDB allowing one disruption: %v\n%s", err, c.kubectl(kubeconfig, "get", "pods,pdb", "-o", "wide"))
	}

	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	avail := watchAvailability(watchCtx, t, client, "default", "app=web")

	v2 := writeTemp(t, "web-v2.yaml", nodeGroupManifest("web", 3, 6, 3, map[string]string{"release": "v2"}))
	out := c.run("upgrade", "nodegroup", "--name", "web", "-f", v2, "--cluster", name)
	for _, want := range []string{"Upgrading node group web of cluster " + name, "update Upgrade", "Node group web upgraded to launch template version"} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade output lacks %q:\n%s", want, out)
		}
	}
	// The surge phase can pass between two of the CLI's polls (the Nodes' events wake
	// the controller, and simulated nodes join within a second): its event says it ran.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool { return e.Reason == "NodesLaunched" && e.Regarding.Name == "web" }), nil
	})
	if err != nil {
		t.Errorf("no NodesLaunched event for group web: the upgrade skipped its surge (ScaleUp) phase\n%s", out)
	}
	// Let the replacement pods settle before the count ends.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3, nil
	})
	if err != nil {
		t.Errorf("the workload did not come back to 3 available pods: %v", err)
	}
	stop()
	minimum, distinct, current := avail.result()
	t.Logf("available pods during the upgrade: at least %d; %d distinct pods seen; %d at the end", minimum, distinct, current)
	if minimum < 2 {
		t.Errorf("the PodDisruptionBudget was violated: only %d pods available at %s", minimum, avail.minAt.Format(time.RFC3339Nano))
	}
	if distinct <= 3 {
		t.Errorf("%d distinct pods seen: the upgrade moved no pod, so the watcher proved nothing", distinct)
	}

	after := c.getNodeGroup(name, "web")
	lt, oldLT := after.Status.LaunchTemplate, before.Status.LaunchTemplate
	if lt == nil || oldLT == nil || lt.Version == oldLT.Version {
		t.Fatalf("launch template before %+v, after %+v: want a new version", oldLT, lt)
	}
	if after.Status.UpdatedSize != 3 || after.Status.ReadySize != 3 || len(after.Status.Instances) != 3 || after.Status.Update != nil {
		t.Errorf("after the upgrade: %+v", after.Status)
	}
	for _, in := range after.Status.Instances {
		if in.LaunchTemplateVersion != lt.Version {
			t.Errorf("instance %s is on launch template version %s, want %s", in.InstanceID, in.LaunchTemplateVersion, lt.Version)
		}
		for _, old := range before.Status.Instances {
			if old.InstanceID == in.InstanceID {
				t.Errorf("instance %s of the old template is still in the group", in.InstanceID)
			}
		}
	}
	// A new instance may take an old one's address, and so its node name.
	var left []string
	for _, n := range oldNodes {
		if !slices.ContainsFunc(after.Status.Instances, func(in v1alpha1.InstanceStatus) bool { return in.NodeName == n }) {
			left = append(left, n)
		}
	}
	c.assertGroupSize(client, name, "web", 3, left)
	var d struct {
		Nodegroup struct {
			LaunchTemplate struct{ Version string }
		}
	}
	c.runJSON(false, &d, "describe", "nodegroup", "--name", "web", "--cluster", name, "-o", "json")
	if d.Nodegroup.LaunchTemplate.Version != lt.Version {
		t.Errorf("describe nodegroup: launch template version %q, want %q", d.Nodegroup.LaunchTemplate.Version, lt.Version)
	}
}
