package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/addons"
)

const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"

// After `up` with two real nodes, the cluster runs workloads as `kind create cluster`
// gives them: the add-ons EKS deploys at creation run (kube-proxy on each node, CoreDNS
// behind kube-dns); a two-replica Deployment spreads over both nodes behind a ClusterIP
// Service; a client pod reaches the Service by its DNS name and each backend by its pod
// IP, the one on the other node too; the API server reaches pods (its proxy); a name
// outside the cluster gets NXDOMAIN (never a forward out of the sandbox). (A cluster
// of real kubelets takes no simulated node, so keeping kube-proxy off simulated nodes
// is checked on the rendered DaemonSet, in internal/addons.)
func TestWorkloadAcrossNodes(t *testing.T) {
	name := "e2e-workload"
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "2")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Generous: two shared cores, and CoreDNS turns ready only after kube-proxy runs.
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			t.Fatalf("%s: %v\npods:\n%s\nevents:\n%s", what, err, c.kubectl(kubeconfig, "get", "pods", "-A", "-o", "wide"),
				c.kubectl(kubeconfig, "get", "events", "-A", "--sort-by=.lastTimestamp"))
		}
	}

	// The add-ons.
	poll("kube-proxy ready on both nodes", 5*time.Minute, func(ctx context.Context) (bool, error) {
		ds, err := client.AppsV1().DaemonSets("kube-system").Get(ctx, addons.KubeProxy, metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled == 2 && ds.Status.NumberReady == 2, nil
	})
	poll("CoreDNS ready", 5*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("kube-system").Get(ctx, addons.CoreDNS, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 2, nil
	})
	sys, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: addons.Label})
	if err != nil {
		t.Fatal(err)
	}
	if len(sys.Items) != 6 {
		t.Errorf("%d add-on pods, want 2 kube-proxy, 2 aws-node and 2 CoreDNS", len(sys.Items))
	}
	for _, p := range sys.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("add-on pod %s is %s", p.Name, p.Status.Phase)
		}
	}
	if svc, err := client.CoreV1().Services("kube-system").Get(ctx, addons.KubeDNS, metav1.GetOptions{}); err != nil || svc.Spec.ClusterIP != "10.100.0.10" {
		t.Errorf("kube-dns: %v (clusterIP want 10.100.0.10)", err)
	}
	poll("the default ServiceAccount", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	// A Deployment over both nodes, a Service in front.
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname,
					}}}},
					Containers: []corev1.Container{{
						Name: "netexec", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:           []string{"netexec", "--http-port=8080"},
						Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
					}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var backends []corev1.Pod
	poll("two ready web pods", 5*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		backends = backends[:0]
		for _, p := range list.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && ready(&p) {
				backends = append(backends, p)
			}
		}
		return len(backends) == 2, nil
	})
	if backends[0].Spec.NodeName == backends[1].Spec.NodeName {
		t.Fatalf("both web pods run on %s", backends[0].Spec.NodeName)
	}

	// The client runs beside the first backend: the second is on the other node.
	client0 := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			NodeName:   backends[0].Spec.NodeName,
			Containers: []corev1.Container{{Name: "client", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, client0, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("the client pod running", 3*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "client", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	inPod := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "exec", "client", "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	names := []string{backends[0].Name, backends[1].Name}
	for _, b := range backends {
		// By pod IP (the other node's through the local VPC's router).
		out, err := inPod("curl", "-sS", "-m", "10", fmt.Sprintf("http://%s:8080/hostname", b.Status.PodIP))
		if err != nil || out != b.Name {
			t.Errorf("client on %s -> %s (%s on %s): %q, %v", backends[0].Spec.NodeName, b.Name, b.Status.PodIP, b.Spec.NodeName, out, err)
		}
		// Through the API server's proxy: the control plane reaches every pod IP.
		if got := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/namespaces/default/pods/"+b.Name+":8080/proxy/hostname"); got != b.Name {
			t.Errorf("API server proxy to %s: %q", b.Name, got)
		}
	}
	// By the Service's DNS name (CoreDNS through kube-dns, then the ClusterIP through
	// kube-proxy); retried a little, as EndpointSlices and iptables rules settle.
	var last string
	seen := map[string]bool{}
	poll("the Service by its DNS name", 2*time.Minute, func(context.Context) (bool, error) {
		out, err := inPod("curl", "-sS", "-m", "10", "http://web.default.svc.cluster.local/hostname")
		last = fmt.Sprintf("%q, %v", out, err)
		if err == nil && slices.Contains(names, out) {
			seen[out] = true
		}
		return len(seen) > 0, nil
	})
	t.Logf("web.default.svc.cluster.local answered from %v (last: %s)", seen, last)
	// A name outside the cluster: an answer, and a negative one.
	out, err := inPod("dig", "+time=5", "+tries=1", "example.com")
	if err != nil || !strings.Contains(out, "status: NXDOMAIN") {
		t.Errorf("dig example.com from a pod: want NXDOMAIN, got %v:\n%s", err, out)
	}
	if out, err := inPod("getent", "hosts", "example.com"); err == nil {
		t.Errorf("example.com resolves from a pod: %s", out)
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
