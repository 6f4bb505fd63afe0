package nodeadm

import (
	"path/filepath"
	"testing"
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
