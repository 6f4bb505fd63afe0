package kubeletsim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Pods bound to a node run; deleting or evicting one is confirmed by the node; a
// disruption budget that allows no disruption keeps a pod.
func TestPodLifecycle(t *testing.T) {
	cp, in, token := startWithOneNode(t)
	admin := cp.env.Client
	ctx := t.Context()
	s := newSims(t)
	k := s.start(cp, in, func(c *Config) { c.BootstrapToken = token })
	eventually(t, "joined", func() (bool, error) { return joined(k), nil })
	// No kube-controller-manager runs: make the service account its controller would.
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pods := admin.CoreV1().Pods("default")
	newPod := func(name, app string) *corev1.Pod {
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				NodeName:       in.node,
				InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}, {Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
				Containers:     []corev1.Container{{Name: "app", Image: "nginx"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	runningReady := func(name string) func() (bool, error) {
		return func() (bool, error) {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		}
	}
	gone := func(name string) func() (bool, error) {
		return func() (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}
	}

	newPod("plain", "plain")
	eventually(t, "pod running and ready", runningReady("plain"))
	p, err := pods.Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.HostIP != in.ip || !k.cfg.PodCIDR.Contains(mustAddr(t, p.Status.PodIP)) || p.Status.StartTime == nil ||
		len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || len(p.Status.InitContainerStatuses) != 2 {
		t.Errorf("pod status = %+v", p.Status)
	}
	// Deleted with the default grace period: the node confirms at once.
	if err := pods.Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deleted pod gone", gone("plain"))

	// Evicted through the Eviction API, under a budget that allows one disruption.
	// No disruption controller runs: the test writes the budget's status as it would.
	budget := func(name, app string, allowed int32) {
		pdb, err := admin.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1 - allowed)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed, CurrentHealthy: 1, DesiredHealthy: 1 - allowed, ExpectedPods: 1}
		if _, err := admin.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	newPod("web", "web")
	budget("web", "web", 1)
	eventually(t, "web running", runningReady("web"))
	if err := evict("web"); err != nil {
		t.Fatalf("evicting web: %v", err)
	}
	eventually(t, "evicted pod gone", gone("web"))

	newPod("db", "db")
	budget("db", "db", 0)
	eventually(t, "db running", runningReady("db"))
	if err := evict("db"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting db against its budget: %v, want TooManyRequests", err)
	}
	if ok, err := runningReady("db")(); !ok || err != nil {
		t.Errorf("db after a refused eviction: %v %v", ok, err)
	}
	if st := k.Status(); st.PodsStarted != 3 || st.PodsDeleted != 2 {
		t.Errorf("pods started %d, deleted %d", st.PodsStarted, st.PodsDeleted)
	}
}

// A node that starts again under the same name (a restarted kubelet) takes its Node
// over: same object, its labels merged in, a new boot ID, heartbeats and Lease renewals
// from the new process; its pods keep running with their addresses.
func TestRestartTakesOverTheNode(t *testing.T) {
	cp, in, token := startWithOneNode(t)
	admin := cp.env.Client
	ctx := t.Context()
	change := func(c *Config) {
		c.BootstrapToken = token
		c.StatusInterval = time.Second
		c.LeaseDuration = 4 * time.Second
	}
	first := newSims(t)
	k := first.start(cp, in, change)
	eventually(t, "joined", func() (bool, error) { return joined(k), nil })
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pods := admin.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{NodeName: in.node, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP string
	eventually(t, "pod running", func() (bool, error) {
		p, err := pods.Get(ctx, "web", metav1.GetOptions{})
		podIP = p.Status.PodIP
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	// Heartbeats every StatusInterval, even with nothing to report.
	heartbeat := func() time.Time {
		n, err := admin.CoreV1().Nodes().Get(ctx, in.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.LastHeartbeatTime.Time
			}
		}
		return time.Time{}
	}
	beat := heartbeat()
	eventually(t, "a heartbeat", func() (bool, error) { return heartbeat().After(beat), nil })

	before, err := admin.CoreV1().Nodes().Get(ctx, in.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone labels the Node meanwhile; the kubelet stops.
	before.Labels["team"] = "payments"
	if _, err := admin.CoreV1().Nodes().Update(ctx, before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	first.stop()
	kept := k.ClientCertificate()
	if kept == nil {
		t.Fatal("the first process has no client certificate to keep")
	}

	// The new process keeps the client certificate, as the kubelet keeps
	// kubelet-client-current.pem: bootstrapping again is denied for a registered node.
	second := newSims(t)
	k2 := second.start(cp, in, func(c *Config) {
		change(c)
		c.ClientCertificate = kept
		c.Labels = map[string]string{"eks.amazonaws.com/nodegroup": "workers-v2"}
	})
	eventually(t, "joined again", func() (bool, error) { return joined(k2), nil })
	after, err := admin.CoreV1().Nodes().Get(ctx, in.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || after.Status.NodeInfo.BootID == before.Status.NodeInfo.BootID ||
		after.Labels["team"] != "payments" || after.Labels["eks.amazonaws.com/nodegroup"] != "workers-v2" {
		t.Errorf("after the restart: uid %s→%s, boot %s→%s, labels %v", before.UID, after.UID, before.Status.NodeInfo.BootID, after.Status.NodeInfo.BootID, after.Labels)
	}
	renewals := k2.Status().LeaseRenewals
	eventually(t, "the new process renews the Lease", func() (bool, error) { return k2.Status().LeaseRenewals > renewals, nil })
	p, err := pods.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP != podIP {
		t.Errorf("pod after the restart: %s %s (was %s)", p.Status.Phase, p.Status.PodIP, podIP)
	}
	// A new pod gets another address than the one the old pod kept.
	if _, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec:       corev1.PodSpec{NodeName: in.node, Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "second pod running", func() (bool, error) {
		p, err := pods.Get(ctx, "api", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP == podIP {
			t.Fatalf("two pods have address %s", podIP)
		}
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if st := k2.Status(); st.LastError != "" {
		t.Errorf("last error = %q", st.LastError)
	}
}
