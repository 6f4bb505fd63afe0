package nodejoin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

var testCluster = sandbox.Cluster{
	Name: "demo", Running: true, PID: 4242, Network: "namespace",
	Endpoint: "https://127.0.0.1:40123", Kubeconfig: "/state/nodejoin/demo/kubeconfig",
	StateDir: "/state/nodejoin/demo", LogDir: "/state/nodejoin/demo/logs",
	Nodes: []sandbox.Node{
		{Name: "ip-198-18-0-11.local.internal", InstanceID: "i-0123456789abcdef0", IP: "198.18.0.11", Kubelet: "real", ReadySeconds: 7.3},
		{Name: "ip-198-18-0-12.local.internal", InstanceID: "i-0fedcba9876543210", IP: "198.18.0.12", Kubelet: "sim", ReadySeconds: 1.2},
	},
}

func TestUpSummaryOutput(t *testing.T) {
	tests := []struct {
		file, output string
		detached     bool
	}{
		{"up-foreground.txt", outputText, false},
		{"up-detached.txt", outputText, true},
		{"up.json", outputJSON, true},
		{"up.yaml", outputYAML, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var out bytes.Buffer
			o := &upOptions{output: tt.output}
			if err := o.printSummary(&out, testCluster, tt.detached, nil); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.file, out.String())
		})
	}
}

var testReport = &sandbox.Report{
	Cluster: "demo", Node: "ip-198-18-0-13.local.internal", InstanceID: "i-0aaaaaaaaaaaaaaaa", IP: "198.18.0.13",
	Kubelet: "real", Identity: "aws-iam", AMIFamily: "AmazonLinux2023",
	Steps: []sandbox.Finding{
		{Step: "instance started", Status: "done", Reason: "launched 12:14:18"},
		{Step: "nodeadm done", Status: "done", Reason: "files written, containerd and kubelet started"},
		{Step: "authenticated", Status: "failed", Reason: "the API server authenticated this kubelet as system:node:ip-198-18-0-11.local.internal, not as ip-198-18-0-13.local.internal",
			Evidence: []string{`kubelet: E1123 12:14:20.030253 "Unable to register node with API server" err="nodes is forbidden"`}},
		{Step: "Node registered", Status: "pending"},
	},
	ControlPlane: testControlPlane,
	Logs:         []sandbox.LogFile{{Name: "kubelet", Path: "/var/lib/nodejoin/demo/i-0aaaaaaaaaaaaaaaa/var/log/kubelet.log"}, {Name: "controller", Path: "/state/nodejoin/demo/logs/nodejoin-controller.log"}},
}

var testControlPlane = []sandbox.ComponentHealth{
	{Name: "etcd", PID: 4243, Running: true, Healthy: true, Health: "ok", Log: "/state/nodejoin/demo/logs/etcd.log"},
	{Name: "kube-apiserver", PID: 4250, Running: true, Healthy: true, Health: "ok", Log: "/state/nodejoin/demo/logs/kube-apiserver.log"},
	{Name: "kube-controller-manager", PID: 4391, Running: true, Healthy: true, Health: "ok", Restarts: 2, Log: "/state/nodejoin/demo/logs/kube-controller-manager.log"},
	{Name: "kube-scheduler", PID: 4288, Running: false, Healthy: false,
		Health:   "no answer from https://127.0.0.1:10259/healthz: dial tcp 127.0.0.1:10259: connect: connection refused",
		Restarts: 5, Log: "/state/nodejoin/demo/logs/kube-scheduler.log"},
}

func TestDiagnoseClusterOutput(t *testing.T) {
	rep := &sandbox.ClusterReport{Cluster: "demo", ControlPlane: testControlPlane}
	if !rep.Failed() {
		t.Error("a report with an unhealthy scheduler is not Failed")
	}
	var text, js bytes.Buffer
	printClusterReport(&text, rep)
	golden(t, "diagnose-cluster.txt", text.String())
	if err := printStructured(&js, outputJSON, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "diagnose-cluster.json", js.String())
}

func TestDiagnoseOutput(t *testing.T) {
	var text, js bytes.Buffer
	printReport(&text, testReport)
	golden(t, "diagnose-node.txt", text.String())
	if err := printStructured(&js, outputJSON, testReport); err != nil {
		t.Fatal(err)
	}
	golden(t, "diagnose-node.json", js.String())
}

func TestGetOutput(t *testing.T) {
	var clusters, nodes, none bytes.Buffer
	stopped := testCluster
	stopped.Name, stopped.Running, stopped.PID, stopped.Endpoint, stopped.Kubeconfig, stopped.Nodes = "crashed", false, 0, "", "", nil
	printClusters(&clusters, []sandbox.Cluster{stopped, testCluster})
	golden(t, "get-clusters.txt", clusters.String())
	printNodes(&nodes, "demo", []sandbox.NodeStatus{
		{Name: "ip-198-18-0-11.local.internal", InstanceID: "i-0123456789abcdef0", IP: "198.18.0.11", Kubelet: "real", Identity: "aws-iam", State: sandbox.JoinReady, Step: "Ready"},
		{Name: "ip-198-18-0-13.local.internal", InstanceID: "i-0aaaaaaaaaaaaaaaa", IP: "198.18.0.13", Kubelet: "real", Identity: "aws-iam", State: sandbox.JoinFailed, Step: "authenticated"},
	})
	golden(t, "get-nodes.txt", nodes.String())
	printNodes(&none, "demo", nil)
	if !strings.Contains(none.String(), "nodejoin add node --name demo") {
		t.Errorf("empty node list says %q", none.String())
	}
}

func TestEventText(t *testing.T) {
	tests := []struct {
		e    sandbox.Event
		want string
	}{
		{sandbox.Event{Kind: sandbox.StepStarted, Step: "starting etcd"}, " • starting etcd"},
		{sandbox.Event{Kind: sandbox.StepDone, Step: "starting etcd", Elapsed: 1234 * time.Millisecond}, " ✓ starting etcd (1.2s)"},
		{sandbox.Event{Kind: sandbox.StepFailed, Step: "starting etcd", Elapsed: 2 * time.Second}, " ✗ starting etcd failed after 2s"},
		{sandbox.Event{Kind: sandbox.Note, Detail: "using simulated kubelets"}, " • using simulated kubelets"},
		{sandbox.Event{Kind: sandbox.NodeStep, Node: "n1", Step: "Ready", Elapsed: 3 * time.Second, Detail: "x"},
			" ✓ n1                               Ready                       +3s     x"},
		{sandbox.Event{Kind: sandbox.NodeCounts, Total: 50, Counts: []sandbox.StepCount{{Step: "Ready", Nodes: 49}}}, " • 50 nodes: Ready 49"},
	}
	for _, tt := range tests {
		if got := eventText(tt.e); got != tt.want {
			t.Errorf("eventText(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && strings.TrimSpace(c.Example) == "" {
			t.Errorf("`%s --help` has no Example section", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCommand())
}

func TestGetClustersOfAnEmptyStateRoot(t *testing.T) {
	for _, tt := range []struct{ output, want string }{{"text", "No clusters."}, {"json", "[]\n"}} {
		out, err := run(t, "get", "clusters", "-o", tt.output)
		if err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("get clusters -o %s = %q, %v", tt.output, out, err)
		}
	}
}
