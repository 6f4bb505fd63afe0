package nodejoin

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/printer/printertest"
)

var clusterFlags = []string{"--cluster-name", "demo", "--endpoint", "https://10.0.0.1:6443", "--ca-file", "testdata/userdata/ca.pem"}

// TestUserdataRender prints the user data of one NodeGroup for every family and style,
// and its CloudFormation template, against golden files.
func TestUserdataRender(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"userdata-al2023.txt", nil},
		{"userdata-al2.txt", []string{"-f", "testdata/userdata/nodegroup-al2.yaml"}},
		{"userdata-al2-eksctl.txt", []string{"--family", "AL2", "--style", "eksctl"}},
		{"userdata-bottlerocket.txt", []string{"--family", "Bottlerocket"}},
		{"userdata-windows.txt", []string{"-f", "testdata/userdata/nodegroup-al2.yaml", "--family", "WindowsServer2022FullContainer", "--style", "eksctl"}},
		{"userdata-al2023-base64.txt", []string{"--base64"}},
		{"userdata-cloudformation.yaml", []string{"--cloudformation", "-f", "testdata/userdata/nodegroup-al2.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			args := append([]string{"userdata", "render", "-f", "testdata/userdata/nodegroup.yaml"}, clusterFlags...)
			if strings.Contains(tt.golden, "windows") {
				args = append(args, "--dns-cluster-ip", "10.100.0.10")
			}
			out, err := run(t, append(args, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			printertest.Golden(t, filepath.Join("userdata", tt.golden), out)
		})
	}
}

func TestUserdataRenderGzipPrintsBase64(t *testing.T) {
	args := append([]string{"userdata", "render", "-f", "testdata/userdata/nodegroup.yaml", "--family", "AL2", "--style", "eksctl"}, clusterFlags...)
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil || len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		t.Fatalf("want base64 of gzip, got %.60q (%v)", out, err)
	}
}

// A manifest's userDataStyle picks the style; --style overrides it.
func TestUserdataRenderManifestStyle(t *testing.T) {
	args := append([]string{"userdata", "render", "-f", "testdata/userdata/nodegroup-eksctl.yaml"}, clusterFlags...)
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("userDataStyle Eksctl on AmazonLinux2: want base64 of eksctl's gzip cloud-config, got %.60q (%v)", out, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#cloud-config\n", "path: /etc/eksctl/kubelet.env", "MAX_PODS=58", `{"shutdownGracePeriod":"30s"}`} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("no %q in\n%s", want, doc)
		}
	}
	// --style managed: EKS's AL2 bootstrap script, which takes no kubelet settings.
	_, err = run(t, append(args, "--style", "managed")...)
	if err == nil || !strings.Contains(err.Error(), "kubelet configuration is not supported for AmazonLinux2 managed groups") {
		t.Errorf("--style managed: err = %v", err)
	}
}

func TestUserdataRenderFromKubeconfig(t *testing.T) {
	ca, err := os.ReadFile("testdata/userdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	doc := "apiVersion: v1\nkind: Config\ncurrent-context: admin@local\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:40123\n" +
		"    certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca) + "\ncontexts:\n- name: admin@local\n  context:\n    cluster: local\n    user: admin\nusers:\n- name: admin\n  user: {}\n"
	if err := os.WriteFile(kubeconfig, []byte(doc), 0o600); err != nil { //nolint:gosec // G703: a path under t.TempDir().
		t.Fatal(err)
	}
	out, err := run(t, "userdata", "render", "-f", "testdata/userdata/nodegroup.yaml", "--kubeconfig", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: local", "apiServerEndpoint: https://127.0.0.1:40123", "certificateAuthority: " + base64.StdEncoding.EncodeToString(ca)} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestUserdataRenderErrors(t *testing.T) {
	dir := t.TempDir()
	notNG := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(notNG, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: ng}\nspec:\n  scaling: {minSize: 1, maxSize: 2}\n  template: {amiFamilly: Bottlerocket}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: ng}\nspec:\n  scaling: {minSize: 1, maxSize: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(dir, "absent"))
	ng := "testdata/userdata/nodegroup.yaml"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"userdata", "render"}, "-f is required"},
		{append([]string{"userdata", "render", "-f", notNG}, clusterFlags...), `is apiVersion "v1" kind "Pod": want a NodeGroup (apiVersion nodejoin.io/v1alpha1) or an eksctl ClusterConfig`},
		{append([]string{"userdata", "render", "-f", ng, "--family", "Ubuntu"}, clusterFlags...), `--family: AMI family "Ubuntu"`},
		{append([]string{"userdata", "render", "-f", typo}, clusterFlags...), `field spec.template.amiFamilly: unknown field (did you mean "amiFamily"?)`},
		{append([]string{"userdata", "render", "-f", invalid}, clusterFlags...), "spec.scaling.maxSize: Invalid value: 0: must be at least 1"},
		{append([]string{"userdata", "render", "-f", ng, "--style", "karpenter"}, clusterFlags...), `--style "karpenter": want managed or eksctl`},
		{append([]string{"userdata", "render", "-f", ng, "--cloudformation", "--family", "Bottlerocket"}, clusterFlags...), "rendered for AmazonLinux2 and AmazonLinux2023, not Bottlerocket"},
		{[]string{"userdata", "render", "-f", ng, "--cluster-name", "demo"}, "the kubeconfig has no current context; give --cluster-name, --endpoint and --ca-file"},
		{[]string{"userdata", "render", "-f", ng, "--ca-file", ng, "--endpoint", "https://e", "--cluster-name", "c"}, "no PEM certificate in it"},
		{append([]string{"userdata", "render", "-f", filepath.Join(dir, "absent.yaml")}, clusterFlags...), "reading -f: open "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[2:], " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// render takes the eksctl ClusterConfig that create nodegroup takes: --nodegroup picks
// the group, and the file's metadata.name is the cluster unless --cluster-name says.
func TestUserdataRenderEksctlFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	doc := "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: ironman, region: eu-west-1}\n" +
		"managedNodeGroups:\n- name: ng-1\n  amiFamily: AmazonLinux2023\n  instanceType: m5.large\n" +
		"- name: ng-2\n  amiFamily: AmazonLinux2023\n  instanceType: m5.large\n  labels: {role: batch}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--endpoint", "https://10.0.0.1:6443", "--ca-file", "testdata/userdata/ca.pem"}
	out, err := run(t, append([]string{"userdata", "render", "-f", file, "--nodegroup", "ng-2"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: ironman", "role=batch", "eks.amazonaws.com/nodegroup=ng-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	_, err = run(t, append([]string{"userdata", "render", "-f", file}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "holds 2 node groups (ng-1, ng-2): name the one to render with --nodegroup") {
		t.Errorf("two groups, no --nodegroup: %v", err)
	}
	_, err = run(t, append([]string{"userdata", "render", "-f", file, "--nodegroup", "ng-3"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "has no node group ng-3 (it has ng-1, ng-2)") {
		t.Errorf("--nodegroup ng-3: %v", err)
	}
}
