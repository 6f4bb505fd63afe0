package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The instance of upstream's e2e tests (reference §1.13).
var e2eInstance = &Metadata{
	InstanceID: "i-1234567890abcdef0", InstanceType: "m4.xlarge", Region: "us-west-2", AvailabilityZone: "us-west-2f",
	MAC: "0e:49:61:0f:c3:11", LocalIPv4: "172.16.34.43", PrivateDNSName: "ip-172-16-34-43.ec2.internal",
}

func e2eTypes(t string) (nodeconfig.ENIInfo, bool) {
	info, ok := map[string]nodeconfig.ENIInfo{"m4.xlarge": {ENIs: 4, IPsPerENI: 15}}[t]
	return info, ok
}

const testCA = `-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIUZ0pUy7v0gFAAzsVjSfyTq1Aq3CswCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKa3ViZXJuZXRlczAgFw0yNjExMjMwMTAwMDBaGA8yMTI2MTAz
MDAxMDAwMFowFTETMBEGA1UEAwwKa3ViZXJuZXRlczBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABK3mZ7LkY7bDQfQ1cXjq0lWfQv7vQ1W5T2xJtqXx5m5cYv3B9A0b
y2k3V1v4z9yq1n6YyR0xwQ9x3Kx4Q0q1f+KjUzBRMB0GA1UdDgQWBBR1VbR1rH0U
AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
-----END CERTIFICATE-----
`

func mergedConfig(t *testing.T, docs ...string) *v1alpha1.NodeConfig {
	t.Helper()
	var cfgs []*v1alpha1.NodeConfig
	for i, d := range docs {
		c, err := v1alpha1.Decode([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"+d), "doc")
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		cfgs = append(cfgs, c)
	}
	m, err := nodeconfig.Merge(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	m.Spec.Cluster.CertificateAuthority = []byte(testCA)
	return m
}

const clusterDoc = `spec:
  cluster:
    name: my-cluster
    apiServerEndpoint: https://example.com
    cidr: 10.100.0.0/16
`

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name string
		docs []string
		opts Options
	}{
		{"minimal", []string{clusterDoc}, Options{KubeletVersion: "v1.35.0", CPUMillis: 2000}},
		// upstream e2e case mime-userdata-merge.
		{"mime-userdata-merge", []string{clusterDoc + `  kubelet:
    config: {maxPods: 58, clusterDNS: [10.100.0.10]}
    flags: [--v=2]
`, `spec:
  kubelet:
    config: {systemReserved: {cpu: 150m}, clusterDNS: [1.1.1.1]}
    flags: [--v=5, "--node-labels=foo=bar,foo2=baz", "--register-with-taints=foo=bar:NoSchedule"]
  containerd:
    config: |
      [grpc]
      address = '/run/foo/foo.sock'
      [plugins.'io.containerd.grpc.v1.cri'.containerd]
      discard_unpacked_layers = false
`}, Options{KubeletVersion: "v1.35.0", CPUMillis: 2000}},
		{"bootstrap-token-local-root", []string{clusterDoc + `  kubelet:
    config: {cgroupDriver: cgroupfs, failCgroupV1: false}
  featureGates: {InstanceIdNodeName: true}
`}, Options{KubeletVersion: "v1.37.1", CPUMillis: 2000, Root: "/var/lib/nodejoin/instances/i-1", BootstrapToken: "abcdef.0123456789abcdef", CNIBinDir: "/usr/lib/cni"}},
		// Seed 001's managed-node-group NodeConfig on kubelet v1.37.1, which no longer
		// knows its feature gate: the drop-in is written without it.
		{"seed001-feature-gates", []string{clusterDoc + seed001Kubelet}, Options{
			KubeletVersion: "v1.37.1", CPUMillis: 2000, KubeletGates: NewKubeletGates(context.Background(), "testdata/fake-kubelet.sh", ""),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.InstanceTypes = e2eTypes
			out, err := Render(mergedConfig(t, tt.docs...), e2eInstance, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("testdata", "golden", tt.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if _, err := out.Files.Write(dir); err != nil {
					t.Fatal(err)
				}
				return
			}
			seen := map[string]bool{}
			for _, f := range out.Files {
				seen[f.Path] = true
				want, err := os.ReadFile(filepath.Join(dir, f.Path))
				if err != nil {
					t.Errorf("%s: %v (run with -update)", f.Path, err)
					continue
				}
				if string(want) != string(f.Content) {
					t.Errorf("%s differs from the golden file:\n%s", f.Path, f.Content)
				}
			}
			_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !seen[strings.TrimPrefix(path, dir)] {
					t.Errorf("golden file %s is no longer rendered", path)
				}
				return nil
			})
		})
	}
}

func TestRenderFacts(t *testing.T) {
	out, err := Render(mergedConfig(t, clusterDoc+"  kubelet: {config: {maxPods: 1}, maxPodsExpression: 'max_pods + 2'}\n"), e2eInstance, Options{KubeletVersion: "v1.35.0", CPUMillis: 2000, InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(file(t, out, KubeletConfigPath))
	// e2e custom-max-pods-expression: 60 pods, 915Mi even with the user's maxPods: 1.
	for _, want := range []string{`"maxPods": 60`, `"memory": "915Mi"`, `"cpu": "70m"`, `"providerID": "aws:///us-west-2f/i-1234567890abcdef0"`, `"clusterDNS": [
        "10.100.0.10"
    ]`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.json lacks %s", want)
		}
	}
	env := string(file(t, out, KubeletEnvPath))
	if !strings.Contains(env, "--hostname-override=ip-172-16-34-43.ec2.internal") || strings.Contains(env, "pod-infra-container-image") {
		t.Errorf("environment = %s", env)
	}

	unknown := *e2eInstance
	unknown.InstanceType = "mock-type.large"
	out, err = Render(mergedConfig(t, clusterDoc), &unknown, Options{CPUMillis: 2000, InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	if out.MaxPods != 110 || !strings.Contains(strings.Join(out.Warnings, "\n"), `instance type "mock-type.large" is not in the instance-type table`) {
		t.Errorf("max pods %d, warnings %q", out.MaxPods, out.Warnings)
	}
	if !strings.Contains(string(file(t, out, KubeletConfigPath)), `"memory": "1465Mi"`) {
		t.Error("110 pods should reserve 1465Mi")
	}

	if _, err := Render(mergedConfig(t, clusterDoc+"  kubelet: {flags: ['--node-labels=a=b c']}\n"), e2eInstance, Options{}); err == nil {
		t.Error("a flag with a space was accepted into the environment file")
	}
}

func file(t *testing.T, r *Rendered, path string) []byte {
	t.Helper()
	for _, f := range r.Files {
		if f.Path == path {
			return f.Content
		}
	}
	t.Fatalf("%s not rendered", path)
	return nil
}

func TestWriteIsIdempotentAndAtomic(t *testing.T) {
	root := t.TempDir()
	out, err := Render(mergedConfig(t, clusterDoc), e2eInstance, Options{InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	res, err := out.Files.Write(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != len(out.Files) || len(res.Unchanged) != 0 {
		t.Fatalf("first write: %+v", res)
	}
	before := map[string]os.FileInfo{}
	for _, f := range out.Files {
		st, err := os.Stat(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		before[f.Path] = st
	}
	res, err = out.Files.Write(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Written) != 0 {
		t.Errorf("second write rewrote %v", res.Written)
	}
	for _, f := range out.Files {
		st, _ := os.Stat(filepath.Join(root, f.Path))
		if !st.ModTime().Equal(before[f.Path].ModTime()) {
			t.Errorf("%s touched by an identical second run", f.Path)
		}
	}
	if st, _ := os.Stat(filepath.Join(root, CAPath)); st.Mode().Perm() != 0o644 {
		t.Errorf("ca.crt mode = %v", st.Mode().Perm())
	}

	// A later run that fails part-way leaves every file whole: old or new.
	changed, err := Render(mergedConfig(t, clusterDoc+"  kubelet: {flags: [--v=4]}\n"), e2eInstance, Options{InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(root, KubeletEnvPath)
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := changed.Files.Write(root); err == nil {
		t.Fatal("write over a directory succeeded")
	}
	for _, f := range out.Files {
		if f.Path == KubeletEnvPath {
			continue
		}
		got, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Errorf("%s: %v", f.Path, err)
		}
		if len(got) == 0 {
			t.Errorf("%s left empty", f.Path)
		}
	}
}

// upstream e2e case nodeadm-environment-config.
func TestRenderEnvironment(t *testing.T) {
	out, err := Render(mergedConfig(t, clusterDoc+`  instance:
    environment:
      default: {HTTP_PROXY: "http://proxy:8080", NO_PROXY: "localhost,127.0.0.1", HTTPS_PROXY: "http://proxy:8443"}
      kubelet: {KUBELET_SPECIFIC_VAR: kubelet-value, HTTP_PROXY: "http://kubelet-proxy:8080", QUOTED: 'value with "quotes" inside', SLASH: 'value with \backslash', PCT: '50%'}
`), e2eInstance, Options{InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(file(t, out, ManagerEnvironment)); got != "[Manager]\nDefaultEnvironment=\"HTTPS_PROXY=http://proxy:8443\"\nDefaultEnvironment=\"HTTP_PROXY=http://proxy:8080\"\nDefaultEnvironment=\"NO_PROXY=localhost,127.0.0.1\"\n" {
		t.Errorf("manager environment:\n%s", got)
	}
	want := "[Service]\nEnvironment=\"HTTP_PROXY=http://kubelet-proxy:8080\"\nEnvironment=\"KUBELET_SPECIFIC_VAR=kubelet-value\"\nEnvironment=\"PCT=50%%\"\nEnvironment=\"QUOTED=value with \\\"quotes\\\" inside\"\nEnvironment=\"SLASH=value with \\\\backslash\"\n"
	if got := string(file(t, out, "/etc/systemd/system/kubelet.service.d/environment.conf")); got != want {
		t.Errorf("kubelet environment:\n%s\nwant\n%s", got, want)
	}
}

// upstream e2e case network-name-resolution.
func TestRenderNameResolution(t *testing.T) {
	out, err := Render(mergedConfig(t, clusterDoc+"  instance:\n    network:\n      nameservers: [8.8.8.8, 8.8.4.4]\n      domains: [search.me.please, search.me.next.please]\n"), e2eInstance, Options{InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(file(t, out, ResolvedDropIn)); got != "[Resolve]\nDNS=8.8.8.8 8.8.4.4\nDomains=search.me.please search.me.next.please\n" {
		t.Errorf("resolved drop-in:\n%s", got)
	}
}

// The rendered config.json is a KubeletConfiguration the kubelet's own types accept
// strictly: every field name is one the v1beta1 API knows.
func TestRenderKubeletConfigDecodesStrictly(t *testing.T) {
	out, err := Render(mergedConfig(t, clusterDoc), e2eInstance, Options{KubeletVersion: "v1.37.1", CPUMillis: 2000, InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(file(t, out, KubeletConfigPath)))
	d.DisallowUnknownFields()
	var c kubeletv1beta1.KubeletConfiguration
	if err := d.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.MaxPods != 58 || c.ReadOnlyPort != 0 || *c.SerializeImagePulls || c.ShutdownGracePeriod.Duration.String() != "2m30s" {
		t.Errorf("decoded %+v", c)
	}
}
