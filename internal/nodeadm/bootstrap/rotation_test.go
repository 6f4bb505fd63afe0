package bootstrap

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// A kubelet whose client certificate comes from a CSR (bootstrap token) renews it
// before the signer's cap runs out; one that authenticates with the credential
// plugin's token keeps that token. Both renew their serving certificate.
func TestRenderCertificateRotation(t *testing.T) {
	for _, tt := range []struct {
		name          string
		opts          Options
		wantRotate    bool
		wantFlags     []string
		wantKubeconf  string // the kubeconfig file nodeadm writes
		forbiddenFlag string
	}{
		{
			name:         "bootstrap token on a host",
			opts:         Options{BootstrapToken: "abcdef.0123456789abcdef"},
			wantRotate:   true,
			wantFlags:    []string{"--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig", "--kubeconfig=/var/lib/kubelet/kubeconfig"},
			wantKubeconf: BootstrapKubeconfigPath,
			// The kubelet's default cert dir, /var/lib/kubelet/pki, holds the rotated pair.
			forbiddenFlag: "--cert-dir",
		},
		{
			name:         "bootstrap token in a local instance",
			opts:         Options{BootstrapToken: "abcdef.0123456789abcdef", Root: "/var/lib/nodejoin/c/i-1"},
			wantRotate:   true,
			wantFlags:    []string{"--bootstrap-kubeconfig=/var/lib/nodejoin/c/i-1/var/lib/kubelet/bootstrap-kubeconfig", "--cert-dir=/var/lib/nodejoin/c/i-1/var/lib/kubelet/pki", "--kubeconfig=/var/lib/nodejoin/c/i-1/var/lib/kubelet/kubeconfig"},
			wantKubeconf: BootstrapKubeconfigPath,
		},
		{
			name:          "credential plugin",
			opts:          Options{},
			wantRotate:    false,
			wantFlags:     []string{"--kubeconfig=/var/lib/kubelet/kubeconfig"},
			wantKubeconf:  KubeconfigPath,
			forbiddenFlag: "--bootstrap-kubeconfig",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.KubeletVersion, tt.opts.CPUMillis, tt.opts.InstanceTypes = "v1.37.1", 2000, e2eTypes
			out, err := Render(mergedConfig(t, clusterDoc), e2eInstance, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			d := json.NewDecoder(bytes.NewReader(file(t, out, KubeletConfigPath)))
			d.DisallowUnknownFields()
			var c kubeletv1beta1.KubeletConfiguration
			if err := d.Decode(&c); err != nil {
				t.Fatal(err)
			}
			if c.RotateCertificates != tt.wantRotate {
				t.Errorf("rotateCertificates = %v, want %v", c.RotateCertificates, tt.wantRotate)
			}
			if !c.ServerTLSBootstrap {
				t.Error("serverTLSBootstrap is off: the serving certificate would never be requested or renewed")
			}
			for _, f := range tt.wantFlags {
				if !slices.Contains(out.KubeletArgs, f) {
					t.Errorf("kubelet flags %q lack %s", out.KubeletArgs, f)
				}
			}
			if tt.forbiddenFlag != "" && slices.ContainsFunc(out.KubeletArgs, func(a string) bool { return strings.HasPrefix(a, tt.forbiddenFlag+"=") }) {
				t.Errorf("kubelet flags %q hold %s", out.KubeletArgs, tt.forbiddenFlag)
			}
			file(t, out, tt.wantKubeconf)
		})
	}
}
