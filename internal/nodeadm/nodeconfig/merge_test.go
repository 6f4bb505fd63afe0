package nodeconfig

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

func decode(t *testing.T, doc string) *v1alpha1.NodeConfig {
	t.Helper()
	c, err := v1alpha1.Decode([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"+doc), "test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The merge vectors of upstream's unit and e2e tests (reference §5.7).
func TestMergeKubelet(t *testing.T) {
	a := decode(t, `spec:
  cluster: {name: a, cidr: 10.100.0.0/16}
  kubelet:
    config: {port: 1010, maxPods: 120, logging: {verbosity: 5}}
    flags: [--v=2, "--node-labels=foo=bar,nodegroup=test"]
  featureGates: {InstanceIdNodeName: true}
`)
	b := decode(t, `spec:
  cluster: {name: "", apiServerEndpoint: https://b}
  kubelet:
    config: {maxPods: 150, podsPerCore: 20, systemReserved: {cpu: 150m}, logging: {verbosity: 2}}
    flags: [--v=5, --node-labels=foo=baz]
  featureGates: {InstanceIdNodeName: false}
`)
	m, err := Merge([]*v1alpha1.NodeConfig{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := asJSON(t, m.Spec.Kubelet.Config); got != `{"logging":{"verbosity":2},"maxPods":150,"podsPerCore":20,"port":1010,"systemReserved":{"cpu":"150m"}}` {
		t.Errorf("kubelet config = %s", got)
	}
	if !slices.Equal(m.Spec.Kubelet.Flags, []string{"--v=2", "--node-labels=foo=bar,nodegroup=test", "--v=5", "--node-labels=foo=baz"}) {
		t.Errorf("flags = %q", m.Spec.Kubelet.Flags)
	}
	if m.Spec.Cluster.Name != "a" || m.Spec.Cluster.APIServerEndpoint != "https://b" || m.Spec.Cluster.CIDR != "10.100.0.0/16" {
		t.Errorf("cluster = %+v (an empty later name must not clear the earlier one)", m.Spec.Cluster)
	}
	if m.Spec.Enabled(v1alpha1.FeatureInstanceIDNodeName) {
		t.Error("a later false feature gate did not win")
	}
}

func TestMergeListsAreReplaced(t *testing.T) {
	a := decode(t, `spec:
  kubelet: {config: {clusterDNS: [10.100.0.10, 10.100.0.11]}}
  containerd: {baseRuntimeSpec: {process: {rlimits: [{type: RLIMIT_NOFILE, soft: 1024}]}}}
  instance: {network: {nameservers: [8.8.8.8]}, environment: {default: {A: "1", B: "1"}, kubelet: {K: "1"}}}
`)
	b := decode(t, `spec:
  kubelet: {config: {clusterDNS: [1.1.1.1]}}
  containerd: {baseRuntimeSpec: {process: {rlimits: [{type: RLIMIT_NOFILE, hard: 1024}]}}}
  instance: {environment: {default: {B: "2"}}}
`)
	m, err := Merge([]*v1alpha1.NodeConfig{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Spec.Kubelet.Config["clusterDNS"]); got != `["1.1.1.1"]` {
		t.Errorf("clusterDNS = %s", got)
	}
	if got := asJSON(t, m.Spec.Containerd.BaseRuntimeSpec); got != `{"process":{"rlimits":[{"hard":1024,"type":"RLIMIT_NOFILE"}]}}` {
		t.Errorf("baseRuntimeSpec = %s", got)
	}
	if !slices.Equal(m.Spec.Instance.Network.Nameservers, []string{"8.8.8.8"}) {
		t.Errorf("nameservers = %v (an absent later list must not clear)", m.Spec.Instance.Network.Nameservers)
	}
	if got := asJSON(t, m.Spec.Instance.Environment); got != `{"default":{"A":"1","B":"2"},"kubelet":{"K":"1"}}` {
		t.Errorf("environment = %s", got)
	}
}

func TestMergeBaseRuntimeSpecMaps(t *testing.T) {
	a := decode(t, "spec: {containerd: {baseRuntimeSpec: {process: {rlimits: {type: RLIMIT_NOFILE, soft: 1024}}}}}\n")
	b := decode(t, "spec: {containerd: {baseRuntimeSpec: {process: {rlimits: {type: RLIMIT_NOFILE, hard: 1024}}}}}\n")
	m, err := Merge([]*v1alpha1.NodeConfig{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if got := asJSON(t, m.Spec.Containerd.BaseRuntimeSpec); got != `{"process":{"rlimits":{"hard":1024,"soft":1024,"type":"RLIMIT_NOFILE"}}}` {
		t.Errorf("baseRuntimeSpec = %s", got)
	}
}

func TestMergeContainerdTOML(t *testing.T) {
	got, err := MergeTOML("[a.b.c.d]\nf=0", "[a.b.c.d]\ne=0")
	if err != nil {
		t.Fatal(err)
	}
	want := "[a]\n[a.b]\n[a.b.c]\n[a.b.c.d]\ne = 0\nf = 0\n"
	if got != want {
		t.Errorf("MergeTOML = %q, want %q", got, want)
	}
	got, err = MergeTOML("version = 2\n[grpc]\naddress = '/run/containerd/containerd.sock'\nuid = 0\n", "[grpc]\naddress = '/run/containerd/containerd.sock.2'\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\ndiscard_unpacked_layers = false\n")
	if err != nil {
		t.Fatal(err)
	}
	want = "version = 2\n\n[grpc]\naddress = '/run/containerd/containerd.sock.2'\nuid = 0\n\n[plugins]\n[plugins.'io.containerd.grpc.v1.cri']\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\ndiscard_unpacked_layers = false\n"
	if got != want {
		t.Errorf("MergeTOML = %q\nwant %q", got, want)
	}
	if _, err := MergeTOML("a = 1", "[["); err == nil {
		t.Error("MergeTOML accepted invalid TOML")
	}
}
