package chartinstall

import (
	"crypto/x509"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// The values a local cluster installs with pass the chart's schema and validations,
// and render what the cluster relies on: a replica per control-plane node on the
// node's network, the webhook's Service at the fixed address kube-apiserver calls, the
// local STS over TLS with its CA, and no CA key.
func TestValuesRenderWithThePinnedHelm(t *testing.T) {
	helm, err := toolbin.Find(toolbin.Dir(), toolbin.Helm)
	if err != nil {
		t.Skipf("no pinned helm (make tools): %v", err)
	}
	dir := t.TempDir()
	if err := writeChart(filepath.Join(dir, "chart")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Nodes: []string{"demo-control-plane", "demo-control-plane-2"}, Cluster: "demo", Region: "us-west-2",
		AWSURL: "http://198.18.0.1:8773", STSURL: "https://198.18.0.1:8774", STSHosts: []string{"sts.us-west-2.amazonaws.com"},
		WebhookService: netip.MustParseAddr("10.100.0.21"), IdentityCert: &x509.Certificate{},
		Tolerations: []corev1.Toleration{{Key: "nodejoin.io/host-network-only", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
	values, err := json.Marshal(chartValues(cfg))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "values.json")
	if err := os.WriteFile(file, values, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), helm, "template", Release, filepath.Join(dir, "chart", "nodejoin-controller"),
		"--namespace", Namespace, "--values", file).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, want := range []string{"replicas: 2", "hostNetwork: true", "clusterIP: 10.100.0.21", "--sts-endpoint=https://198.18.0.1:8774",
		"--sts-ca-bundle=/etc/nodejoin/sts-ca/ca.crt", "--instance-identity-cert=/etc/nodejoin/instance-identity/certs.pem",
		"key: nodejoin.io/host-network-only", "--cluster-id=demo"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the rendered chart lacks %q", want)
		}
	}
	for _, never := range []string{"--ca-key", "kind: NetworkPolicy"} {
		if strings.Contains(string(out), never) {
			t.Errorf("the rendered chart has %q", never)
		}
	}
}
