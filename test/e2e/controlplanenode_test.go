package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
)

// `up --control-plane-node` gives the cluster a control-plane node as kubeadm's: a real
// kubelet in the control plane's namespace, Ready, labelled and tainted
// node-role.kubernetes.io/control-plane, that an ordinary pod is not scheduled to; its
// kube-proxy programs the control plane's namespace, so that kube-apiserver's
// namespace reaches a Service ClusterIP (before, "network is unreachable"); and
// `down` leaves nothing of it on the host.
func TestControlPlaneNode(t *testing.T) {
	start := time.Now()
	name := "e2e-cpnode"
	c, kubeconfig, ifaces := upCluster(t, name, "--control-plane-nodes", "2", "--nodes", "1")
	t.Logf("up --control-plane-node took %s", time.Since(start).Round(time.Second))
	ctx := t.Context()
	client, _ := adminClient(t, kubeconfig)
	nodeName := name + "-control-plane"
	// The second runs in a namespace of its own, at the VPC's reserved address.
	cpNodes := []string{nodeName, nodeName + "-2"}
	for i, n := range cpNodes {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("control-plane Node %s: %v", n, err)
		}
		if !nodeReady(node) {
			t.Errorf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
		}
		if v, ok := node.Labels[controlplane.ControlPlaneRoleLabel]; !ok || v != "" {
			t.Errorf("%s: labels %v: want %s", n, node.Labels, controlplane.ControlPlaneRoleLabel)
		}
		for _, want := range []corev1.Taint{controlplane.ControlPlaneTaint, cpnode.HostNetworkOnlyTaint} {
			if !slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == want.Key && taint.Effect == want.Effect }) {
				t.Errorf("%s: taints %v: want %s:%s", n, node.Spec.Taints, want.Key, want.Effect)
			}
		}
		want := []string{"198.18.0.1", "198.18.0.3"}[i]
		if !slices.ContainsFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeInternalIP && a.Address == want }) {
			t.Errorf("%s: addresses %v: want InternalIP %s", n, node.Status.Addresses, want)
		}
	}

	// An ordinary pod that only this node could take stays unscheduled for the taint.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ordinary"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: nodeName},
			Containers:   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10.2", ImagePullPolicy: corev1.PullNever}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var why string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // ask again until the timeout
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("the ordinary pod was scheduled to %s", p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				why = cond.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("ordinary pod: %v", err)
	}
	if !strings.Contains(why, "untolerated taint") {
		t.Errorf("unschedulable for %q: want an untolerated taint", why)
	}

	// kube-proxy runs there, and from kube-apiserver's namespace the kubernetes
	// Service's ClusterIP answers.
	svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := netns.NS{Name: "nodejoin-" + name}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	var last error
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		conn, err := ns.DialContext(dctx, "tcp", addr)
		if err != nil {
			last = err
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	}); err != nil {
		t.Errorf("dialling the kubernetes Service %s from the control plane's namespace: %v", addr, last)
	}

	// kube-proxy is Running there; the controller's image (make images) is in the
	// node's containerd, as every instance's, for the chart to run from.
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		t.Fatal(err)
	}
	var onNode []string
	for _, p := range pods.Items {
		onNode = append(onNode, p.Name+"="+string(p.Status.Phase))
	}
	t.Logf("kube-system pods on %s: %v", nodeName, onNode)
	// Only pods that tolerate every taint (kube-proxy, aws-node) are there: CoreDNS,
	// which tolerates the control-plane taint, is kept off by the host-network-only one.
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "coredns-") {
			t.Errorf("pod %s was scheduled to the control-plane node, which has no pod network", p.Name)
		}
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
		return strings.HasPrefix(p.Name, "kube-proxy-") && p.Status.Phase == corev1.PodRunning
	}) {
		t.Errorf("no kube-proxy pod Running on %s: %v", nodeName, onNode)
	}
	sock := filepath.Join("/var/lib/nodejoin", name, "control-plane", "run/containerd/containerd.sock")
	if _, err := os.Stat(filepath.Join(c.binDir, "images", "nodejoin-controller.tar")); err == nil {
		out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "k8s.io", "images", "ls", "-q").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nodejoin-controller") {
			t.Errorf("the controller's image is not in the control-plane node's containerd (%v):\n%s", err, out)
		}
	}
	// Its serving certificate came from the CA with its client one: kube-apiserver
	// reaches its kubelet (logs), and it asked no controller for one.
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range csrs.Items {
		if csr.Spec.Username == "system:node:"+nodeName {
			t.Errorf("the control-plane node asked for a certificate: CSR %s (%s): %+v", csr.Name, csr.Spec.SignerName, csr.Status.Conditions)
		}
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "kube-proxy-") {
			if _, err := client.CoreV1().Pods("kube-system").GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(1))}).DoRaw(ctx); err != nil {
				t.Errorf("logs of %s through the control-plane node's kubelet: %v", p.Name, err)
			}
		}
	}

	assertWorkersAuthenticatedByPods(t, client, cpNodes)

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// assertWorkersAuthenticatedByPods checks that the workers joined through the deployed
// controller: a replica runs on each control-plane node, and its pods accepted the
// workers' IAM tokens (kube-apiserver calls the webhook through its Service).
func assertWorkersAuthenticatedByPods(t *testing.T, client kubernetes.Interface, cpNodes []string) {
	t.Helper()
	ctx := t.Context()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var workers []string
	for _, n := range nodes.Items {
		if !slices.Contains(cpNodes, n.Name) {
			workers = append(workers, n.Name)
		}
	}
	if len(workers) == 0 {
		t.Fatal("no worker joined")
	}
	pods, err := client.CoreV1().Pods(sandbox.ControllerNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodejoin-controller"})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	placed := map[string]bool{}
	for _, p := range pods.Items {
		if !slices.Contains(cpNodes, p.Spec.NodeName) {
			t.Errorf("controller pod %s runs on %s, not on a control-plane node", p.Name, p.Spec.NodeName)
		}
		placed[p.Spec.NodeName] = true
		b, err := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		logs.Write(b)
	}
	if len(placed) != len(cpNodes) {
		t.Errorf("controller pods run on %v: want one on each of %v", placed, cpNodes)
	}
	if !strings.Contains(logs.String(), "serving token reviews") {
		t.Errorf("no controller pod serves token reviews:\n%s", logs.String())
	}
	for _, w := range workers {
		if !strings.Contains(logs.String(), `msg="token accepted" user=system:node:`+w) && !strings.Contains(logs.String(), `"user":"system:node:`+w+`"`) {
			t.Errorf("no controller pod accepted a token of worker %s", w)
		}
	}
}
