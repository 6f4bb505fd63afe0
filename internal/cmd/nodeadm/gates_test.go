package nodeadm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

// TestConfigCheckFeatureGates checks seed 001's AL2023 user data (as EKS injects it into
// a managed node group) against kubelets: v1.37.1 no longer knows its feature gate, and
// without a kubelet the gate cannot be checked.
func TestConfigCheckFeatureGates(t *testing.T) {
	fake, err := filepath.Abs("../../nodeadm/bootstrap/testdata/fake-kubelet.sh")
	if err != nil {
		t.Fatal(err)
	}
	const seed = "file://" + seeds + "006_seed001_al2023-mng-injected-mime-nodeconfig.mime"
	tests := []struct {
		name, kubelet, want string
	}{
		{"kubelet v1.37.1", fake, "warning: spec.kubelet.config.featureGates: kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); nodeadm init drops it\n" +
			"ok: cluster my-cluster at https://1111122222.sk1.ap-northeast-2.eks.amazonaws.com\n"},
		{"no kubelet", "/nonexistent/kubelet", "info: spec.kubelet.config.featureGates: not checked against a kubelet (finding the kubelet /nonexistent/kubelet (give --kubelet-path): exec: \"/nonexistent/kubelet\": stat /nonexistent/kubelet: no such file or directory); nodeadm init checks them against the node's kubelet and drops those it refuses\n" +
			"ok: cluster my-cluster at https://1111122222.sk1.ap-northeast-2.eks.amazonaws.com\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, "config", "check", "-c", seed, "--kubelet-path", tt.kubelet)
			if err != nil || out != tt.want {
				t.Errorf("config check: %v\n%s\nwant:\n%s", err, out, tt.want)
			}
		})
	}
}

// TestInitDropsAGateTheKubeletDoesNotKnow runs init on seed 001's AL2023 user data with
// a kubelet v1.37.1: the drop-in is written without the gate, init says why, and a
// second boot takes the kubelet's answers from the cache.
func TestInitDropsAGateTheKubeletDoesNotKnow(t *testing.T) {
	cloudFor(t, seed(t, "006_"))
	fake, err := filepath.Abs("../../nodeadm/bootstrap/testdata/fake-kubelet.sh")
	if err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(t.TempDir(), "runs")
	t.Setenv("FAKE_KUBELET_RUNS", counter)
	runs := func() int {
		data, _ := os.ReadFile(counter)
		return strings.Count(string(data), "run")
	}
	root := t.TempDir()
	out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-path", fake)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	const want = "warning: kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); dropped from spec.kubelet.config.featureGates\n"
	if !strings.Contains(out, want) {
		t.Errorf("init did not warn %q:\n%s", want, out)
	}
	dropIn, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletDropInPath))
	if strings.Contains(string(dropIn), "featureGates") || !strings.Contains(string(dropIn), `"shutdownGracePeriod": "30s"`) {
		t.Errorf("drop-in:\n%s", dropIn)
	}
	cfg, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletConfigPath))
	if !strings.Contains(string(cfg), `"RotateKubeletServerCertificate": true`) || !strings.Contains(string(cfg), `"DynamicResourceAllocation": true`) {
		t.Errorf("config.json lost nodeadm's own gates, which the kubelet knows:\n%s", cfg)
	}
	// --version, then one probe per gate: nodeadm's three and the seed's one.
	if got := runs(); got != 5 {
		t.Errorf("first boot ran the kubelet %d times, want 5", got)
	}
	again, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-path", fake)
	if err != nil {
		t.Fatalf("%v\n%s", err, again)
	}
	if got := runs(); got != 5 || !strings.Contains(again, want) {
		t.Errorf("second boot: %d kubelet runs in all, want 5 (all cached); output:\n%s", got, again)
	}
}
