package addons

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// render is the objects as one multi-document YAML, as the golden files hold them.
func render(t *testing.T, objs []runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		y, err := sigsyaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.Bytes()
}

func TestObjectsGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{Enabled: Names, APIServer: "https://198.18.0.1:6443"}},
		{"coredns-only-custom-ranges", Options{Enabled: []string{CoreDNS}, ServiceCIDR: netip.MustParsePrefix("172.20.0.0/16"),
			PodCIDR: netip.MustParsePrefix("10.1.0.0/16"), CoreDNSImage: "example.com/coredns:test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Objects(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, objs)
			path := filepath.Join("testdata", tc.name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/addons -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered objects; run go test ./internal/addons -update and review the diff", path)
			}
		})
	}
}

// What must hold whatever the golden files say.
func TestObjectsInvariants(t *testing.T) {
	objs, err := Objects(Options{Enabled: Names, APIServer: "https://198.18.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	var sawDS, sawDep, sawSvc, sawCorefile bool
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == "" {
			t.Errorf("%T has no kind", o)
		}
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			sawDS = true
			assertNotOnSimulated(t, o.Name, o.Spec.Template.Spec.Affinity)
			c := o.Spec.Template.Spec.Containers[0]
			if !o.Spec.Template.Spec.HostNetwork || c.SecurityContext == nil || !*c.SecurityContext.Privileged {
				t.Error("kube-proxy must run privileged in the node's network namespace")
			}
			if !strings.Contains(strings.Join(c.Command, " "), "--hostname-override=$(NODE_NAME)") {
				t.Error("kube-proxy must take its node name from the pod's spec")
			}
		case *appsv1.Deployment:
			sawDep = true
			assertNotOnSimulated(t, o.Name, o.Spec.Template.Spec.Affinity)
		case *corev1.Service:
			sawSvc = true
			if o.Spec.ClusterIP != "10.100.0.10" {
				t.Errorf("kube-dns at %s, want 10.100.0.10 (the kubelets' clusterDNS)", o.Spec.ClusterIP)
			}
		case *corev1.ConfigMap:
			if cf, ok := o.Data["Corefile"]; ok {
				sawCorefile = true
				if strings.Contains(cf, "forward") {
					t.Error("the Corefile forwards queries out of the cluster")
				}
			}
			if cfg, ok := o.Data["config.conf"]; ok {
				for _, want := range []string{"maxPerCore: 0", "min: 0", "mode: iptables", "clusterCIDR: 10.244.0.0/16"} {
					if !strings.Contains(cfg, want) {
						t.Errorf("kube-proxy's configuration lacks %q", want)
					}
				}
				if !strings.Contains(o.Data["kubeconfig.conf"], "server: https://198.18.0.1:6443") {
					t.Error("kube-proxy's kubeconfig does not name the API server's address")
				}
			}
		}
	}
	if !sawDS || !sawDep || !sawSvc || !sawCorefile {
		t.Errorf("missing objects: DaemonSet %v, Deployment %v, Service %v, Corefile %v", sawDS, sawDep, sawSvc, sawCorefile)
	}
}

func assertNotOnSimulated(t *testing.T, name string, a *corev1.Affinity) {
	t.Helper()
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatalf("%s has no required node affinity", name)
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		found := false
		for _, e := range term.MatchExpressions {
			found = found || (e.Key == SimulatedNodeLabel && e.Operator == corev1.NodeSelectorOpDoesNotExist)
		}
		if !found {
			t.Errorf("%s: a node selector term lets pods onto simulated nodes", name)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no api server", Options{Enabled: []string{KubeProxy}}, "needs the API server's address"},
		{"http", Options{Enabled: []string{KubeProxy}, APIServer: "http://198.18.0.1:6443"}, "want https://host:port"},
		{"clusterIP", Options{Enabled: []string{KubeProxy}, APIServer: "https://10.100.0.1:443"}, "in the service range"},
		{"unknown", Options{Enabled: []string{"aws-node"}}, `unknown add-on "aws-node"`},
		{"overlap", Options{PodCIDR: netip.MustParsePrefix("10.100.0.0/24")}, "overlaps service range"},
		{"dns outside", Options{DNSIP: netip.MustParseAddr("10.0.0.10")}, "outside the service range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Complete()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	// CoreDNS alone needs no API server address.
	o := Options{Enabled: []string{CoreDNS}}
	if err := o.Complete(); err != nil {
		t.Errorf("coredns alone: %v", err)
	}
}

func TestParseNames(t *testing.T) {
	for in, want := range map[string]string{"": "", "none": "", "kube-proxy": "kube-proxy", " coredns , kube-proxy,coredns": "coredns,kube-proxy"} {
		got, err := ParseNames(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("ParseNames(%q) = %v, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseNames("kube-proxy,vpc-cni"); err == nil || !strings.Contains(err.Error(), "choose from kube-proxy, coredns") {
		t.Errorf("got %v", err)
	}
}
