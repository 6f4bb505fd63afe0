package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
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
	"k8s.io/utils/ptr"
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
	c, kubeconfig, ifaces := upCluster(t, name, "--control-plane-nodes", "2", "--nodes", "0", "--kubelet", "sim", "--nodegroup-kubelet", "sim")
	t.Logf("up took %s", time.Since(start).Round(time.Second))
	ctx := t.Context()
	client, _ := adminClient(t, kubeconfig)
	cpNodes := []string{name + "-control-plane", name + "-control-plane-2"}

	pods := c.controllerPods(ctx, kubeconfig, client, cpNodes, nil)
	first := pods[cpNodes[0]]
	assertNoSigningKey(t, client, first)
	sa := "system:serviceaccount:kube-system:" + first.Spec.ServiceAccountName
	if out, _ := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"auth", "can-i", "list", "secrets", "-n", "kube-system", "--as", sa).CombinedOutput(); strings.TrimSpace(string(out)) != "no" {
		t.Errorf("kubectl auth can-i list secrets -n kube-system --as %s: %q, want no", sa, out)
	}

	// 1. Ten nodes join (their tokens reviewed, their CSRs decided by the replicas)
	// while the leader's pod is deleted: the other replica takes the Lease over.
	leader := c.leader(ctx, kubeconfig, client, pods)
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
	if err := client.CoreV1().Pods("kube-system").Delete(ctx, leader.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := add.Wait(); err != nil {
		t.Fatalf("add node --count 10 while the leader's pod was deleted: %v\n%s", err, addOut.String())
	}
	pods = c.controllerPods(ctx, kubeconfig, client, cpNodes, leader)
	deciders := c.assertEveryServingCSRIssuedOnce(ctx, kubeconfig, client, 10)
	t.Logf("after the leader's deletion: serving CSRs decided by %v", deciders)

	// 2. Draining the first control-plane node evicts its replica (the budget allows
	// it: the other serves), and two nodes join through the one left.
	out, err := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"drain", cpNodes[0], "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "90s").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", cpNodes[0], err, out)
	}
	left := pods[cpNodes[1]]
	c.run("add", "node", "--name", name, "--count", "2", "--timeout", "3m")
	deciders = c.assertEveryServingCSRIssuedOnce(ctx, kubeconfig, client, 12)
	if p, err := client.CoreV1().Pods("kube-system").Get(ctx, left.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the replica on %s did not survive the drain of %s: %v", cpNodes[1], cpNodes[0], err)
	}
	if deciders[left.Name] < 2 {
		t.Errorf("serving CSRs decided by %v: want the replica left, %s, to decide the two nodes that joined during the drain", deciders, left.Name)
	}
	c.kubectl(kubeconfig, "uncordon", cpNodes[0])
	c.controllerPods(ctx, kubeconfig, client, cpNodes, nil)

	// 3. The chart, upgraded to a new image (the same build under a new tag), one
	// replica at a time, and two more nodes: their CSRs are decided by the new pods.
	for _, root := range []string{"control-plane", "control-plane-2"} {
		sock := filepath.Join("/var/lib/nodejoin", name, root, "run/containerd/containerd.sock")
		if out, err := exec.CommandContext(ctx, "ctr", "--address", sock, "--namespace", "k8s.io", "images", "tag", "--force",
			"nodejoin.io/nodejoin-controller:dev", "nodejoin.io/nodejoin-controller:e2e-upgrade").CombinedOutput(); err != nil {
			t.Fatalf("tagging the controller's image on %s: %v\n%s", root, err, out)
		}
	}
	state := filepath.Join(c.state, "nodejoin", name)
	helm := exec.CommandContext(ctx, filepath.Join(c.binDir, "helm"), "upgrade", "nodejoin-controller", filepath.Join(state, "chart", "nodejoin-controller"),
		"--namespace", "kube-system", "--kubeconfig", kubeconfig, "--reuse-values", "--set", "image.tag=e2e-upgrade", "--wait", "--timeout", "3m")
	helm.Env = append(helm.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if out, err := helm.CombinedOutput(); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	upgraded := c.controllerPods(ctx, kubeconfig, client, cpNodes, nil)
	for _, p := range upgraded {
		if !strings.HasSuffix(p.Spec.Containers[0].Image, ":e2e-upgrade") {
			t.Errorf("pod %s runs %s after the upgrade", p.Name, p.Spec.Containers[0].Image)
		}
	}
	c.run("add", "node", "--name", name, "--count", "2", "--timeout", "3m")
	deciders = c.assertEveryServingCSRIssuedOnce(ctx, kubeconfig, client, 14)
	if n := deciders[upgraded[cpNodes[0]].Name] + deciders[upgraded[cpNodes[1]].Name]; n < 2 {
		t.Errorf("serving CSRs decided by %v: want the upgraded pods to decide the last two nodes'", deciders)
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// assertNoSigningKey checks that pod mounts no key but the webhook's serving one, whose
// certificate is no CA's, and is given no CA key.
func assertNoSigningKey(t *testing.T, client kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.SecretName != "nodejoin-webhook-tls" {
			t.Errorf("pod %s mounts Secret %s: the default install mounts no key but the webhook's serving one", pod.Name, v.Secret.SecretName)
			continue
		}
		sec, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
		if block == nil {
			t.Fatalf("Secret %s holds no PEM certificate", sec.Name)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign != 0 {
			t.Errorf("pod %s mounts Secret %s, whose certificate %q can sign certificates", pod.Name, sec.Name, cert.Subject)
		}
	}
	for _, a := range pod.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--ca-key") {
			t.Errorf("pod %s is given a CA key: %s", pod.Name, a)
		}
	}
}

// controllerPods waits until each of nodes runs one Ready controller pod, none other
// is left (a deleted or replaced one gone) and gone, when set, is not among them; it
// returns them by node.
func (c *cli) controllerPods(ctx context.Context, kubeconfig string, client kubernetes.Interface, nodes []string, gone *corev1.Pod) map[string]*corev1.Pod {
	c.t.Helper()
	var pods map[string]*corev1.Pod
	c.poll(kubeconfig, fmt.Sprintf("a Ready nodejoin-controller pod on each of %v", nodes), 3*time.Minute, func() (bool, string) {
		l, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodejoin-controller"})
		if err != nil {
			return false, err.Error()
		}
		pods = map[string]*corev1.Pod{}
		var states []string
		for i := range l.Items {
			p := &l.Items[i]
			states = append(states, p.Name+"@"+p.Spec.NodeName+"="+string(p.Status.Phase))
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil && (gone == nil || p.Name != gone.Name) {
					pods[p.Spec.NodeName] = p
				}
			}
		}
		for _, n := range nodes {
			if pods[n] == nil {
				return false, fmt.Sprint(states)
			}
		}
		return len(l.Items) == len(nodes), fmt.Sprint(states)
	})
	return pods
}

// leader is the pod of pods that holds the controller's Lease.
func (c *cli) leader(ctx context.Context, kubeconfig string, client kubernetes.Interface, pods map[string]*corev1.Pod) *corev1.Pod {
	c.t.Helper()
	var leader *corev1.Pod
	c.poll(kubeconfig, "the Lease kube-system/nodejoin-controller held by a replica", 2*time.Minute, func() (bool, string) {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "nodejoin-controller", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		for _, p := range pods {
			if holder == p.Name || strings.HasPrefix(holder, p.Name+"_") {
				leader = p
			}
		}
		return leader != nil, "held by " + holder
	})
	return leader
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
