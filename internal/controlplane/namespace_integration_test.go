package controlplane_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

func hostAddrs(t *testing.T) []string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifaces {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			out = append(out, i.Name+" "+a.String())
		}
		if len(addrs) == 0 {
			out = append(out, i.Name)
		}
	}
	slices.Sort(out)
	return out
}

// As root the control plane runs in a namespace of its own; the host sees only a
// forwarded loopback port, and Destroy leaves nothing behind.
func TestNamespaceClusterLeavesHostNetworkAloneAndCleansUp(t *testing.T) {
	testenv.RequireIntegration(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; namespace mode must be tested there")
		}
		t.Skip("namespace mode needs root")
	}
	bin := testenv.BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.KubeControllerManager, toolbin.KubeScheduler, toolbin.Kubectl)
	before := hostAddrs(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	var progress bytes.Buffer
	c, err := controlplane.Start(t.Context(), controlplane.Options{
		Name:          "nstest",
		StateDir:      stateDir,
		BinDir:        bin,
		Network:       controlplane.NetworkNamespace,
		UnsafeNoFsync: true,
		Progress:      &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_ = controlplane.Destroy(context.Background(), stateDir)
		}
	})
	for _, step := range []string{"✓ generating certificates", "✓ creating network", "✓ starting etcd", "✓ starting kube-apiserver",
		"✓ starting kube-controller-manager", "✓ starting kube-scheduler"} {
		if !strings.Contains(progress.String(), step) {
			t.Errorf("progress lacks %q:\n%s", step, progress.String())
		}
	}
	if !strings.HasPrefix(c.Endpoint(), "https://127.0.0.1:") {
		t.Errorf("endpoint %s is not on the host's loopback", c.Endpoint())
	}
	if after := hostAddrs(t); !slices.Equal(before, after) {
		t.Errorf("host interfaces changed:\nbefore %v\nafter  %v", before, after)
	}

	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := kubectl("get", "--raw", "/readyz"); got != "ok" {
		t.Errorf("readyz = %q", got)
	}
	if got := kubectl("version"); !strings.Contains(got, "Server Version: v1.37.1") {
		t.Errorf("kubectl version:\n%s", got)
	}
	// The kubernetes service points at the bridge address, where instances reach the API.
	if got := kubectl("get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes", "-o", "jsonpath={.items[0].endpoints[0].addresses[0]}"); got != controlplane.DefaultNodeCIDR.Addr().Next().String() {
		t.Errorf("kubernetes service endpoint = %q, want the bridge address", got)
	}

	s, err := controlplane.ReadState(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Ready || s.Namespace != "nodejoin-nstest" || len(s.Daemons) != 4 {
		t.Errorf("state = %+v", s)
	}
	// Every daemon answers its health check inside the namespace, as diagnose asks it.
	hs, err := controlplane.CheckHealth(t.Context(), stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 4 {
		t.Errorf("health of %d daemons, want 4: %+v", len(hs), hs)
	}
	for _, h := range hs {
		if !h.Healthy || !h.Running {
			t.Errorf("%s: %+v", h.Name, h)
		}
	}
	if err := controlplane.Destroy(t.Context(), stateDir); err != nil {
		t.Fatal(err)
	}
	destroyed = true
	for name, id := range s.Daemons {
		if id.Alive() {
			t.Errorf("%s (pid %d) survived Destroy", name, id.PID)
		}
	}
	if (netns.NS{Name: s.Namespace}).Exists() {
		t.Errorf("namespace %s survived Destroy", s.Namespace)
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("state directory survived Destroy: %v", err)
	}
}
