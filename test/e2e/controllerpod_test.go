package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The controller as users deploy it: `up --control-plane-node` installs the chart on
// the control-plane node, and every worker's serving CSR is decided by its pod, whose
// service account may not list Secrets and which mounts no CA key. Then the faults of
// a real cluster's life, each while nodes join: the pod is deleted (its replacement
// settles what was left), the control-plane node is drained (the PodDisruptionBudget
// keeps the replica), the chart is upgraded to a new image (the new pod decides).
// Every node joins, and no CSR is left pending or issued twice.
func TestDeployedControllerSurvivesFaults(t *testing.T) {
	start := time.Now()
	name := "e2e-ctlpod"
	c, kubeconfig, ifaces := upCluster(t, name, "--control-plane-node", "--nodes", "0", "--kubelet", "sim", "--nodegroup-kubelet", "sim")
	t.Logf("up took %s", time.Since(start).Round(time.Second))
	ctx := t.Context()
	client, _ := adminClient(t, kubeconfig)
	cpNode := name + "-control-plane"

	first := c.controllerPod(ctx, kubeconfig, client, cpNode)
	for _, v := range first.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "nodejoin-controller-aws" {
			t.Errorf("pod %s mounts Secret %s: the default install mounts no key", first.Name, v.Secret.SecretName)
		}
	}
	for _, a := range first.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--ca-key") {
			t.Errorf("pod %s is given a CA key: %s", first.Name, a)
		}
	}
	sa := "system:serviceaccount:kube-system:" + first.Spec.ServiceAccountName
	if out, _ := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"auth", "can-i", "list", "secrets", "-n", "kube-system", "--as", sa).CombinedOutput(); strings.TrimSpace(string(out)) != "no" {
		t.Errorf("kubectl auth can-i list secrets -n kube-system --as %s: %q, want no", sa, out)
	}

	// 1. Ten nodes join while the pod that decides their CSRs is deleted.
	add := c.command("add", "node", "--name", name, "--count", "10", "--timeout", "4m")
	var addOut strings.Builder
	add.Stdout, add.Stderr = &addOut, &addOut
	if err := add.Start(); err != nil {
		t.Fatal(err)
	}
	c.poll(kubeconfig, "a serving CSR of the new nodes", 2*time.Minute, func() (bool, string) {
		l, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(servingCSRs(l.Items)) > 0, "none yet"
	})
	if err := client.CoreV1().Pods("kube-system").Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := add.Wait(); err != nil {
		t.Fatalf("add node --count 10 while the controller's pod was deleted: %v\n%s", err, addOut.String())
	}
	second := c.controllerPod(ctx, kubeconfig, client, cpNode)
	if second.Name == first.Name {
		t.Fatalf("pod %s was not replaced", first.Name)
	}
	deciders := c.assertEveryServingCSRIssuedOnce(ctx, kubeconfig, client, 10)
	t.Logf("after the pod's deletion: serving CSRs decided by %v", deciders)

	// 2. Draining the control-plane node leaves the replica: the PodDisruptionBudget.
	out, err := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"drain", cpNode, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "20s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "disruption budget") {
		t.Errorf("kubectl drain %s: %v, want refused by the disruption budget:\n%s", cpNode, err, out)
	}
	if p := c.controllerPod(ctx, kubeconfig, client, cpNode); p.Name != second.Name {
		t.Errorf("the drain replaced pod %s with %s", second.Name, p.Name)
	}
	c.kubectl(kubeconfig, "uncordon", cpNode)

	// 3. The chart, upgraded to a new image (the same build under a new tag), and two
	// more nodes: their CSRs are decided by the new pod.
	sock := filepath.Join("/var/lib/nodejoin", name, "control-plane", "run/containerd/containerd.sock")
	if out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "k8s.io", "images", "tag", "--force",
		"nodejoin.io/nodejoin-controller:dev", "nodejoin.io/nodejoin-controller:e2e-upgrade").CombinedOutput(); err != nil {
		t.Fatalf("tagging the controller's image: %v\n%s", err, out)
	}
	state := filepath.Join(c.state, "nodejoin", name)
	helm := exec.CommandContext(ctx, filepath.Join(c.binDir, "helm"), "upgrade", "nodejoin-controller", filepath.Join(state, "chart", "nodejoin-controller"),
		"--namespace", "kube-system", "--kubeconfig", kubeconfig, "--reuse-values", "--set", "image.tag=e2e-upgrade", "--wait", "--timeout", "3m")
	helm.Env = append(helm.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if out, err := helm.CombinedOutput(); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	third := c.controllerPod(ctx, kubeconfig, client, cpNode)
	if !strings.HasSuffix(third.Spec.Containers[0].Image, ":e2e-upgrade") {
		t.Errorf("pod %s runs %s after the upgrade", third.Name, third.Spec.Containers[0].Image)
	}
	c.run("add", "node", "--name", name, "--count", "2", "--timeout", "3m")
	deciders = c.assertEveryServingCSRIssuedOnce(ctx, kubeconfig, client, 12)
	if deciders[third.Name] < 2 {
		t.Errorf("serving CSRs decided by %v: want the upgraded pod %s to decide the last two nodes'", deciders, third.Name)
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// controllerPod waits for the controller's one pod to be Ready, and checks it is on node.
func (c *cli) controllerPod(ctx context.Context, kubeconfig string, client kubernetes.Interface, node string) *corev1.Pod {
	c.t.Helper()
	var pod *corev1.Pod
	c.poll(kubeconfig, "one Ready nodejoin-controller pod", 3*time.Minute, func() (bool, string) {
		l, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodejoin-controller"})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		for i := range l.Items {
			p := &l.Items[i]
			states = append(states, p.Name+"="+string(p.Status.Phase))
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil && len(l.Items) == 1 {
					pod = p
				}
			}
		}
		return pod != nil, fmt.Sprint(states)
	})
	if pod.Spec.NodeName != node {
		c.t.Errorf("pod %s runs on %s, want the control-plane node %s", pod.Name, pod.Spec.NodeName, node)
	}
	return pod
}

// servingCSRs are the kubelet-serving CSRs of l.
func servingCSRs(l []certificatesv1.CertificateSigningRequest) []certificatesv1.CertificateSigningRequest {
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range l {
		if c.Spec.SignerName == certificatesv1.KubeletServingSignerName {
			out = append(out, c)
		}
	}
	return out
}

// assertEveryServingCSRIssuedOnce waits until nodes nodes each have an issued serving
// certificate and no serving CSR is pending, fails the test for a node issued more than
// one, and returns how many CSRs each replica decided (their Approved conditions name it).
func (c *cli) assertEveryServingCSRIssuedOnce(ctx context.Context, kubeconfig string, client kubernetes.Interface, nodes int) map[string]int {
	c.t.Helper()
	deciders, issued := map[string]int{}, map[string]int{}
	c.poll(kubeconfig, "every node's serving certificate", 3*time.Minute, func() (bool, string) {
		l, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pending := 0
		clear(deciders)
		clear(issued)
		for _, csr := range servingCSRs(l.Items) {
			for _, cond := range csr.Status.Conditions {
				if _, who, ok := strings.Cut(cond.Message, "decided by nodejoin-controller replica "); ok && cond.Type == certificatesv1.CertificateApproved {
					deciders[strings.TrimSuffix(who, ")")]++
				}
			}
			if len(csr.Status.Certificate) > 0 {
				issued[csr.Spec.Username]++
			} else if !refused(csr) {
				pending++ // undecided, or approved and not yet signed
			}
		}
		return len(issued) >= nodes && pending == 0, fmt.Sprintf("%d of %d nodes issued, %d CSRs pending", len(issued), nodes, pending)
	})
	for node, n := range issued {
		if n > 1 {
			c.t.Errorf("%s was issued %d serving certificates", node, n)
		}
	}
	return deciders
}

// refused reports a CSR denied or marked Failed: settled without a certificate.
func refused(csr certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateFailed || cond.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}
