package nodeadm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/process"
)

const seeds = "../../userdata/testdata/seeds/"

// cloudFor serves IMDS for one instance with userData, and EKS DescribeCluster for the
// seed clusters, and points the AWS SDK at both.
func cloudFor(tb testing.TB, userData []byte) {
	tb.Helper()
	inst := localaws.Instance{Type: "m5.large", PrivateIPv4: "198.18.0.11", VPCIPv4CIDRs: []string{"198.18.0.0/16"}, UserData: userData}
	if err := localaws.InstanceDefaults(&inst); err != nil {
		tb.Fatal(err)
	}
	imds := httptest.NewServer(localaws.NewIMDS(inst, nil))
	tb.Cleanup(imds.Close)
	ca, err := os.ReadFile(seeds + "ca.pem")
	if err != nil {
		tb.Fatal(err)
	}
	eks := httptest.NewServer(localaws.NewEKS(localaws.Cluster{
		Name: "bys-dev-eks-main", Endpoint: "https://bys.example", CertificatePEM: ca, ServiceIPv4CIDR: "172.20.0.0/16", IPFamily: "ipv4",
	}))
	tb.Cleanup(eks.Close)
	tb.Setenv(bootstrap.EnvIMDSEndpoint, imds.URL)
	tb.Setenv("AWS_ENDPOINT_URL_EKS", eks.URL)
	tb.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCAL")
	tb.Setenv("AWS_SECRET_ACCESS_KEY", "local-secret")
}

func run(tb testing.TB, args ...string) (string, error) {
	tb.Helper()
	var out bytes.Buffer
	err := Run(context.Background(), args, &out, &out)
	return out.String(), err
}

func seed(tb testing.TB, name string) []byte {
	tb.Helper()
	matches, _ := filepath.Glob(seeds + name + "*")
	if len(matches) != 1 {
		tb.Fatalf("seed %s: %v", name, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestInitWritesTheNodeFilesOnce(t *testing.T) {
	cloudFor(t, seed(t, "006_"))
	root := t.TempDir()
	out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, p := range []string{bootstrap.CAPath, bootstrap.KubeletConfigPath, bootstrap.KubeletDropInPath, bootstrap.KubeconfigPath, bootstrap.KubeletEnvPath, bootstrap.ContainerdConfigPath} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s not written: %v", p, err)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletConfigPath))
	// m5.large: 29 pods → 574Mi; the providerID names the emulated instance.
	for _, want := range []string{`"maxPods": 29`, `"memory": "574Mi"`, `"providerID": "aws:///us-west-2a/i-`, `"172.20.0.10"`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	dropIn, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletDropInPath))
	if !strings.Contains(string(dropIn), `"maxPods": 17`) {
		t.Errorf("drop-in lacks the user's maxPods:\n%s", dropIn)
	}
	env, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletEnvPath))
	if !strings.Contains(string(env), "--hostname-override=ip-198-18-0-11.us-west-2.compute.internal") || !strings.Contains(string(env), "--node-labels=eks.amazonaws.com/nodegroup-image=ami-057051082a0861071") {
		t.Errorf("environment = %s", env)
	}

	again, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(again, "wrote") || !strings.Contains(again, "already up to date") {
		t.Errorf("second init changed files:\n%s", again)
	}
}

func TestInitDescribesAClusterNamedOnly(t *testing.T) {
	cloudFor(t, seed(t, "002_"))
	root := t.TempDir()
	out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	kc, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeconfigPath))
	if !strings.Contains(string(kc), "server: https://bys.example") || !strings.Contains(string(kc), "- bys-dev-eks-main") {
		t.Errorf("kubeconfig:\n%s", kc)
	}
}

func TestInitRefusesAnInvalidConfigAndKeepsFiles(t *testing.T) {
	cloudFor(t, seed(t, "006_"))
	root := t.TempDir()
	if out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletConfigPath))
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    cidr: 10.0.0.0/8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1", "-c", "imds://user-data", "-c", "file://"+bad)
	if err == nil || !strings.Contains(err.Error(), "spec.cluster.cidr") {
		t.Fatalf("init with a VPC CIDR: %v\n%s", err, out)
	}
	after, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletConfigPath))
	if !bytes.Equal(before, after) {
		t.Error("a failed init changed config.json")
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	typo := write("typo.yaml", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name-not-real: c\n")
	out, err := run(t, "config", "check", "-c", "file://"+typo)
	if err == nil || !strings.Contains(err.Error(), typo+", line 5: field spec.cluster.name-not-real: unknown field (did you mean \"name\"?)") {
		t.Errorf("typo: %v\n%s", err, out)
	}
	incomplete := write("incomplete.yaml", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: c\n")
	out, err = run(t, "config", "check", "-c", "file://"+incomplete)
	if err == nil || !strings.Contains(out, "spec.cluster.apiServerEndpoint: Required value") || !strings.Contains(out, "spec.cluster.cidr: Required value") {
		t.Errorf("incomplete: %v\n%s", err, out)
	}
	out, err = run(t, "config", "check", "-c", "file://"+seeds+"004_seed001_al2023-nodeconfig-required-fields.yaml")
	if err != nil || !strings.Contains(out, "ok: cluster my-cluster") {
		t.Errorf("valid seed: %v\n%s", err, out)
	}
	if _, err := run(t, "config", "check", "-c", "ftp://x"); err == nil || !strings.Contains(err.Error(), `unsupported scheme "ftp"`) {
		t.Errorf("bad scheme: %v", err)
	}
}

func TestConfigDumpMergesADirectory(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.yaml":     "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {name: test-cluster, apiServerEndpoint: https://x}\n",
		"b.yml":      "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {cidr: 10.100.0.0/16}\n  kubelet: {flags: [--v=2]}\n",
		"c.json":     `{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"kubelet":{"flags":["--node-labels=env=test"]}}}`,
		"ignore.txt": "not read",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, "config", "dump", "-o", "json", "-c", "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Spec struct {
			Cluster struct{ Name, CIDR string }
			Kubelet struct{ Flags []string }
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Spec.Cluster.Name != "test-cluster" || got.Spec.Cluster.CIDR != "10.100.0.0/16" || strings.Join(got.Spec.Kubelet.Flags, " ") != "--v=2 --node-labels=env=test" {
		t.Errorf("dump = %+v", got)
	}
}

func TestUserdataExplain(t *testing.T) {
	out, err := run(t, "userdata", "explain", "-c", "file://"+seeds+"000_seed000_al2-mng-mime-shell-headers-into-body.mime")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{": MIME multipart, 1 part(s)", "part 1: shell script (text/x-shellscript)", `→ NodeConfig for cluster "ironman-2022"`, "warning: line 6: no blank line between the headers and the body"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

// stub writes an executable shell script.
func stub(t *testing.T, dir, name, script string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The run phase starts containerd, waits for its socket, then starts the kubelet with
// the flags of the environment file; a second init replaces both processes.
func TestInitRunPhaseWithProcesses(t *testing.T) {
	cloudFor(t, seed(t, "004_"))
	root, bins := t.TempDir(), t.TempDir()
	containerd := stub(t, bins, "containerd", `sock=$(sed -n "s/^address = '\(.*\)'$/\1/p" "$2")
mkdir -p "$(dirname "$sock")" && touch "$sock" && echo "containerd on $sock"
exec sleep 300
`)
	// It answers nodeadm's feature-gate probe as a kubelet does (accepting every gate).
	kubelet := stub(t, bins, "kubelet", "case \"$1\" in --feature-gates=*) echo 'refused: [kubernetes.io/nodeadm-gate-probe]' >&2; exit 1;; esac\necho kubelet \"$@\"\nexec sleep 300\n")
	args := []string{"init", "--root", root, "--kubelet-version", "v1.37.1", "--daemon-manager", "process", "--containerd-path", containerd, "--kubelet-path", kubelet}
	t.Cleanup(func() {
		for _, d := range bootstrap.Daemons {
			if data, err := os.ReadFile(filepath.Join(root, "run/nodeadm", d+".pid")); err == nil {
				var id process.Identity
				if _, err := fmtSscan(string(data), &id); err == nil {
					process.Terminate(id, time.Second)
				}
			}
		}
	})
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "✓ containerd running") || !strings.Contains(out, "✓ kubelet running") {
		t.Errorf("output:\n%s", out)
	}
	first := pidOf(t, root, bootstrap.Kubelet)
	if !first.Alive() {
		t.Fatal("kubelet not running")
	}
	log, _ := os.ReadFile(filepath.Join(root, "var/log/kubelet.log"))
	if !strings.Contains(string(log), "--config="+filepath.Join(root, bootstrap.KubeletConfigPath)) {
		t.Errorf("kubelet log:\n%s", log)
	}
	if out, err := run(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for first.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if first.Alive() {
		t.Error("the first kubelet still runs after a second init")
	}
	if second := pidOf(t, root, bootstrap.Kubelet); second == first || !second.Alive() {
		t.Error("no new kubelet after a second init")
	}
}

func pidOf(t *testing.T, root, daemon string) process.Identity {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "run/nodeadm", daemon+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	var id process.Identity
	if _, err := fmtSscan(string(data), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestInitWithABootstrapTokenPart(t *testing.T) {
	nc, err := os.ReadFile(seeds + "004_seed001_al2023-nodeconfig-required-fields.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ud := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\n" + string(nc) +
		"--B\nContent-Type: application/nodejoin.io\n\napiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: abcdef.0123456789abcdef\n--B--\n"
	cloudFor(t, []byte(ud))
	root := t.TempDir()
	out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-version", "v1.37.1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(out, "0123456789abcdef") {
		t.Error("init printed the bootstrap token")
	}
	st, err := os.Stat(filepath.Join(root, bootstrap.BootstrapKubeconfigPath))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap kubeconfig: %v, mode %v", err, st)
	}
	env, _ := os.ReadFile(filepath.Join(root, bootstrap.KubeletEnvPath))
	if !strings.Contains(string(env), "--bootstrap-kubeconfig="+filepath.Join(root, bootstrap.BootstrapKubeconfigPath)) {
		t.Errorf("environment = %s", env)
	}
}

// A kubelet that exits at once, as one started while containerd's CRI plugin still
// initializes does, is started again a second later, as systemd's Restart=always does;
// one that keeps exiting fails init with its log's last lines.
func TestInitRestartsAKubeletThatExitsAtOnce(t *testing.T) {
	cloudFor(t, seed(t, "004_"))
	for _, tc := range []struct {
		name     string
		failures int // starts that exit before one stays up
		wantErr  bool
	}{
		{"ready at the second start", 1, false},
		{"never ready", 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, bins := t.TempDir(), t.TempDir()
			containerd := stub(t, bins, "containerd", `sock=$(sed -n "s/^address = '\(.*\)'$/\1/p" "$2")
mkdir -p "$(dirname "$sock")" && touch "$sock"
exec sleep 300
`)
			count := filepath.Join(bins, "starts")
			// Only real starts are counted: nodeadm's feature-gate probe is answered first.
			kubelet := stub(t, bins, "kubelet", fmt.Sprintf(`case "$1" in --feature-gates=*) echo 'refused: [kubernetes.io/nodeadm-gate-probe]' >&2; exit 1;; esac
echo x >> %s
if [ "$(wc -l < %s)" -le %d ]; then echo 'server is not initialized yet'; exit 1; fi
exec sleep 300
`, count, count, tc.failures))
			t.Cleanup(func() {
				for _, d := range bootstrap.Daemons {
					if data, err := os.ReadFile(filepath.Join(root, "run/nodeadm", d+".pid")); err == nil {
						var id process.Identity
						if _, err := fmtSscan(string(data), &id); err == nil {
							process.Terminate(id, time.Second)
						}
					}
				}
			})
			out, err := run(t, "init", "--root", root, "--kubelet-version", "v1.37.1", "--daemon-manager", "process", "--containerd-path", containerd, "--kubelet-path", kubelet)
			data, _ := os.ReadFile(count)
			starts := strings.Count(string(data), "x")
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error()+out, "server is not initialized yet") {
					t.Fatalf("init = %v, want the kubelet's last lines\n%s", err, out)
				}
				if starts != 5 {
					t.Errorf("kubelet started %d times, want 5", starts)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if starts != 2 || !pidOf(t, root, bootstrap.Kubelet).Alive() {
				t.Errorf("kubelet started %d times (want 2), or is not running", starts)
			}
		})
	}
}
