package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// readPIDFile reads a daemon's identity as nodeadm records it: "PID START".
func readPIDFile(t *testing.T, path string) process.Identity {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		t.Fatalf("%s: %q is not \"PID START\"", path, data)
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %q is not \"PID START\"", path, data)
	}
	return process.Identity{PID: pid, Start: start}
}

// The whole control plane: up starts kube-controller-manager and kube-scheduler, which
// diagnose cluster reports healthy; the default service account appears; a Node whose
// kubelet is killed turns NotReady within the node-monitor grace period; down leaves
// no process behind.
func TestKilledKubeletTurnsNodeNotReady(t *testing.T) {
	requireRealKubelets(t)
	c := newCLI(t)
	name := "e2e-cp"
	ifaces := hostInterfaces(t)
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })

	out := c.run("up", "--name", name, "--nodes", "1", "--detach")
	for _, want := range []string{"✓ starting kube-controller-manager", "✓ starting kube-scheduler", "1 node(s) Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		ControlPlane []struct {
			Name     string `json:"name"`
			Healthy  bool   `json:"healthy"`
			Running  bool   `json:"running"`
			PID      int    `json:"pid"`
			Restarts int    `json:"restarts"`
			Log      string `json:"log"`
		} `json:"controlPlane"`
	}
	c.runJSON(false, &rep, "diagnose", "cluster", "--name", name, "-o", "json")
	var names []string
	for _, h := range rep.ControlPlane {
		names = append(names, h.Name)
		if !h.Healthy || !h.Running || h.PID == 0 || h.Restarts != 0 || h.Log == "" {
			t.Errorf("diagnose cluster: %+v", h)
		}
	}
	if got := strings.Join(names, ","); got != "etcd,kube-apiserver,kube-controller-manager,kube-scheduler" {
		t.Errorf("diagnose cluster components = %s", got)
	}

	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		out, err := exec.CommandContext(t.Context(), filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
			"get", "serviceaccount", "default", "-n", "default", "-o", "name").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "serviceaccount/default" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no default service account in namespace default: %v\n%s", err, out)
		}
	}

	recs, err := instance.ReadRecords(filepath.Join(c.state, "nodejoin", name, "instances"))
	if err != nil || len(recs) != 1 {
		t.Fatalf("instance records: %v, %v", recs, err)
	}
	rec := recs[0]
	pm := filepath.Join(rec.Root, "run", "nodeadm")
	kubelet := readPIDFile(t, filepath.Join(pm, "kubelet.pid"))
	containerd := readPIDFile(t, filepath.Join(pm, "containerd.pid"))
	if !kubelet.Alive() || !containerd.Alive() {
		t.Fatalf("kubelet %+v or containerd %+v is not running", kubelet, containerd)
	}
	if err := syscall.Kill(kubelet.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// node-monitor-grace-period is 50s; the bound adds a generous margin for a loaded
	// machine and is no performance assertion.
	jsonpath := `jsonpath={.status.conditions[?(@.type=="Ready")].status}`
	for deadline := killed.Add(50*time.Second + 2*time.Minute); ; time.Sleep(time.Second) {
		status := strings.TrimSpace(c.kubectl(kubeconfig, "get", "node", rec.NodeName, "-o", jsonpath))
		if status != "True" {
			t.Logf("node %s Ready=%s %s after its kubelet was killed", rec.NodeName, status, time.Since(killed).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still Ready %s after its kubelet was killed", rec.NodeName, time.Since(killed).Round(time.Second))
		}
	}

	s := c.readState(name)
	if len(s.Daemons) != 4 {
		t.Errorf("state records daemons %v, want etcd, kube-apiserver, kube-controller-manager, kube-scheduler", s.Daemons)
	}
	c.run("down", "--name", name)
	c.assertGone(name, s)
	if containerd.Alive() {
		t.Errorf("containerd (pid %d) survived down", containerd.PID)
	}
	c.assertNothingLeft(name, ifaces)
}
