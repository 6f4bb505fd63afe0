package e2e

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// upgradeWatch polls, every second while a managed upgrade runs, the Deployment's
// available replicas and the old nodes' schedulability: the fewest available seen, and
// which old nodes were seen cordoned.
type upgradeWatch struct {
	mu       sync.Mutex
	polls    int
	min      int32
	minAt    time.Time
	cordoned map[string]bool
	errs     int
}

func watchUpgrade(ctx context.Context, client kubernetes.Interface, deployment string, oldNodes []string) *upgradeWatch {
	w := &upgradeWatch{min: 1 << 30, cordoned: map[string]bool{}}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			d, err := client.AppsV1().Deployments("default").Get(ctx, deployment, metav1.GetOptions{})
			nodes, nerr := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			w.mu.Lock()
			if err == nil {
				w.polls++
				if d.Status.AvailableReplicas < w.min {
					w.min, w.minAt = d.Status.AvailableReplicas, time.Now()
				}
			} else if ctx.Err() == nil {
				w.errs++
			}
			if nerr == nil {
				for _, n := range nodes.Items {
					if slices.Contains(oldNodes, n.Name) && n.Spec.Unschedulable {
						w.cordoned[n.Name] = true
					}
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// A managed node group of three real kubelets (the default of `up`: no
// --nodegroup-kubelet) on an older AL2023 release, under a Deployment of 4 replicas
// whose PodDisruptionBudget keeps 3 available, is upgraded to the latest release with
// `aws eks update-nodegroup-version`. Polled every second, the Deployment never has
// fewer than 3 available replicas; each old instance is cordoned, drained, kept for the
// post-drain wait (shortened to 5 s through spec.timeouts.postDrainWait; EKS's 60 s
// default is a unit test in internal/nodegroup) and then terminated through Auto
// Scaling, as seed 001 and EKS's managed update describe; the group ends on the latest
// release with three new Ready nodes and the workload whole again.
func TestManagedUpgradeOfRealKubeletsHonoursPDB(t *testing.T) {
	const name, group, postDrainWait = "e2e-ngupreal", "ng-pdb", 5 * time.Second
	start := time.Now()
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "0")
	client, _ := adminClient(t, kubeconfig)
	ctx := t.Context()
	a := newAWSTools(t, c, name)
	dump := func() string {
		return fmt.Sprintf("nodes:\n%s\npods:\n%s\nevents:\n%s", c.kubectl(kubeconfig, "get", "nodes", "-o", "wide"),
			c.kubectl(kubeconfig, "get", "pods", "-A", "-o", "wide"), c.kubectl(kubeconfig, "get", "events", "-A", "--sort-by=.lastTimestamp"))
	}
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, dump())
		}
	}

	// Real kubelets by default on this machine, and up says so.
	type listedCluster struct {
		Name             string
		NodeGroupKubelet *struct{ Kubelet, Asked, Reason string }
	}
	var clusters []listedCluster
	c.runJSON(false, &clusters, "get", "clusters", "-o", "json")
	if i := slices.IndexFunc(clusters, func(cl listedCluster) bool { return cl.Name == name }); i < 0 || clusters[i].NodeGroupKubelet == nil || clusters[i].NodeGroupKubelet.Kubelet != "real" || clusters[i].NodeGroupKubelet.Asked != "auto" {
		t.Fatalf("get clusters: want %s's node groups on real kubelets, chosen by auto: %+v", name, clusters)
	}

	var cluster struct {
		Cluster struct {
			Version            string
			ResourcesVpcConfig struct {
				SubnetIDs []string `json:"subnetIds"`
			}
		}
	}
	a.awsJSON(&cluster, "eks", "describe-cluster", "--name", name)
	var caller struct{ Account string }
	a.awsJSON(&caller, "sts", "get-caller-identity")
	latest := strings.TrimSpace(a.aws("ssm", "get-parameter", "--name",
		"/aws/service/eks/optimized-ami/"+cluster.Cluster.Version+"/amazon-linux-2023/x86_64/standard/recommended/release_version",
		"--query", "Parameter.Value", "--output", "text"))
	older := olderRelease(t, a, cluster.Cluster.Version, latest)
	a.aws(append([]string{"eks", "create-nodegroup", "--cluster-name", name, "--nodegroup-name", group,
		"--scaling-config", "minSize=3,maxSize=6,desiredSize=3", "--subnets"}, append(cluster.Cluster.ResourcesVpcConfig.SubnetIDs,
		"--node-role", "arn:aws:iam::"+caller.Account+":role/nodejoin-"+name+"-node", "--ami-type", "AL2023_x86_64_STANDARD",
		"--release-version", older)...)...)
	// A test's wait between drain and termination; unset it is EKS's 60 s.
	c.kubectl(kubeconfig, "patch", "nodegroup", group, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"timeouts":{"postDrainWait":"%s"}}}`, postDrainWait))
	poll("the group ACTIVE with 3 Ready nodes", 5*time.Minute, func(context.Context) (bool, error) {
		var out struct{ Nodegroup nodegroupJSON }
		a.awsJSON(&out, "eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", group)
		return out.Nodegroup.Status == "ACTIVE", nil
	})
	before := c.getNodeGroup(name, group)
	oldNodes, oldInstances := []string{}, map[string]string{} // node -> instance
	for _, in := range before.Status.Instances {
		oldNodes = append(oldNodes, in.NodeName)
		oldInstances[in.NodeName] = in.InstanceID
	}
	if len(oldNodes) != 3 || slices.Contains(oldNodes, "") {
		t.Fatalf("before the upgrade: instances %+v", before.Status.Instances)
	}
	for _, n := range oldNodes {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rt := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rt, "containerd://") || strings.HasSuffix(rt, "-sim") {
			t.Errorf("node %s: container runtime %q, want a real kubelet's containerd", n, rt)
		}
	}

	// Four replicas spread over the three nodes, a budget that lets one go at a time.
	labels := map[string]string{"app": "pdb"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"eks.amazonaws.com/nodegroup": group},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname},
					}}}},
					Containers:                    []corev1.Container{{Name: "pause", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("4 available replicas, the budget allowing one disruption", 5*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "pdb", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 4 {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		p, err := client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "pdb", metav1.GetOptions{})
		return err == nil && p.Status.CurrentHealthy == 4 && p.Status.DisruptionsAllowed == 1, nil
	})
	ready := time.Now()

	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	w := watchUpgrade(watchCtx, client, "pdb", oldNodes)
	pods := watchAvailability(watchCtx, t, client, "default", "app=pdb")

	var upd struct {
		Update struct{ ID, Type string }
	}
	a.awsJSON(&upd, "eks", "update-nodegroup-version", "--cluster-name", name, "--nodegroup-name", group, "--release-version", latest)
	if upd.Update.Type != "VersionUpdate" || upd.Update.ID == "" {
		t.Fatalf("update-nodegroup-version: %+v", upd.Update)
	}
	poll("the version update Successful", 8*time.Minute, func(context.Context) (bool, error) {
		var d struct{ Update struct{ Status string } }
		a.awsJSON(&d, "eks", "describe-update", "--name", name, "--nodegroup-name", group, "--update-id", upd.Update.ID)
		if d.Update.Status == "Failed" || d.Update.Status == "Cancelled" {
			return false, fmt.Errorf("update %s: %s", upd.Update.ID, a.aws("eks", "describe-update", "--name", name, "--nodegroup-name", group, "--update-id", upd.Update.ID))
		}
		return d.Update.Status == "Successful", nil
	})
	upgraded := time.Now()
	poll("the workload whole again", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("default").Get(ctx, "pdb", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 4, nil
	})
	stop()

	w.mu.Lock()
	minimum, minAt, polls, cordoned, errs := w.min, w.minAt, w.polls, w.cordoned, w.errs
	w.mu.Unlock()
	podMin, distinct, _ := pods.result()
	t.Logf("during the upgrade (%s): %d polls, at least %d available replicas (%d polls failed); pods: at least %d available, %d distinct",
		upgraded.Sub(ready).Round(time.Second), polls, minimum, errs, podMin, distinct)
	if minimum < 3 {
		t.Errorf("the PodDisruptionBudget was violated: %d available replicas at %s", minimum, minAt.Format(time.RFC3339Nano))
	}
	if podMin < 3 {
		t.Errorf("the PodDisruptionBudget was violated: %d available pods at %s", podMin, pods.minAt.Format(time.RFC3339Nano))
	}
	if distinct <= 4 {
		t.Errorf("%d distinct pods seen: the upgrade moved no pod", distinct)
	}

	// Each old node: cordoned, drained, the post-drain wait, terminated through Auto
	// Scaling, in that order.
	evs, err := client.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(reason, node string) time.Time {
		i := slices.IndexFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Reason == reason && e.Regarding.Kind == "NodeGroup" && e.Regarding.Name == group &&
				(strings.Contains(e.Note, "node "+node+")") || strings.Contains(e.Note, "node "+node+" "))
		})
		switch {
		case i < 0:
			return time.Time{}
		case !evs.Items[i].EventTime.IsZero():
			return evs.Items[i].EventTime.Time
		}
		return evs.Items[i].DeprecatedFirstTimestamp.Time
	}
	for _, n := range oldNodes {
		if !cordoned[n] {
			t.Errorf("old node %s was never seen cordoned", n)
		}
		cord, drained, terminating, terminated := at("NodeCordoned", n), at("NodeDrained", n), at("NodeTerminating", n), at("NodeTerminated", n)
		if cord.IsZero() || drained.IsZero() || terminating.IsZero() || terminated.IsZero() {
			t.Errorf("old node %s: events cordoned %s, drained %s, terminating %s, terminated %s: want all four", n, cord, drained, terminating, terminated)
			continue
		}
		if cord.After(drained) || drained.After(terminating) || terminating.After(terminated) {
			t.Errorf("old node %s: cordoned %s, drained %s, terminating %s, terminated %s: out of order", n, cord, drained, terminating, terminated)
		}
		// Event times are the controller's microseconds: the wait is a lower bound.
		if waited := terminating.Sub(drained); waited < postDrainWait-time.Second {
			t.Errorf("old node %s: terminated %s after its drain, before the post-drain wait of %s", n, waited, postDrainWait)
		}
	}
	for _, id := range oldInstances {
		poll("old instance "+id+" terminated in EC2", time.Minute, func(context.Context) (bool, error) {
			var r struct {
				Reservations []struct {
					Instances []struct{ State struct{ Name string } }
				}
			}
			a.awsJSON(&r, "ec2", "describe-instances", "--instance-ids", id)
			return len(r.Reservations) == 1 && len(r.Reservations[0].Instances) == 1 && r.Reservations[0].Instances[0].State.Name == "terminated", nil
		})
	}

	var after struct{ Nodegroup nodegroupJSON }
	poll("the group ACTIVE on the latest release", time.Minute, func(context.Context) (bool, error) {
		a.awsJSON(&after, "eks", "describe-nodegroup", "--cluster-name", name, "--nodegroup-name", group)
		return after.Nodegroup.Status == "ACTIVE" && after.Nodegroup.ReleaseVersion == latest, nil
	})
	ng := c.getNodeGroup(name, group)
	if len(ng.Status.Instances) != 3 || ng.Status.ReadySize != 3 {
		t.Errorf("after the upgrade: %d instances, %d Ready; want 3", len(ng.Status.Instances), ng.Status.ReadySize)
	}
	for _, in := range ng.Status.Instances {
		if slices.Contains(oldNodes, in.NodeName) && oldInstances[in.NodeName] == in.InstanceID {
			t.Errorf("instance %s (node %s) of the old release is still in the group", in.InstanceID, in.NodeName)
		}
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
	t.Logf("took %s: up and 3 real nodes with the workload %s, upgrade %s", time.Since(start).Round(time.Second),
		ready.Sub(start).Round(time.Second), upgraded.Sub(ready).Round(time.Second))
}
