package cpnode

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

// The control-plane node's files are those of a kubelet that registers under its own
// name and the bridge's address with the control-plane taint, authenticates with the
// kubeconfig the certificate goes into (no credential plugin run, no bootstrap
// kubeconfig), and needs no cloud controller.
func TestRenderedKubelet(t *testing.T) {
	root := t.TempDir()
	cfg := Config{NodeName: "demo-control-plane", Root: root, Region: "us-west-2", Zone: "us-west-2a"}
	s := site{Name: "demo", Endpoint: "https://198.18.0.1:6443", CAPEM: []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"),
		ServiceCIDR: netip.MustParsePrefix("10.100.0.0/16"), NodeCIDR: netip.MustParsePrefix("198.18.0.0/16"), Addr: netip.MustParseAddr("198.18.0.1")}
	r, err := s.render(&cfg, "/nodejoin/demo/control-plane", "v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, a := range r.KubeletArgs {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		last[k] = v // the kubelet takes a flag's last occurrence
	}
	for flag, want := range map[string]string{
		"hostname-override":    "demo-control-plane",
		"node-ip":              "198.18.0.1",
		"register-with-taints": "node-role.kubernetes.io/control-plane=:NoSchedule,nodejoin.io/host-network-only=:NoSchedule",
		"cloud-provider":       "",
		"kubeconfig":           filepath.Join(root, "var/lib/kubelet/kubeconfig"),
		"node-labels":          "topology.kubernetes.io/region=us-west-2,topology.kubernetes.io/zone=us-west-2a,nodejoin.io/no-instance=true",
	} {
		if got, ok := last[flag]; !ok || got != want {
			t.Errorf("kubelet --%s = %q (set: %v), want %q", flag, got, ok, want)
		}
	}
	if v, ok := last["bootstrap-kubeconfig"]; ok {
		t.Errorf("kubelet --bootstrap-kubeconfig=%s: the control-plane node has no bootstrap credential", v)
	}
	if strings.Contains(last["node-labels"], "node-role.kubernetes.io") {
		t.Errorf("--node-labels %q: the kubelet refuses node-role labels; MarkControlPlane sets it", last["node-labels"])
	}
	var containerd string
	for _, f := range r.Files {
		if f.Path == "/etc/containerd/config.toml" {
			containerd = string(f.Content)
		}
	}
	for _, want := range []string{filepath.Join(root, "run/containerd/containerd.sock"), "SystemdCgroup = false", filepath.Join(root, "opt/cni/bin")} {
		if !strings.Contains(containerd, want) {
			t.Errorf("containerd config lacks %q:\n%s", want, containerd)
		}
	}
	if !slices.ContainsFunc(r.Files, func(f bootstrap.File) bool { return f.Path == "/etc/kubernetes/pki/ca.crt" }) {
		t.Error("the cluster CA is not among the node's files")
	}
}

// Each control-plane node has its own name, root, cgroup and (past the first, which is
// the cluster namespace's) namespace, so that `down` and a crashed start's cleanup
// find every one and the first's paths are never a prefix match of the second's.
func TestNodesAreNamedApart(t *testing.T) {
	for _, tt := range []struct {
		i                        int
		node, root, cgroup, nsNm string
	}{
		{0, "demo-control-plane", "control-plane", "/nodejoin/demo/control-plane", ""},
		{1, "demo-control-plane-2", "control-plane-2", "/nodejoin/demo/control-plane-2", "nodejoin-demo-cp-2"},
	} {
		if got := defaultNodeName("demo", tt.i); got != tt.node {
			t.Errorf("node %d: name %q, want %q", tt.i, got, tt.node)
		}
		if got := rootName(tt.i); got != tt.root {
			t.Errorf("node %d: root %q, want %q", tt.i, got, tt.root)
		}
		if got := cgroupRoot("demo", tt.i); got != tt.cgroup {
			t.Errorf("node %d: cgroup %q, want %q", tt.i, got, tt.cgroup)
		}
		if tt.i > 0 {
			if got := nsName("demo", tt.i); got != tt.nsNm {
				t.Errorf("node %d: namespace %q, want %q", tt.i, got, tt.nsNm)
			}
		}
	}
	if err := (&Config{}).complete(); err == nil {
		t.Error("a node without a cluster was accepted")
	}
}
