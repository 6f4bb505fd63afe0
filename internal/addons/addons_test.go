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
	"k8s.io/utils/ptr"
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
		{"aws-node-sandbox", Options{Enabled: []string{AWSNode}, AWSNode: sandboxAWSNode()}},
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
			if o.Name == AWSNode {
				checkAWSNode(t, o)
				continue
			}
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
		{"unknown", Options{Enabled: []string{"vpc-cni"}}, `unknown add-on "vpc-cni"`},
		{"aws-node relative dir", Options{Enabled: []string{AWSNode}, AWSNode: AWSNodeOptions{CNIBinDir: "opt/cni/bin"}}, "want an absolute path"},
		{"aws-node expansion without shared dir", Options{Enabled: []string{AWSNode}, AWSNode: AWSNodeOptions{StateDir: "/n/$(NODE_NAME)/run"}}, "only with a shared host directory"},
		{"aws-node dir outside shared", Options{Enabled: []string{AWSNode}, AWSNode: AWSNodeOptions{SharedHostDir: "/var/lib/nodejoin/c1"}}, "outside the shared host directory"},
		{"aws-node endpoint", Options{Enabled: []string{AWSNode}, AWSNode: AWSNodeOptions{EC2Endpoint: "198.18.0.1:8080"}}, "EC2 endpoint"},
		{"aws-node negative knob", Options{Enabled: []string{AWSNode}, AWSNode: AWSNodeOptions{WarmIPTarget: ptr.To(-1)}}, "WARM_IP_TARGET -1"},
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

// sandboxAWSNode is aws-node as a local cluster configures it: every node's directories
// under the cluster's directory, told apart by the node's name.
func sandboxAWSNode() AWSNodeOptions {
	node := "/var/lib/nodejoin/c1/nodes/$(NODE_NAME)"
	return AWSNodeOptions{
		SharedHostDir: "/var/lib/nodejoin/c1",
		CNIBinDir:     node + "/opt/cni/bin", CNIConfDir: node + "/etc/cni/net.d",
		StateDir: node + "/var/run/aws-node", LogDir: node + "/var/log/aws-routed-eni",
		Region: "us-west-2", EC2Endpoint: "http://198.18.0.1:8081",
		WarmIPTarget: ptr.To(5), MinimumIPTarget: ptr.To(10),
	}
}

// checkAWSNode asserts what aws-node needs whatever the golden files say.
func checkAWSNode(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	assertNotOnSimulated(t, ds.Name, spec.Affinity)
	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" || spec.ServiceAccountName != AWSNode {
		t.Error("aws-node must run system-node-critical in the node's network namespace as its ServiceAccount")
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Error("aws-node must tolerate every taint: a node is not ready before it runs")
	}
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("aws-node has %d init containers and %d containers; want 1 and 1", len(spec.InitContainers), len(spec.Containers))
	}
	initC, c := spec.InitContainers[0], spec.Containers[0]
	if initC.Command[1] != "init" || c.Command[1] != "ipamd" {
		t.Errorf("aws-node runs %v then %v; want netagent init, then ipamd", initC.Command, c.Command)
	}
	for _, ctr := range []corev1.Container{initC, c} {
		if ctr.SecurityContext == nil || ctr.SecurityContext.Privileged == nil || !*ctr.SecurityContext.Privileged {
			t.Errorf("%s must be privileged", ctr.Name)
		}
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != AWSNodeHealthPort || p.HTTPGet.Host != "127.0.0.1" {
		t.Errorf("ipamd's readiness probe is %+v; want HTTP on 127.0.0.1:%d", p, AWSNodeHealthPort)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != AWSNodeMetricsPort {
		t.Errorf("ipamd's ports are %+v; want metrics on %d", c.Ports, AWSNodeMetricsPort)
	}
	// Every directory in the args is mounted at the same path as on the node.
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	for _, ctr := range []corev1.Container{initC, c} {
		for _, arg := range ctr.Command[2:] {
			_, dir, _ := strings.Cut(arg, "=")
			if strings.HasPrefix(arg, "--plugins-from=") {
				continue
			}
			covered := false
			for _, m := range ctr.VolumeMounts {
				if hostPaths[m.Name] == m.MountPath && (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s's %s is not a host directory mounted at the same path", ctr.Name, arg)
			}
		}
	}
	var sawNodeName bool
	for _, e := range c.Env {
		sawNodeName = sawNodeName || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !sawNodeName {
		t.Error("ipamd has no NODE_NAME from the pod's spec")
	}
}

func TestAWSNodeSandboxOptions(t *testing.T) {
	objs, err := Objects(Options{Enabled: []string{AWSNode}, AWSNode: sandboxAWSNode()})
	if err != nil {
		t.Fatal(err)
	}
	ds := objs[len(objs)-1].(*appsv1.DaemonSet)
	checkAWSNode(t, ds)
	c := ds.Spec.Template.Spec.Containers[0]
	if !strings.Contains(strings.Join(c.Command, " "), "--state-dir=/var/lib/nodejoin/c1/nodes/$(NODE_NAME)/var/run/aws-node") {
		t.Errorf("ipamd's args %v do not carry the per-node state directory", c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"AWS_REGION": "us-west-2", "AWS_ENDPOINT_URL_EC2": "http://198.18.0.1:8081",
		"WARM_ENI_TARGET": "1", "WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "10"} {
		if env[k] != v {
			t.Errorf("ipamd's %s = %q, want %q", k, env[k], v)
		}
	}
	if vols := ds.Spec.Template.Spec.Volumes; len(vols) != 2 || vols[0].HostPath.Path != "/var/lib/nodejoin/c1" {
		t.Errorf("volumes %+v; want the shared directory and the xtables lock", vols)
	}
}
