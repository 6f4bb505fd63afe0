package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seedsDir holds the seeds' user-data samples as `add node --user-data` templates: each
// verbatim from /work/shared/seeds/ but for the cluster's values, which are template
// fields; a template comment at the top of each names its seed and what was replaced.
const seedsDir = "testdata/seeds"

// addUserDataNode runs `add node --user-data` with the user data read from file, or given on
// standard input when stdin is set, and returns the node that joined and the progress
// add node printed.
func (c *cli) addUserDataNode(cluster, file string, stdin bool) (node, progress string) {
	c.t.Helper()
	args := []string{"add", "node", "--name", cluster, "--user-data", file, "--timeout", "3m", "-o", "json"}
	if stdin {
		args[5] = "-"
	}
	cmd := c.command(args...)
	if stdin {
		data, err := os.ReadFile(file)
		if err != nil {
			c.t.Fatal(err)
		}
		cmd.Stdin = bytes.NewReader(data)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("nodejoin %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var nodes []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(out, &nodes); err != nil || len(nodes) != 1 {
		c.t.Fatalf("nodejoin %s: want one node, got %s (%v)", strings.Join(args, " "), out, err)
	}
	return nodes[0].Name, stderr.String()
}

// gzipSample fills in a sample's template fields from EKS DescribeCluster, as a user
// writing eksctl-style user data would, and writes it gzip'd: add node passes gzip
// data on untouched.
func gzipSample(t *testing.T, c *cli, cluster, file string) string {
	t.Helper()
	out, err := newAWSTools(t, c, cluster).eksClient().DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: aws.String(cluster)})
	if err != nil {
		t.Fatalf("EKS DescribeCluster %s: %v", cluster, err)
	}
	cidr := netip.MustParsePrefix(aws.ToString(out.Cluster.KubernetesNetworkConfig.ServiceIpv4Cidr))
	dns := cidr.Masked().Addr().As4()
	dns[3] = 10
	fields := map[string]string{
		"ClusterName": cluster, "APIServerEndpoint": aws.ToString(out.Cluster.Endpoint),
		"CertificateAuthority": aws.ToString(out.Cluster.CertificateAuthority.Data),
		"ServiceCIDR":          cidr.String(), "ClusterDNS": netip.AddrFrom4(dns).String(),
	}
	tmpl := template.Must(template.New(filepath.Base(file)).Option("missingkey=error").ParseFiles(file))
	var plain, gz bytes.Buffer
	if err := tmpl.Execute(&plain, fields); err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(plain.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(file)+".gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every complete non-AL2023 user-data sample of the seeds joins a real kubelet through
// `add node --user-data`, verbatim apart from the cluster's values: seed 000's managed
// node group MIME, seed 001's custom-launch-template MIME with flags, its cluster-name-
// only MIME (the endpoint and CA from the local EKS's DescribeCluster), its Bottlerocket
// TOML (from standard input), and seed 002's eksctl cloud-config, gzip'd. Each node
// carries the labels its user data gives it. A template naming an unknown field is
// refused before anything launches, naming the file, the line and the field; user data
// nodeadm refuses fails the add, and diagnose shows nodeadm's error with the line.
func TestSeedUserDataJoinsRealKubelets(t *testing.T) {
	const name = "e2e-seeds"
	start := time.Now()
	c, kubeconfig, _ := upCluster(t, name, "--nodes", "0", "--kubelet", "real")

	bad := writeTemp(t, "typo.mime", "#!/bin/bash\n\n/etc/eks/bootstrap.sh {{.ClusterNmae}}\n")
	out := c.runFail("add", "node", "--name", name, "--user-data", bad)
	for _, want := range []string{bad + ", line 3", ".ClusterNmae", "did you mean .ClusterName?"} {
		if !strings.Contains(out, want) {
			t.Errorf("add node with a misspelt field: output lacks %q:\n%s", want, out)
		}
	}

	samples := []struct {
		file   string
		stdin  bool
		family string
		labels map[string]string
	}{
		{file: "000_seed000_al2-mng-mime.mime", family: "AmazonLinux2", labels: map[string]string{
			"alpha.eksctl.io/nodegroup-name": "ng1-public-ssh", "eks.amazonaws.com/capacityType": "ON_DEMAND",
		}},
		{file: "001_seed001_al2-custom-lt-mime-flags.mime", family: "AmazonLinux2"},
		{file: "002_seed001_al2-mime-cluster-name-only.mime", family: "AmazonLinux2"},
		{file: "003_seed001_bottlerocket.toml", stdin: true, family: "Bottlerocket", labels: map[string]string{
			"alpha.eksctl.io/cluster-name": "bys-dev-eks-sec", "alpha.eksctl.io/nodegroup-name": "ng-bottlerocket",
		}},
		{file: gzipSample(t, c, name, filepath.Join(seedsDir, "004_seed002_eksctl-selfmanaged-al2.cloud-config")), family: "AmazonLinux2",
			labels: map[string]string{"alpha.eksctl.io/nodegroup-name": "demo-self-ng"}},
	}
	client, _ := adminClient(t, kubeconfig)
	var joined []string
	for _, s := range samples {
		file := s.file
		if !filepath.IsAbs(file) {
			file = filepath.Join(seedsDir, file)
		}
		began := time.Now()
		node, progress := c.addUserDataNode(name, file, s.stdin)
		source := file
		if s.stdin {
			source = "(standard input)"
		}
		if want := s.family + " user data from " + source; !strings.Contains(progress, want) {
			t.Errorf("%s: add node's progress lacks %q:\n%s", filepath.Base(file), want, progress)
		}
		t.Logf("%s joined as %s in %s", filepath.Base(file), node, time.Since(began).Round(100*time.Millisecond))
		joined = append(joined, node)
		n, err := client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range s.labels {
			if n.Labels[k] != v {
				t.Errorf("%s: node %s has label %s=%q, want %q from its user data", filepath.Base(file), node, k, n.Labels[k], v)
			}
		}
	}
	slices.Sort(joined)
	if got := c.readyNodes(kubeconfig); !slices.Equal(got, joined) {
		t.Errorf("Ready nodes = %v, want %v", got, joined)
	}

	// User data nodeadm refuses: the add fails with nodeadm's error, and diagnose shows
	// it down to the line of the bootstrap.sh call.
	refused := writeTemp(t, "refused.mime", "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n"+
		"Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\nset -ex\n"+
		"/etc/eks/bootstrap.sh {{.ClusterName}} --apiserver-endpoint {{.APIServerEndpoint}} --b64-cluster-ca {{.CertificateAuthority}} --bogus-flag yes\n\n--//--\n")
	out = c.runFail("add", "node", "--name", name, "--user-data", refused, "--timeout", "90s")
	m := regexp.MustCompile(`node (ip-[0-9-]+\.[a-z.]+):`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "unknown bootstrap.sh flag --bogus-flag") {
		t.Fatalf("add node with user data nodeadm refuses: want a failure naming the node and the flag:\n%s", out)
	}
	diag := c.runFail("diagnose", "node", "--name", name, m[1])
	for _, want := range []string{"✗ nodeadm", "nodeadm: error:", "unknown bootstrap.sh flag --bogus-flag", "line 3 of the part's script"} {
		if !strings.Contains(diag, want) {
			t.Errorf("diagnose of the refused node lacks %q:\n%s", want, diag)
		}
	}
	t.Logf("the seeds' samples joined in %s, cluster start included", time.Since(start).Round(time.Second))
}
