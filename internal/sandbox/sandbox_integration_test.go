package sandbox

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// startSim starts a loopback sandbox with n simulated kubelets and stops and removes it
// when the test ends.
func startSim(t testing.TB, name string, n int, progress Progress) *Sandbox {
	t.Helper()
	testenv.RequireIntegration(t)
	bin := testenv.BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.KubeControllerManager, toolbin.KubeScheduler, toolbin.Nodeadm)
	sb, err := Start(t.Context(), Options{
		Name: name, BinDir: bin, Network: controlplane.NetworkLoopback, UnsafeNoFsync: true, Control: true,
		Nodes: NodeOptions{Count: n, Kubelet: "sim"}, Progress: progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := sb.Stop(ctx); err != nil {
			t.Errorf("stopping: %v", err)
		}
		if _, err := Delete(ctx, name); err != nil {
			t.Errorf("deleting: %v", err)
		}
	})
	return sb
}

// The library's whole life: Start with nodes, then, by name as another process would,
// Get, List, AddNodesTo, Nodes, Diagnose and ExportLogs, then Stop and Delete.
func TestSandboxWithSimulatedKubelets(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var mu sync.Mutex
	var events []Event
	sb := startSim(t, "sbx", 2, func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	info := sb.Info()
	if len(info.Nodes) != 2 || info.Nodes[0].ReadySeconds <= 0 || info.Kubeconfig == "" || info.PID != os.Getpid() {
		t.Errorf("Info = %+v", info)
	}
	mu.Lock()
	for _, want := range []Event{{Kind: StepDone, Step: "starting kube-apiserver"}, {Kind: StepDone, Step: "starting kube-controller-manager"},
		{Kind: StepDone, Step: "starting kube-scheduler"}, {Kind: StepDone, Step: "starting nodejoin-controller"},
		{Kind: NodeStep, Node: info.Nodes[1].Name, Step: "Ready"}} {
		if !slices.ContainsFunc(events, func(e Event) bool { return e.Kind == want.Kind && e.Step == want.Step && e.Node == want.Node }) {
			t.Errorf("no %s event for %s %s among %+v", want.Kind, want.Node, want.Step, events)
		}
	}
	// On the loopback network node groups cannot have real kubelets: up says so.
	if !slices.ContainsFunc(events, func(e Event) bool {
		return e.Kind == Note && strings.HasPrefix(e.Detail, "node groups' instances get simulated kubelets (auto: real kubelets need") &&
			strings.Contains(e.Detail, "network namespace")
	}) {
		t.Errorf("no note on the node groups' kubelets among %+v", events)
	}
	mu.Unlock()

	got, err := Get("sbx")
	if err != nil || !got.Running || len(got.Nodes) != 2 {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if k := got.NodeGroupKubelet; k == nil || k.Kubelet != "sim" || k.Asked != NodeGroupKubeletAuto {
		t.Errorf("Get: node groups' kubelet %+v, want sim chosen by auto", k)
	}
	if cs, err := List(); err != nil || len(cs) != 1 || cs[0].Name != "sbx" {
		t.Errorf("List = %+v, %v", cs, err)
	}
	added, err := AddNodesTo(t.Context(), "sbx", NodeOptions{Count: 1}, nil)
	if err != nil || len(added) != 1 {
		t.Fatalf("AddNodesTo = %+v, %v", added, err)
	}
	var oe *OptionError
	if _, err := AddNodesTo(t.Context(), "sbx", NodeOptions{Count: 1, Identity: "bootstrap-token"}, nil); !errors.As(err, &oe) || oe.Option != "identity" {
		t.Errorf("AddNodesTo with another identity: %v", err)
	}
	nodes, err := Nodes(t.Context(), "sbx", NodesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("Nodes = %+v", nodes)
	}
	for _, n := range nodes {
		if n.State != JoinReady || n.Kubelet != "sim" {
			t.Errorf("node %+v", n)
		}
	}
	rep, err := Diagnose(t.Context(), "sbx", added[0].InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || len(rep.Notes) != 0 || rep.Steps[len(rep.Steps)-1].Step != "Ready" || rep.Steps[len(rep.Steps)-1].Status != "done" {
		t.Errorf("Diagnose = %+v", rep)
	}
	if len(rep.ControlPlane) != 4 {
		t.Errorf("Diagnose reports control plane %+v, want etcd, kube-apiserver, kube-controller-manager, kube-scheduler", rep.ControlPlane)
	}
	crep, err := DiagnoseCluster(t.Context(), "sbx")
	if err != nil {
		t.Fatal(err)
	}
	if crep.Failed() || len(crep.ControlPlane) != 4 {
		t.Errorf("DiagnoseCluster = %+v", crep)
	}
	out := t.TempDir()
	ex, err := ExportLogs("sbx", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"control-plane/kube-apiserver.log", "control-plane/etcd.log", "control-plane/kube-controller-manager.log", "control-plane/kube-scheduler.log", "control-plane/nodejoin-controller.log",
		filepath.Join(added[0].Name, "kubelet.log"), filepath.Join(added[0].Name, "instance.json")} {
		if !slices.ContainsFunc(ex.Files, func(f ExportedFile) bool { return f.Path == want && f.Bytes > 0 }) {
			t.Errorf("export lacks %s: %+v", want, ex.Files)
		}
	}
}

var benchNodes = flag.Int("sandbox.nodes", 20, "how many simulated nodes BenchmarkStart launches")

// BenchmarkStart measures Start of a loopback sandbox with -sandbox.nodes simulated
// kubelets: control plane, controller, and every node Ready.
//
// Metrics: s/start (Start's whole time), s/slowest-node (the last node's time to Ready).
func BenchmarkStart(b *testing.B) {
	b.Setenv("XDG_STATE_HOME", b.TempDir())
	testenv.RequireIntegration(b)
	bin := testenv.BinDir(b, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.Nodeadm)
	var total, slowest time.Duration
	for range b.N {
		start := time.Now()
		sb, err := Start(b.Context(), Options{Name: "bench", BinDir: bin, Network: controlplane.NetworkLoopback, UnsafeNoFsync: true,
			Nodes: NodeOptions{Count: *benchNodes, Kubelet: "sim"}})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		for _, n := range sb.Info().Nodes {
			slowest = max(slowest, time.Duration(n.ReadySeconds*float64(time.Second)))
		}
		b.StopTimer()
		if err := sb.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := Delete(context.Background(), "bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
	b.ReportMetric(slowest.Seconds(), "s/slowest-node")
	b.ReportMetric(float64(*benchNodes), "nodes")
}
