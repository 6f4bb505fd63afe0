package controlplane

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestSchedulerConfigRendering(t *testing.T) {
	got, err := renderSchedulerConfig("/state/nodejoin/demo/kube-scheduler.kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "kube-scheduler.yaml")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("kube-scheduler configuration differs from %s (run with -update to accept):\n%s", path, got)
	}
}

func TestComponentPortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		port, err := componentPort()
		if err != nil {
			t.Fatal(err)
		}
		if low-10000 >= 1000 && (port < 10000 || port >= low) {
			t.Errorf("port %d is outside [10000, %d)", port, low)
		}
	}
}

// Control-plane nodes take the bridge's address and the VPC's reserved fourth one,
// which the local EC2 never gives an instance; there is no third.
func TestControlPlaneNodeAddr(t *testing.T) {
	o := Options{NodeCIDR: DefaultNodeCIDR}
	for i, want := range []string{"198.18.0.1", "198.18.0.3"} {
		got, err := o.ControlPlaneNodeAddr(i)
		if err != nil || got.String() != want {
			t.Errorf("node %d: %v, %v; want %s", i, got, err, want)
		}
	}
	if _, err := o.ControlPlaneNodeAddr(MaxControlPlaneNodes); err == nil {
		t.Errorf("node %d has an address", MaxControlPlaneNodes+1)
	}
}
