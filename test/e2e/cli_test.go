// Package e2e drives the built nodejoin binary the way a user does.
package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

type cli struct {
	t        *testing.T
	nodejoin string
	binDir   string
	state    string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	testenv.RequireIntegration(t)
	binDir := testenv.BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.Kubectl)
	// nodeadm sits beside nodejoin, as `make build` puts them, for local instances.
	exeDir := t.TempDir()
	exe := filepath.Join(exeDir, "nodejoin")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", exeDir+"/", "github.com/nodejoin/nodejoin/cmd/nodejoin", "github.com/nodejoin/nodejoin/cmd/nodeadm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nodejoin: %v\n%s", err, out)
	}
	return &cli{t: t, nodejoin: exe, binDir: binDir, state: t.TempDir()}
}

func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.CommandContext(c.t.Context(), c.nodejoin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+c.state, toolbin.EnvDir+"="+c.binDir)
	return cmd
}

func (c *cli) run(args ...string) string {
	c.t.Helper()
	out, err := c.command(args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("nodejoin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runJSON runs nodejoin, expecting it to fail when fail is set, and decodes its
// standard output, which must hold exactly one JSON value, into v.
func (c *cli) runJSON(fail bool, v any, args ...string) {
	c.t.Helper()
	cmd := c.command(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if (err != nil) != fail {
		c.t.Fatalf("nodejoin %s: %v (want failure: %v)\n%s%s", strings.Join(args, " "), err, fail, out, stderr.String())
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	if err := dec.Decode(v); err != nil {
		c.t.Fatalf("nodejoin %s: decoding its output: %v\n%s", strings.Join(args, " "), err, out)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" || dec.More() {
		c.t.Fatalf("nodejoin %s printed more than one JSON value:\n%s", strings.Join(args, " "), out)
	}
}

// assertExported checks that export logs wrote each file, not empty.
func (c *cli) assertExported(dir string, files ...string) {
	c.t.Helper()
	for _, f := range files {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			c.t.Errorf("export logs: %s missing or empty (%v)", f, err)
		}
	}
}

func (c *cli) kubectl(kubeconfig string, args ...string) string {
	c.t.Helper()
	out, err := exec.CommandContext(c.t.Context(), filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (c *cli) readState(name string) *controlplane.State {
	c.t.Helper()
	s, err := controlplane.ReadState(filepath.Join(c.state, "nodejoin", name))
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// assertGone checks that nothing of the cluster survived: no process, namespace or state.
func (c *cli) assertGone(name string, s *controlplane.State) {
	c.t.Helper()
	if s.Owner.Alive() {
		c.t.Errorf("owner process %d survived", s.Owner.PID)
	}
	for d, id := range s.Daemons {
		if id.Alive() {
			c.t.Errorf("%s (pid %d) survived", d, id.PID)
		}
	}
	if s.Namespace != "" && (netns.NS{Name: s.Namespace}).Exists() {
		c.t.Errorf("network namespace %s survived", s.Namespace)
	}
	if _, err := os.Stat(filepath.Join(c.state, "nodejoin", name)); !os.IsNotExist(err) {
		c.t.Errorf("state directory survived (%v)", err)
	}
}

// The acceptance path of the foundation: up --detach, use the cluster with kubectl,
// down, nothing left.
func TestUpDetachKubectlDown(t *testing.T) {
	c := newCLI(t)
	name := "e2e-detach"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })

	out := c.run("up", "--name", name, "--nodes", "0", "--detach")
	for _, want := range []string{"✓ starting etcd", "✓ starting kube-apiserver", "✓ starting nodejoin-controller", "is ready and runs in the background", "nodejoin down --name " + name} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	if got := c.kubectl(kubeconfig, "get", "--raw", "/readyz"); got != "ok" {
		t.Errorf("readyz = %q", got)
	}
	var v struct {
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
	}
	if err := json.Unmarshal([]byte(c.kubectl(kubeconfig, "version", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.ServerVersion.GitVersion != "v1.37.1" || v.ClientVersion.GitVersion != "v1.37.1" {
		t.Errorf("versions = server %q, client %q; want v1.37.1", v.ServerVersion.GitVersion, v.ClientVersion.GitVersion)
	}

	c.assertControllerRuns(kubeconfig, name)

	s := c.readState(name)
	if out, err := c.command("up", "--name", name, "--detach").CombinedOutput(); err == nil || !strings.Contains(string(out), "running already") {
		t.Errorf("second up: %v\n%s", err, out)
	}
	c.run("down", "--name", name)
	c.assertGone(name, s)
	if out := c.run("down", "--name", name); !strings.Contains(out, "nothing to remove") {
		t.Errorf("second down: %s", out)
	}
	if out, err := c.command("kubeconfig", "--name", name).CombinedOutput(); err == nil || !strings.Contains(string(out), "nodejoin up --name "+name) {
		t.Errorf("kubeconfig after down: %v\n%s", err, out)
	}
}

// Ctrl-C on a foreground `up` stops and removes the cluster.
func TestUpForegroundStopsOnInterrupt(t *testing.T) {
	c := newCLI(t)
	name := "e2e-fg"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })
	cmd := c.command("up", "--name", name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var seen []string
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.Contains(lines.Text(), "Press Ctrl-C") {
			break
		}
	}
	s := c.readState(name)
	if !s.Ready || !s.Running() {
		t.Fatalf("state before interrupt = %+v\n%s", s, strings.Join(seen, "\n"))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
			seen = append(seen, lines.Text())
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("up exited with %v after Ctrl-C\n%s", err, strings.Join(seen, "\n"))
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("up still running 60s after Ctrl-C")
	}
	c.assertGone(name, s)
}

// `down` cleans up after an `up` that was killed outright.
func TestDownCleansUpAfterACrash(t *testing.T) {
	c := newCLI(t)
	name := "e2e-crash"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })
	c.run("up", "--name", name, "--detach")
	s := c.readState(name)
	if err := syscall.Kill(s.Owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The daemons die with their parent, before anyone runs down.
	deadline := time.Now().Add(30 * time.Second)
	for d, id := range s.Daemons {
		for id.Alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if id.Alive() {
			t.Errorf("%s (pid %d) outlived its killed parent", d, id.PID)
		}
	}
	c.run("down", "--name", name)
	c.assertGone(name, s)
}

// assertControllerRuns checks that `up` runs nodejoin-controller in its process: its
// CRD and roles are installed, it denies a CSR of a node no instance backs, and
// kube-apiserver sends it the tokens it does not know itself.
func (c *cli) assertControllerRuns(kubeconfig, name string) {
	c.t.Helper()
	c.kubectl(kubeconfig, "get", "crd", "nodeaccessentries.nodejoin.io")
	c.kubectl(kubeconfig, "get", "clusterrole", "nodejoin:controller", "nodejoin:node-bootstrapper")

	const node = "ip-198-18-0-99.local.internal"
	csrFile := filepath.Join(c.t.TempDir(), "csr.yaml")
	manifest := fmt.Sprintf("apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: stray\nspec:\n"+
		"  signerName: kubernetes.io/kubelet-serving\n  usages: [digital signature, server auth]\n  request: %s\n",
		base64.StdEncoding.EncodeToString(testenv.CSR(c.t, "system:node:"+node, []string{node}, "198.18.0.99")))
	if err := os.WriteFile(csrFile, []byte(manifest), 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.kubectl(kubeconfig, "create", "-f", csrFile, "--as=system:node:"+node, "--as-group=system:nodes")
	var reason string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && reason == ""; time.Sleep(200 * time.Millisecond) {
		reason = c.kubectl(kubeconfig, "get", "csr", "stray", "-o", `jsonpath={.status.conditions[?(@.type=="Denied")].message}`)
	}
	if reason != "no instance is known for node "+node {
		c.t.Errorf("stray CSR: denial %q", reason)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		c.t.Fatal(err)
	}
	//nolint:gosec // G101: a forged token, made to be refused.
	anon := &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, BearerToken: "k8s-aws-v1.bm90LWEtdG9rZW4"}
	client, err := kubernetes.NewForConfig(anon)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err == nil {
		// /version is open to everyone; ask for something that needs an identity.
		_, err = client.CoreV1().Nodes().List(c.t.Context(), metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			c.t.Errorf("a forged token: %v, want Unauthorized", err)
		}
	}
	logPath := filepath.Join(c.state, "nodejoin", name, "logs", "nodejoin-controller.log")
	log, err := os.ReadFile(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	if !strings.Contains(string(log), `msg="token denied"`) {
		c.t.Errorf("%s shows no token review:\n%s", logPath, log)
	}
}

// The structured outputs: up -o json prints one object with the cluster and its nodes;
// get clusters and get nodes list what runs; diagnose node -o json prints the steps; add
// node adds one more; export logs copies every log; down removes it all.
func TestStructuredOutputsAndExportLogs(t *testing.T) {
	c := newCLI(t)
	name := "e2e-json"
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })

	var up struct {
		Name       string `json:"name"`
		Kubeconfig string `json:"kubeconfig"`
		Nodes      []struct {
			Name         string  `json:"name"`
			InstanceID   string  `json:"instanceID"`
			IP           string  `json:"ip"`
			Kubelet      string  `json:"kubelet"`
			ReadySeconds float64 `json:"readySeconds"`
		} `json:"nodes"`
	}
	c.runJSON(false, &up, "up", "--name", name, "--nodes", "1", "--kubelet", "sim", "-o", "json", "--detach")
	if up.Name != name || up.Kubeconfig != filepath.Join(c.state, "nodejoin", name, "kubeconfig") || len(up.Nodes) != 1 {
		t.Fatalf("up -o json = %+v", up)
	}
	n := up.Nodes[0]
	if n.Name == "" || !strings.HasPrefix(n.InstanceID, "i-") || n.IP == "" || n.Kubelet != "sim" || n.ReadySeconds <= 0 {
		t.Errorf("up -o json node = %+v", n)
	}

	if out := c.run("get", "clusters"); !strings.Contains(out, "NAME") || !strings.Contains(out, name+" ") || !strings.Contains(out, "running") {
		t.Errorf("get clusters:\n%s", out)
	}
	out := c.run("get", "nodes", "--name", name)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "STATE") ||
		!strings.HasPrefix(lines[1], n.Name+" ") || !strings.Contains(lines[1], n.InstanceID) || !strings.Contains(lines[1], "Ready") {
		t.Errorf("get nodes:\n%s", out)
	}

	var rep struct {
		Node  string `json:"node"`
		Steps []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"steps"`
	}
	c.runJSON(false, &rep, "diagnose", "node", "--name", name, n.Name, "-o", "json")
	if rep.Node != n.Name || len(rep.Steps) < 5 {
		t.Fatalf("diagnose node -o json = %+v", rep)
	}
	for _, s := range rep.Steps {
		if s.Status != "done" {
			t.Errorf("diagnose of a Ready node: step %+v", s)
		}
	}
	if last := rep.Steps[len(rep.Steps)-1]; last.Step != "Ready" {
		t.Errorf("last step %+v, want Ready", last)
	}

	var added []struct {
		Name string `json:"name"`
	}
	c.runJSON(false, &added, "add", "node", "--name", name, "-o", "json")
	if len(added) != 1 || added[0].Name == n.Name {
		t.Errorf("add node -o json = %+v", added)
	}
	var nodes []struct{ Name, State string }
	c.runJSON(false, &nodes, "get", "nodes", "--name", name, "-o", "json")
	if len(nodes) != 2 || nodes[0].State != "Ready" || nodes[1].State != "Ready" {
		t.Errorf("get nodes -o json = %+v", nodes)
	}

	dir := t.TempDir()
	out = c.run("export", "logs", "--name", name, dir)
	if !strings.Contains(out, "control-plane/kube-apiserver.log") || !strings.Contains(out, dir) {
		t.Errorf("export logs:\n%s", out)
	}
	c.assertExported(dir, "control-plane/kube-apiserver.log", "control-plane/etcd.log", "control-plane/nodejoin-controller.log",
		"control-plane/nodejoin.log", n.Name+"/kubelet.log", n.Name+"/instance.json", added[0].Name+"/kubelet.log")

	s := c.readState(name)
	c.run("down", "--name", name)
	c.assertGone(name, s)
}
