package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
)

// clusterEC2 is the SDK's EC2 client for a local cluster's EC2, reached as instances
// reach it: on the bridge address inside the cluster namespace, where the local AWS's
// edge verifies signatures; it signs with the account administrator's key.
func (c *cli) clusterEC2(name string) *ec2.Client {
	c.t.Helper()
	akid, secret, err := controller.ReadAWSAdminKey(filepath.Join(c.state, "nodejoin", name))
	if err != nil {
		c.t.Fatalf("reading the local AWS administrator's key: %v", err)
	}
	ns := netns.NS{Name: "nodejoin-" + name}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ns.DialContext(ctx, network, addr)
	}}
	cfg := aws.Config{Region: controller.DefaultRegion, HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		Credentials: credentials.NewStaticCredentialsProvider(akid, secret, "")}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(fmt.Sprintf("http://198.18.0.1:%d", controller.EC2Port))
	})
}

// nodeENIAddrs returns, per ENI ID attached to the node's instance, its addresses.
func nodeENIAddrs(ctx context.Context, t *testing.T, c *ec2.Client, node *corev1.Node) map[string][]string {
	t.Helper()
	id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{id}}}})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces of %s: %v", id, err)
	}
	enis := map[string][]string{}
	for _, n := range out.NetworkInterfaces {
		for _, a := range n.PrivateIpAddresses {
			enis[aws.ToString(n.NetworkInterfaceId)] = append(enis[aws.ToString(n.NetworkInterfaceId)], aws.ToString(a.PrivateIpAddress))
		}
	}
	return enis
}

func ownerENI(enis map[string][]string, ip string) string {
	for id, addrs := range enis {
		if slices.Contains(addrs, ip) {
			return id
		}
	}
	return ""
}

// With the aws-node add-on on two real m5.large nodes: pods get VPC addresses from
// their own node's ENIs, as the local EC2 reports them, and reach each other across
// nodes and through a Service; 30 pods on one node fill a second ENI and stop at the
// scheduler's max pods (the rest Pending, none stuck); the CNI configuration goes when
// ipamd stops and comes back only when it is ready again.
func TestVPCNetworkPodsOnENIAddresses(t *testing.T) {
	name := "e2e-vpcnet"
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
	poll := func(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond); err != nil {
			t.Fatalf("%s: %v\npods:\n%s", what, err, c.kubectl(kubeconfig, "get", "pods", "-A", "-o", "wide"))
		}
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("nodes: %v, %v", nodes, err)
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	ec2c := c.clusterEC2(name)
	poll("the default ServiceAccount", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})

	// One web server per node, and a Service in front of both.
	for i, n := range nodes.Items {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "vpcweb"}},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "netexec", Image: agnhost,
				ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"netexec", "--http-port=8080"}}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "vpcweb"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "vpcweb"}, Ports: []corev1.ServicePort{{Port: 80,
			TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web := make([]*corev1.Pod, 2)
	poll("both web pods running", 5*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range web {
			p, err := client.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("web-%d", i), metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return false, nil //nolint:nilerr // retried until the deadline
			}
			web[i] = p
		}
		return true, nil
	})
	for i, p := range web {
		enis := nodeENIAddrs(ctx, t, ec2c, &nodes.Items[i])
		if ownerENI(enis, p.Status.PodIP) == "" {
			t.Errorf("pod %s on %s has %s, not an address of its node's ENIs %v", p.Name, p.Spec.NodeName, p.Status.PodIP, enis)
		}
		if !strings.HasPrefix(p.Status.PodIP, "198.18.") {
			t.Errorf("pod %s has %s, outside the VPC", p.Name, p.Status.PodIP)
		}
	}
	exec := func(pod string, args ...string) (string, error) {
		cmd := osexec.CommandContext(ctx, filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig, "exec", pod, "--"}, args...)...)
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	// Across nodes by pod IP, both ways, and through the Service.
	for i := range web {
		other := web[1-i]
		out, err := exec(web[i].Name, "curl", "-sS", "-m", "10", fmt.Sprintf("http://%s:8080/hostname", other.Status.PodIP))
		if err != nil || out != other.Name {
			t.Errorf("%s -> %s (%s): %q, %v", web[i].Name, other.Name, other.Status.PodIP, out, err)
		}
	}
	poll("the Service from a pod", 2*time.Minute, func(context.Context) (bool, error) {
		out, err := exec(web[0].Name, "curl", "-sS", "-m", "10", "http://vpcweb.default.svc.cluster.local/hostname")
		return err == nil && (out == "web-0" || out == "web-1"), nil
	})

	// 30 pods on the first node: more than one ENI's addresses, more than max pods.
	first := nodes.Items[0]
	for i := range 30 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%02d", i), Labels: map[string]string{"app": "fill"}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: first.Labels[corev1.LabelHostname]},
				Containers: []corev1.Container{{Name: "pause", Image: agnhost, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var running, pending []corev1.Pod
	poll("every fill pod running or unschedulable", 10*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=fill"})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		running, pending = running[:0], pending[:0]
		for _, p := range list.Items {
			switch {
			case p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "":
				running = append(running, p)
			case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && unschedulable(&p):
				pending = append(pending, p)
			}
		}
		return len(running)+len(pending) == 30, nil
	})
	all, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + first.Name})
	if err != nil {
		t.Fatal(err)
	}
	maxPods := first.Status.Allocatable.Pods().Value()
	if int64(len(all.Items)) != maxPods || len(pending) == 0 {
		t.Errorf("%d pods on %s (max pods %d), %d fill pods pending", len(all.Items), first.Name, maxPods, len(pending))
	}
	enis := nodeENIAddrs(ctx, t, ec2c, &first)
	if len(enis) < 2 {
		t.Errorf("%s has %d ENIs attached, want at least 2", first.Name, len(enis))
	}
	used := map[string]int{}
	for _, p := range all.Items {
		if p.Spec.HostNetwork || p.Status.Phase != corev1.PodRunning {
			continue
		}
		id := ownerENI(enis, p.Status.PodIP)
		if id == "" {
			t.Errorf("pod %s/%s has %s, not an address of %s's ENIs", p.Namespace, p.Name, p.Status.PodIP, first.Name)
		}
		used[id]++
	}
	if len(used) < 2 {
		t.Errorf("running pods use %d ENI(s) of %s, want 2 or more: %v", len(used), first.Name, used)
	}
	t.Logf("%s: %d running fill pods, %d pending; pods per ENI %v; max pods %d", first.Name, len(running), len(pending), used, maxPods)

	// The CNI configuration goes with ipamd: deleting the second node's aws-node pod
	// stops its ipamd (the configuration is removed first); the DaemonSet's next pod
	// writes it again only once ready.
	second := nodes.Items[1]
	conflist := filepath.Join("/var/lib/nodejoin", name, "nodes", second.Name, "etc/cni/net.d/10-aws.conflist")
	if _, err := os.Stat(conflist); err != nil {
		t.Fatalf("before: %v", err)
	}
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: addons.Label + "=" + addons.AWSNode,
		FieldSelector: "spec.nodeName=" + second.Name})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("aws-node pod on %s: %v %v", second.Name, pods, err)
	}
	old := pods.Items[0].Name
	if err := client.CoreV1().Pods("kube-system").Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	sawGone, sawNotReady := false, false
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(conflist); err != nil {
			sawGone = true
		}
		n, err := client.CoreV1().Nodes().Get(ctx, second.Name, metav1.GetOptions{})
		if err == nil && !nodeReady(n) {
			sawNotReady = true
		}
		if !sawGone {
			return false, nil
		}
		list, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: addons.Label + "=" + addons.AWSNode,
			FieldSelector: "spec.nodeName=" + second.Name})
		if err != nil || len(list.Items) != 1 || list.Items[0].Name == old || !ready(&list.Items[0]) {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		_, err = os.Stat(conflist)
		return err == nil && n != nil && nodeReady(n), nil
	}); err != nil {
		t.Fatalf("conflist removed %t, node NotReady seen %t, back: %v", sawGone, sawNotReady, err)
	}
	t.Logf("after deleting %s: conflist removed, node NotReady observed: %t, conflist back with the new pod ready", old, sawNotReady)

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
