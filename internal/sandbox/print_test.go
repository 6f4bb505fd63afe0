package sandbox

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/printer/printertest"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

var testCluster = Cluster{
	Name: "demo", Running: true, PID: 4242, Network: "namespace",
	Endpoint: "https://127.0.0.1:40123", Kubeconfig: "/state/nodejoin/demo/kubeconfig",
	StateDir: "/state/nodejoin/demo", LogDir: "/state/nodejoin/demo/logs",
	Nodes: []Node{
		{Name: "ip-198-18-0-11.local.internal", InstanceID: "i-0123456789abcdef0", IP: "198.18.0.11", Kubelet: "real", ReadySeconds: 7.3},
		{Name: "ip-198-18-0-12.local.internal", InstanceID: "i-0fedcba9876543210", IP: "198.18.0.12", Kubelet: "sim", ReadySeconds: 1.2},
	},
}

var testReport = &Report{
	Cluster: "demo", Node: "ip-198-18-0-13.local.internal", InstanceID: "i-0aaaaaaaaaaaaaaaa", IP: "198.18.0.13",
	Kubelet: "real", Identity: "aws-iam", AMIFamily: "AmazonLinux2023",
	Steps: []Finding{
		{Step: "instance started", Status: "done", Reason: "launched 12:14:18"},
		{Step: "nodeadm done", Status: "done", Reason: "files written, containerd and kubelet started"},
		{Step: "authenticated", Status: "failed", Reason: "the API server authenticated this kubelet as system:node:ip-198-18-0-11.local.internal, not as ip-198-18-0-13.local.internal",
			Evidence: []string{`kubelet: E1123 12:14:20.030253 "Unable to register node with API server" err="nodes is forbidden"`}},
		{Step: "Node registered", Status: "pending"},
	},
	ControlPlane: testControlPlane,
	Logs:         []LogFile{{Name: "kubelet", Path: "/var/lib/nodejoin/demo/i-0aaaaaaaaaaaaaaaa/var/log/kubelet.log"}, {Name: "controller", Path: "/state/nodejoin/demo/logs/nodejoin-controller.log"}},
}

var testControlPlane = []ComponentHealth{
	{Name: "etcd", PID: 4243, Running: true, Healthy: true, Health: "ok", Log: "/state/nodejoin/demo/logs/etcd.log"},
	{Name: "kube-apiserver", PID: 4250, Running: true, Healthy: true, Health: "ok", Log: "/state/nodejoin/demo/logs/kube-apiserver.log"},
	{Name: "kube-controller-manager", PID: 4391, Running: true, Healthy: true, Health: "ok", Restarts: 2, Log: "/state/nodejoin/demo/logs/kube-controller-manager.log"},
	{Name: "kube-scheduler", PID: 4288, Running: false, Healthy: false,
		Health:   "no answer from https://127.0.0.1:10259/healthz: dial tcp 127.0.0.1:10259: connect: connection refused",
		Restarts: 5, Log: "/state/nodejoin/demo/logs/kube-scheduler.log"},
}

func TestDiagnoseClusterOutput(t *testing.T) {
	rep := &ClusterReport{Cluster: "demo", ControlPlane: testControlPlane}
	if !rep.Failed() {
		t.Error("a report with an unhealthy scheduler is not Failed")
	}
	var text, js bytes.Buffer
	rep.WriteText(&text)
	printertest.Golden(t, "diagnose-cluster.txt", text.String())
	if err := printer.Structured(&js, printer.JSON, rep); err != nil {
		t.Fatal(err)
	}
	printertest.Golden(t, "diagnose-cluster.json", js.String())
}

func TestDiagnoseOutput(t *testing.T) {
	var text, js bytes.Buffer
	testReport.WriteText(&text)
	printertest.Golden(t, "diagnose-node.txt", text.String())
	if err := printer.Structured(&js, printer.JSON, testReport); err != nil {
		t.Fatal(err)
	}
	printertest.Golden(t, "diagnose-node.json", js.String())
}

func TestGetOutput(t *testing.T) {
	var clusters, nodes, none bytes.Buffer
	stopped := testCluster
	stopped.Name, stopped.Running, stopped.PID, stopped.Endpoint, stopped.Kubeconfig, stopped.Nodes = "crashed", false, 0, "", "", nil
	WriteClusters(&clusters, []Cluster{stopped, testCluster})
	printertest.Golden(t, "get-clusters.txt", clusters.String())
	WriteNodeStatuses(&nodes, "demo", []NodeStatus{
		{Name: "ip-198-18-0-11.local.internal", InstanceID: "i-0123456789abcdef0", IP: "198.18.0.11", Kubelet: "real", Identity: "aws-iam", State: JoinReady, Step: "Ready"},
		{Name: "ip-198-18-0-13.local.internal", InstanceID: "i-0aaaaaaaaaaaaaaaa", IP: "198.18.0.13", Kubelet: "real", Identity: "aws-iam", State: JoinFailed, Step: "authenticated"},
	})
	printertest.Golden(t, "get-nodes.txt", nodes.String())
	WriteNodeStatuses(&none, "demo", nil)
	if !strings.Contains(none.String(), "nodejoin add node --name demo") {
		t.Errorf("empty node list says %q", none.String())
	}
}

func TestEventText(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Kind: StepStarted, Step: "starting etcd"}, " • starting etcd"},
		{Event{Kind: StepDone, Step: "starting etcd", Elapsed: 1234 * time.Millisecond}, " ✓ starting etcd (1.2s)"},
		{Event{Kind: StepFailed, Step: "starting etcd", Elapsed: 2 * time.Second}, " ✗ starting etcd failed after 2s"},
		{Event{Kind: Note, Detail: "using simulated kubelets"}, " • using simulated kubelets"},
		{Event{Kind: NodeStep, Node: "n1", Step: "Ready", Elapsed: 3 * time.Second, Detail: "x"},
			" ✓ n1                               Ready                       +3s     x"},
		{Event{Kind: NodeCounts, Total: 50, Counts: []StepCount{{Step: "Ready", Nodes: 49}}}, " • 50 nodes: Ready 49"},
	}
	for _, tt := range tests {
		if got := tt.e.Line(); got != tt.want {
			t.Errorf("Line(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}

var testImageNodes = []NodeImages{
	{Node: "ip-198-18-0-11.local.internal", Instance: "i-0123456789abcdef0", Kubelet: "real", Images: []instance.Image{
		{Name: "example.com/app:v1", Digest: "sha256:5192bdbb8cbd2b33e8773eb3ebcf7cf38b5f57090546483f5f6898093e2030b4", Size: "1.1 MiB"},
		{Name: "registry.k8s.io/pause:3.10.2", Digest: "sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260", Size: "688.4 KiB"},
	}, Loaded: []string{"/state/nodejoin/demo/images/000-app.tar"}},
	{Node: "ip-198-18-0-12.local.internal", Instance: "i-0fedcba9876543210", Kubelet: "sim", Skipped: "simulated kubelet: no containerd"},
	{Node: "ip-198-18-0-13.local.internal", Instance: "i-0aaaaaaaaaaaaaaaa", Kubelet: "real",
		Error: "importing image archive /state/nodejoin/demo/images/000-app.tar: ctr images import: exit status 1: ctr: unrecognized image format"},
}

func TestImageOutput(t *testing.T) {
	var list, load, js, none bytes.Buffer
	WriteImageList(&list, "demo", testImageNodes)
	printertest.Golden(t, "image-list.txt", list.String())
	WriteImageLoad(&load, "demo", []string{"/home/me/app.tar"}, testImageNodes)
	printertest.Golden(t, "image-load.txt", load.String())
	if err := printer.Structured(&js, printer.JSON, testImageNodes); err != nil {
		t.Fatal(err)
	}
	printertest.Golden(t, "image-list.json", js.String())
	WriteImageList(&none, "demo", nil)
	printertest.Golden(t, "image-list-empty.txt", none.String())
}
