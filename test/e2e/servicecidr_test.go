package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// `up --service-cidr 172.20.0.0/16` (EKS's range for a VPC in 10.0.0.0/8): kube-dns is
// 172.20.0.10, and real kubelets use it as clusterDNS, whichever way their user data
// leads there. The cluster's VPC (the node range) is in 10.0.0.0/8, so that AL2's
// bootstrap.sh rule picks 172.20.0.10 itself: the first node reads AL2023's NodeConfig
// (the service range, from which nodeadm derives the address), the second AL2's
// bootstrap.sh call, which names no DNS address at all. A pod resolves
// kubernetes.default to the service range's first address through kube-dns.
// (10.100.0.0/16, the default, is what every other e2e test runs.)
func TestServiceCIDRClusterDNS(t *testing.T) {
	const (
		name     = "e2e-svccidr"
		services = "172.20.0.0/16"
		dnsIP    = "172.20.0.10"
		apiIP    = "172.20.0.1"
	)
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "1", "--kubelet", "real", "--service-cidr", services, "--node-cidr", "10.250.0.0/24")
	out := c.run("add", "node", "--name", name, "--ami-family", "AmazonLinux2")
	if !strings.Contains(out, "AmazonLinux2 user data") {
		t.Errorf("add node --ami-family AmazonLinux2:\n%s", out)
	}
	client, _ := adminClient(t, kubeconfig)
	ctx := t.Context()
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			t.Fatalf("%s: %v\npods:\n%s\nevents:\n%s", what, err, c.kubectl(kubeconfig, "get", "pods", "-A", "-o", "wide"),
				c.kubectl(kubeconfig, "get", "events", "-A", "--sort-by=.lastTimestamp"))
		}
	}

	if svc, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil || svc.Spec.ClusterIP != apiIP {
		t.Errorf("the kubernetes Service: %v (clusterIP want %s)", err, apiIP)
	}
	if svc, err := client.CoreV1().Services("kube-system").Get(ctx, addons.KubeDNS, metav1.GetOptions{}); err != nil || svc.Spec.ClusterIP != dnsIP {
		t.Fatalf("kube-dns: %v (clusterIP want %s)", err, dnsIP)
	}

	// Each node's running kubelet, as its configz reports it through the API server.
	type listed struct{ Name, InstanceID, AMIFamily, State string }
	var nodes []listed
	c.runJSON(false, &nodes, "get", "nodes", "--name", name, "-o", "json")
	if len(nodes) != 2 {
		t.Fatalf("get nodes: %+v, want 2 nodes", nodes)
	}
	for _, n := range nodes {
		if n.State != "Ready" {
			t.Errorf("node %s (%s) is %s", n.Name, n.AMIFamily, n.State)
		}
		var configz struct {
			KubeletConfig struct {
				ClusterDNS []string `json:"clusterDNS"`
			} `json:"kubeletconfig"`
		}
		raw := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/nodes/"+n.Name+"/proxy/configz")
		if err := json.Unmarshal([]byte(raw), &configz); err != nil {
			t.Fatalf("configz of %s: %v\n%s", n.Name, err, raw)
		}
		if !slices.Equal(configz.KubeletConfig.ClusterDNS, []string{dnsIP}) {
			t.Errorf("node %s (%s): kubelet clusterDNS %v, want [%s]", n.Name, n.AMIFamily, configz.KubeletConfig.ClusterDNS, dnsIP)
		}
		// The AL2 node's user data leaves the address to bootstrap.sh's rule.
		if n.AMIFamily == "AmazonLinux2" {
			ud, err := instanceIMDS(name, n.InstanceID).GetUserData(ctx, &imds.GetUserDataInput{})
			if err != nil {
				t.Fatalf("user data of %s: %v", n.InstanceID, err)
			}
			data, _ := io.ReadAll(ud.Content)
			if text := string(data); !strings.Contains(text, "/etc/eks/bootstrap.sh") || strings.Contains(text, "--dns-cluster-ip") || strings.Contains(text, "--service-ipv4-cidr") {
				t.Errorf("AL2 user data should call bootstrap.sh without a DNS address or service range:\n%s", text)
			}
		}
	}

	// A pod resolves kubernetes.default through kube-dns.
	poll("CoreDNS ready", 5*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("kube-system").Get(ctx, addons.CoreDNS, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas >= 1, nil
	})
	poll("the default ServiceAccount", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	var al2 string
	for _, n := range nodes {
		if n.AMIFamily == "AmazonLinux2" {
			al2 = n.Name
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "resolver"},
		Spec: corev1.PodSpec{
			NodeName:   al2,
			Containers: []corev1.Container{{Name: "resolver", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("the resolver pod running", 3*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "resolver", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	inPod := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "exec", "resolver", "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := inPod("cat", "/etc/resolv.conf"); err != nil || !strings.Contains(out, "nameserver "+dnsIP) {
		t.Errorf("the pod's resolv.conf: %v\n%s", err, out)
	}
	var last string
	poll("kubernetes.default resolved from a pod", 2*time.Minute, func(context.Context) (bool, error) {
		out, err := inPod("getent", "hosts", "kubernetes.default")
		last = out
		return err == nil && strings.HasPrefix(out, apiIP+" "), nil
	})
	t.Logf("kubernetes.default from a pod on %s: %s", al2, last)

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
