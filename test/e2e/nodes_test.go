package e2e

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// requireRealKubelets skips unless this machine can run real kubelets in local
// instances: root, containerd, runc and the CNI plugins (`make deps` installs them).
func requireRealKubelets(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real kubelets need root")
	}
	for _, bin := range []string{"containerd", "runc", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("real kubelets need %s (make deps)", bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Skip("real kubelets need the CNI plugins (make deps)")
	}
}

// hostInterfaces lists the host namespace's interface names and the pod network
// namespaces (cni-*) mounted in the host's /run/netns.
func hostInterfaces(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	// Pods' network namespaces too: containerd mounts them at /run/netns/cni-* unless
	// told otherwise, and a node stopped with pods on it must not leave them behind.
	entries, _ := os.ReadDir(netns.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") {
			names = append(names, "netns/"+e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// upCluster starts a detached cluster of real kubelets named name (`up --name name
// --detach` and args), downs it when the test ends, and returns its admin kubeconfig
// and the host's interfaces from before it started (for assertNothingLeft).
func upCluster(t *testing.T, name string, args ...string) (c *cli, kubeconfig string, ifaces []string) {
	t.Helper()
	requireRealKubelets(t)
	c = newCLI(t)
	ifaces = hostInterfaces(t)
	t.Cleanup(func() {
		// Not c.command: the test's context is cancelled before cleanups run, and a
		// cancelled `down` would leave a failed test's cluster running.
		down := exec.Command(c.nodejoin, "down", "--name", name) //nolint:noctx // see above
		down.Env = c.command().Env
		_ = down.Run()
	})
	c.run(append([]string{"up", "--name", name, "--detach"}, args...)...)
	return c, strings.TrimSpace(c.run("kubeconfig", "--name", name)), ifaces
}

// assertNothingLeft checks, after `down`, that no process, network namespace, host
// interface, mount or cgroup of the cluster survived, nor its state directory.
func (c *cli) assertNothingLeft(name string, ifacesBefore []string) {
	c.t.Helper()
	dir := filepath.Join(c.state, "nodejoin", name)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && (strings.Contains(string(data), dir) || strings.Contains(string(data), "/var/lib/nodejoin/"+name+"/")) {
			c.t.Errorf("process %s survived: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	entries, _ := os.ReadDir(netns.Dir)
	for _, e := range entries {
		if e.Name() == "nodejoin-"+name || strings.HasPrefix(e.Name(), "nodejoin-"+name+"-") {
			c.t.Errorf("network namespace %s survived", e.Name())
		}
	}
	if after := hostInterfaces(c.t); !slices.Equal(after, ifacesBefore) {
		c.t.Errorf("host interfaces or pod network namespaces changed: before %v, after %v", ifacesBefore, after)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		c.t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir) || strings.Contains(sc.Text(), "/var/lib/nodejoin/"+name+"/") {
			c.t.Errorf("mount survived: %s", sc.Text())
		}
	}
	_ = f.Close()
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/nodejoin/" + name)
	for _, cg := range cgroups {
		c.t.Errorf("cgroup survived: %s", cg)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		c.t.Errorf("state directory survived (%v)", err)
	}
	if _, err := os.Stat(filepath.Join("/var/lib/nodejoin", name)); !os.IsNotExist(err) {
		c.t.Errorf("instance roots survived (%v)", err)
	}
}

type nodeList struct {
	Items []struct {
		Metadata struct{ Name string } `json:"metadata"`
		Status   struct {
			Conditions []struct{ Type, Status string }  `json:"conditions"`
			Addresses  []struct{ Type, Address string } `json:"addresses"`
		} `json:"status"`
	} `json:"items"`
}

type csrList struct {
	Items []struct {
		Metadata struct{ Name string } `json:"metadata"`
		Spec     struct {
			SignerName string `json:"signerName"`
			Username   string `json:"username"`
		} `json:"spec"`
		Status struct {
			Certificate []byte `json:"certificate"`
			Conditions  []struct {
				Type, Reason, Message string
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// nodeTaints returns each Node's taint keys.
func (c *cli) nodeTaints(kubeconfig string) map[string][]string {
	c.t.Helper()
	var nl struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Spec     struct {
				Taints []struct{ Key string } `json:"taints"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(c.kubectl(kubeconfig, "get", "nodes", "-o", "json")), &nl); err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range nl.Items {
		out[n.Metadata.Name] = []string{}
		for _, t := range n.Spec.Taints {
			out[n.Metadata.Name] = append(out[n.Metadata.Name], t.Key)
		}
	}
	return out
}

// readyNodes returns the names of the Ready nodes.
func (c *cli) readyNodes(kubeconfig string) []string {
	c.t.Helper()
	var nl nodeList
	if err := json.Unmarshal([]byte(c.kubectl(kubeconfig, "get", "nodes", "-o", "json")), &nl); err != nil {
		c.t.Fatal(err)
	}
	var ready []string
	for _, n := range nl.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready = append(ready, n.Metadata.Name)
			}
		}
	}
	slices.Sort(ready)
	return ready
}

// assertIssuedByClusterCA checks every CSR of signer is approved and carries a
// certificate that the cluster CA verifies, and returns their requesters.
func (c *cli) assertIssuedByClusterCA(kubeconfig, name, signer string) []string {
	c.t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(c.state, "nodejoin", name, "pki", "ca.crt"))
	if err != nil {
		c.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	var cl csrList
	if err := json.Unmarshal([]byte(c.kubectl(kubeconfig, "get", "csr", "-o", "json")), &cl); err != nil {
		c.t.Fatal(err)
	}
	var users []string
	for _, r := range cl.Items {
		if r.Spec.SignerName != signer {
			continue
		}
		users = append(users, r.Spec.Username)
		block, _ := pem.Decode(r.Status.Certificate)
		if block == nil {
			c.t.Errorf("CSR %s (%s) has no certificate: %+v", r.Metadata.Name, r.Spec.Username, r.Status.Conditions)
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			c.t.Fatal(err)
		}
		usage := x509.ExtKeyUsageServerAuth
		if signer != "kubernetes.io/kubelet-serving" {
			usage = x509.ExtKeyUsageClientAuth
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			c.t.Errorf("CSR %s: certificate not issued by the cluster CA: %v", r.Metadata.Name, err)
		}
	}
	return users
}

// runFail runs nodejoin expecting it to fail, and returns its output.
func (c *cli) runFail(args ...string) string {
	c.t.Helper()
	out, err := c.command(args...).CombinedOutput()
	if err == nil {
		c.t.Fatalf("nodejoin %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// The acceptance path of local instances with AWS-style identity: two real kubelets
// join and serve through verified TLS; a third instance presenting the first one's
// credentials and a fourth asking for a certificate with the first one's address never
// become usable nodes, and diagnose names why; down leaves nothing behind.
func TestRealKubeletsJoinWithAWSIdentity(t *testing.T) {
	requireRealKubelets(t)
	c := newCLI(t)
	name := "e2e-aws"
	ifaces := hostInterfaces(t)
	t.Cleanup(func() {
		// Not c.command: the test's context is cancelled before cleanups run, and a
		// cancelled `down` would leave a failed test's cluster running.
		down := exec.Command(c.nodejoin, "down", "--name", name) //nolint:noctx // see above
		down.Env = c.command().Env
		_ = down.Run()
	})

	out := c.run("up", "--name", name, "--nodes", "2", "--detach")
	const n1, n2 = "ip-198-18-0-11.local.internal", "ip-198-18-0-12.local.internal"
	for _, want := range []string{"real kubelet, aws-iam identity, AmazonLinux2023 user data", n1 + " ", "serving certificate issued", "NODE", "READY AFTER", "2 node(s) Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	if got := c.readyNodes(kubeconfig); !slices.Equal(got, []string{n1, n2}) {
		t.Fatalf("Ready nodes = %v, want %s and %s", got, n1, n2)
	}
	users := c.assertIssuedByClusterCA(kubeconfig, name, "kubernetes.io/kubelet-serving")
	slices.Sort(users)
	if !slices.Equal(users, []string{"system:node:" + n1, "system:node:" + n2}) {
		t.Errorf("serving CSRs from %v", users)
	}
	for _, n := range []string{n1, n2} {
		// The API server verifies the kubelet's serving certificate against the cluster CA.
		if got := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/nodes/"+n+"/proxy/healthz"); got != "ok" {
			t.Errorf("%s healthz through the API server = %q", n, got)
		}
	}
	diag := c.run("diagnose", "node", "--name", name, n1)
	if strings.Contains(diag, "✗") || !strings.Contains(diag, "✓ Ready") {
		t.Errorf("diagnose of a healthy node:\n%s", diag)
	}

	// Stolen credentials: the instance's IMDS hands out node 1's role credentials.
	out = c.runFail("add", "node", "--name", name, "--credentials-of", n1, "--timeout", "90s")
	const n3 = "ip-198-18-0-13.local.internal"
	if !strings.Contains(out, n3) || !strings.Contains(out, "belong to another instance") {
		t.Errorf("node add with stolen credentials: want a failure naming %s and the reason:\n%s", n3, out)
	}
	diag = c.runFail("diagnose", "node", "--name", name, n3)
	for _, want := range []string{"✗ authenticated", "as system:node:" + n1, "belong to another instance", "evidence: kubelet:"} {
		if !strings.Contains(diag, want) {
			t.Errorf("diagnose of the stolen-credentials node lacks %q:\n%s", want, diag)
		}
	}
	var rep struct {
		Node  string `json:"node"`
		Steps []struct{ Step, Status, Reason string }
	}
	c.runJSON(true, &rep, "diagnose", "node", "--name", name, n3, "-o", "json")
	if i := slices.IndexFunc(rep.Steps, func(s struct{ Step, Status, Reason string }) bool { return s.Step == "authenticated" }); rep.Node != n3 || i < 0 ||
		rep.Steps[i].Status != "failed" || !strings.Contains(rep.Steps[i].Reason, "belong to another instance") {
		t.Errorf("diagnose -o json of the stolen-credentials node = %+v", rep)
	}

	// A foreign address: the kubelet asks for a serving certificate with node 1's IP.
	out = c.runFail("add", "node", "--name", name, "--claim-address", n1, "--timeout", "90s")
	const n4 = "ip-198-18-0-14.local.internal"
	if !strings.Contains(out, n4) || !strings.Contains(out, "198.18.0.11") || !strings.Contains(out, "is not an address of instance") {
		t.Errorf("node add claiming node 1's address: want a failure naming %s and the foreign address:\n%s", n4, out)
	}
	// The node initializer and the CSR approver each refuse it; diagnose shows both
	// once the kubelet has asked for its serving certificate.
	want := []string{"✗ Node initialized", "198.18.0.11 (InternalIP) that the kubelet reports is not an address of instance",
		"✗ serving CSR approved", "denied: IP SAN 198.18.0.11 is not an address of instance"}
	for deadline := time.Now().Add(60 * time.Second); ; {
		diag = c.runFail("diagnose", "node", "--name", name, n4)
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(diag, w) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("diagnose of the foreign-address node lacks %q:\n%s", missing, diag)
			break
		}
		time.Sleep(time.Second)
	}
	// Neither hostile node can take workloads: the node initializer leaves the one that
	// claims a foreign address tainted, and the other never registered.
	taints := c.nodeTaints(kubeconfig)
	if !slices.Contains(taints[n4], "node.cloudprovider.kubernetes.io/uninitialized") {
		t.Errorf("%s lost its uninitialized taint: %v", n4, taints[n4])
	}
	if _, ok := taints[n3]; ok {
		t.Errorf("%s registered a Node", n3)
	}
	for _, n := range []string{n1, n2} {
		if slices.Contains(taints[n], "node.cloudprovider.kubernetes.io/uninitialized") {
			t.Errorf("%s was not initialized: %v", n, taints[n])
		}
	}
	if ev := c.kubectl(kubeconfig, "get", "events", "--field-selector", "involvedObject.name="+n4+",reason=NodeNotInitialized", "-o", "jsonpath={.items[*].message}"); !strings.Contains(ev, "198.18.0.11") {
		t.Errorf("no NodeNotInitialized event naming the foreign address: %q", ev)
	}

	// Another user-data format joins the same cluster.
	out = c.run("add", "node", "--name", name, "--ami-family", "AmazonLinux2")
	if !strings.Contains(out, "AmazonLinux2 user data") || !strings.Contains(out, "ip-198-18-0-15.local.internal") {
		t.Errorf("add node --ami-family AmazonLinux2:\n%s", out)
	}

	// Every log of every node, and of the control plane, in one directory.
	dir := t.TempDir()
	c.run("export", "logs", "--name", name, dir)
	c.assertExported(dir, "control-plane/kube-apiserver.log", "control-plane/etcd.log", "control-plane/nodejoin-controller.log",
		n1+"/nodeadm.log", n1+"/kubelet.log", n1+"/containerd.log", n3+"/kubelet.log")

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

// The same with bootstrap tokens (and Bottlerocket user data): the client certificate
// comes through the CSR flow too.
func TestRealKubeletsJoinWithBootstrapTokens(t *testing.T) {
	requireRealKubelets(t)
	c := newCLI(t)
	name := "e2e-token"
	ifaces := hostInterfaces(t)
	t.Cleanup(func() {
		// Not c.command: the test's context is cancelled before cleanups run, and a
		// cancelled `down` would leave a failed test's cluster running.
		down := exec.Command(c.nodejoin, "down", "--name", name) //nolint:noctx // see above
		down.Env = c.command().Env
		_ = down.Run()
	})

	out := c.run("up", "--name", name, "--nodes", "2", "--identity", "bootstrap-token", "--ami-family", "Bottlerocket", "--detach")
	for _, want := range []string{"bootstrap-token identity, Bottlerocket user data", "client certificate issued", "2 node(s) Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	const n1, n2 = "ip-198-18-0-11.local.internal", "ip-198-18-0-12.local.internal"
	if got := c.readyNodes(kubeconfig); !slices.Equal(got, []string{n1, n2}) {
		t.Fatalf("Ready nodes = %v", got)
	}
	clients := c.assertIssuedByClusterCA(kubeconfig, name, "kubernetes.io/kube-apiserver-client-kubelet")
	if len(clients) != 2 {
		t.Errorf("client CSRs from %v, want two", clients)
	}
	for _, u := range clients {
		if !strings.HasPrefix(u, "system:bootstrap:") {
			t.Errorf("client CSR requested by %s, want a bootstrap token user", u)
		}
	}
	c.assertIssuedByClusterCA(kubeconfig, name, "kubernetes.io/kubelet-serving")
	for _, n := range []string{n1, n2} {
		if got := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/nodes/"+n+"/proxy/healthz"); got != "ok" {
			t.Errorf("%s healthz through the API server = %q", n, got)
		}
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

// `down` cleans up instances after their `up` was killed outright: the kubelets and
// containerd run in sessions of their own and outlive it.
func TestDownCleansUpInstancesAfterACrash(t *testing.T) {
	requireRealKubelets(t)
	c := newCLI(t)
	name := "e2e-crash-nodes"
	ifaces := hostInterfaces(t)
	t.Cleanup(func() {
		// Not c.command: the test's context is cancelled before cleanups run, and a
		// cancelled `down` would leave a failed test's cluster running.
		down := exec.Command(c.nodejoin, "down", "--name", name) //nolint:noctx // see above
		down.Env = c.command().Env
		_ = down.Run()
	})
	c.run("up", "--name", name, "--nodes", "1", "--detach")
	s := c.readState(name)
	if err := syscall.Kill(s.Owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for s.Owner.Alive() {
		time.Sleep(50 * time.Millisecond)
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

// Fifty simulated kubelets join one cluster through the same webhook, approver, signer
// and node initializer, and all become Ready.
func TestFiftySimulatedKubeletsJoin(t *testing.T) {
	c := newCLI(t)
	name := "e2e-sim"
	t.Cleanup(func() {
		// Not c.command: the test's context is cancelled before cleanups run, and a
		// cancelled `down` would leave a failed test's cluster running.
		down := exec.Command(c.nodejoin, "down", "--name", name) //nolint:noctx // see above
		down.Env = c.command().Env
		_ = down.Run()
	})
	out := c.run("up", "--name", name, "--nodes", "50", "--kubelet", "sim", "--detach")
	if !strings.Contains(out, "50 node(s) Ready") {
		t.Errorf("up output:\n%s", out)
	}
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	if got := c.readyNodes(kubeconfig); len(got) != 50 {
		t.Errorf("%d Ready nodes, want 50", len(got))
	}
	if users := c.assertIssuedByClusterCA(kubeconfig, name, "kubernetes.io/kubelet-serving"); len(users) != 50 {
		t.Errorf("%d serving CSRs, want 50", len(users))
	}
	for n, taints := range c.nodeTaints(kubeconfig) {
		if slices.Contains(taints, "node.cloudprovider.kubernetes.io/uninitialized") {
			t.Errorf("%s was not initialized", n)
		}
	}
	s := c.readState(name)
	c.run("down", "--name", name)
	c.assertGone(name, s)
}
