package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// instanceIMDS is the SDK's IMDS client for a local instance's metadata endpoint, reached
// as the instance reaches it: 169.254.169.254 inside the instance's network namespace.
func instanceIMDS(cluster, instanceID string) *imds.Client {
	ns := netns.NS{Name: "nodejoin-" + cluster + "-" + instanceID}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ns.DialContext(ctx, network, addr)
	}}
	return imds.New(imds.Options{Endpoint: "http://169.254.169.254", HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
}

// An instance in a VPC whose DHCP options set a custom domain-name (corp.example) joins:
// its metadata names it ip-A-B-C-D.corp.example (local-hostname), EC2 names it otherwise
// (PrivateDnsName), and the Node is named from EC2, as the control plane's webhook names
// the node identity, so NodeRestriction lets the kubelet register and update it. A kubelet
// named from local-hostname would register a Node its identity may not create, and never
// turn Ready: `up` would fail (the regression of amazon-eks-ami PR #1264).
func TestCustomDHCPDomain(t *testing.T) {
	name := "e2e-dhcp"
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "1", "--kubelet", "real", "--dhcp-domain", "corp.example")
	ctx := t.Context()
	client, _ := adminClient(t, kubeconfig)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("nodes = %d, want 1", len(nodes.Items))
	}
	node := nodes.Items[0]
	if !nodeReady(&node) {
		t.Fatalf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}
	instanceID := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]

	// EC2's name for the instance is the node's name.
	out, err := c.clusterEC2(name).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		t.Fatalf("DescribeInstances %s: %v", instanceID, err)
	}
	inst := out.Reservations[0].Instances[0]
	privateDNS, ip := aws.ToString(inst.PrivateDnsName), aws.ToString(inst.PrivateIpAddress)
	if node.Name != privateDNS {
		t.Errorf("node name %s, want EC2's PrivateDnsName %s", node.Name, privateDNS)
	}

	// The instance's metadata names it in the DHCP domain: not the node's name.
	md, err := instanceIMDS(name, instanceID).GetMetadata(ctx, &imds.GetMetadataInput{Path: "local-hostname"})
	if err != nil {
		t.Fatalf("IMDS local-hostname of %s: %v", instanceID, err)
	}
	b, err := io.ReadAll(md.Content)
	_ = md.Content.Close()
	if err != nil {
		t.Fatal(err)
	}
	localHostname := string(b)
	if want := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".corp.example"; localHostname != want {
		t.Errorf("IMDS local-hostname = %q, want %q", localHostname, want)
	}
	if localHostname == node.Name {
		t.Fatalf("IMDS local-hostname equals the node name %s: the custom domain did not take effect", node.Name)
	}

	// The kubelet acted as system:node:<EC2 name>: NodeRestriction admitted its Node and
	// its status updates, and its serving certificate was issued for that identity.
	users := c.assertIssuedByClusterCA(kubeconfig, name, "kubernetes.io/kubelet-serving")
	if len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u != "system:node:"+privateDNS }) {
		t.Errorf("kubelet-serving CSRs requested by %v, want only system:node:%s", users, privateDNS)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, localHostname, metav1.GetOptions{}); err == nil {
		t.Errorf("a Node named after IMDS local-hostname %s exists", localHostname)
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
