package nodegroup

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodeconfigv1alpha1 "github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/pki"
	nodeadm "github.com/nodejoin/nodejoin/internal/userdata"
)

// noCloud is a nodeadm resolver for user data that names everything itself.
type noCloud struct{}

func (noCloud) DescribeCluster(context.Context, string, int) (*nodeadm.ClusterInfo, error) {
	return nil, errors.New("the launch template's user data must not need DescribeCluster")
}
func (noCloud) VPCIPv4CIDRs(context.Context) ([]string, error) {
	return nil, errors.New("the launch template's user data must not need the VPC's ranges")
}

// withRealCA gives the harness's reconciler a PEM CA bundle, which nodeadm's validation
// of the decoded NodeConfig wants.
func withRealCA(t *testing.T, h *harness) {
	t.Helper()
	ca, err := pki.NewCA("kubernetes", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h.r.opts.Cluster.CertificateAuthority = pki.EncodeCert(ca.Cert)
}

// launchUserData is the user data of the group's current launch template version, as
// an instance reads it (base64-decoded).
func launchUserData(t *testing.T, h *harness) []byte {
	t.Helper()
	ng := h.get()
	if ng.Status.LaunchTemplate == nil {
		t.Fatalf("no launch template; status %+v", ng.Status)
	}
	lt := h.cloud.templates[ng.Status.LaunchTemplate.Name]
	data := lt.versions[len(lt.versions)-1].data
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		t.Fatalf("launch template user data is not base64: %v", err)
	}
	return ud
}

// nodeadmView decodes user data as nodeadm does and returns the merged NodeConfig.
func nodeadmView(t *testing.T, ud []byte) *nodeconfigv1alpha1.NodeConfig {
	t.Helper()
	res, err := nodeadm.Decode(t.Context(), ud, noCloud{})
	if err != nil {
		t.Fatalf("nodeadm cannot decode the launch template's user data: %v", err)
	}
	var cfgs []*nodeconfigv1alpha1.NodeConfig
	for _, c := range res.Configs {
		cfgs = append(cfgs, c.Config)
	}
	merged, err := nodeconfig.Merge(cfgs)
	if err != nil {
		t.Fatalf("merging: %v", err)
	}
	if errs := merged.Validate(); len(errs) > 0 {
		t.Fatalf("the merged NodeConfig is invalid: %v", errs.ToAggregate())
	}
	return merged
}

// An Eksctl-style AmazonLinux2 group's launch template carries eksctl's self-managed
// user data: gzip-compressed #cloud-config writing kubelet.env and kubelet-extra.json,
// which nodeadm decodes to the group's labels (eksctl's, no eks.amazonaws.com ones),
// taints, max pods and kubelet settings. Switching the style to Managed is a template
// change: a new launch template version with EKS's bootstrap.sh script.
func TestEksctlStyleLaunchTemplate(t *testing.T) {
	ng := baseGroup(2)
	tp := &ng.Spec.Template
	tp.AMIFamily = v1alpha1.AMIFamilyAmazonLinux2
	tp.UserDataStyle = v1alpha1.UserDataStyleEksctl
	tp.Labels = map[string]string{"alpha.eksctl.io/cluster-name": testCluster, "role": "worker"}
	tp.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	tp.MaxPods = ptr.To[int32](58)
	tp.Kubelet = &runtime.RawExtension{Raw: []byte(`{"shutdownGracePeriod":"30s"}`)}
	h := newHarness(t, ng)
	withRealCA(t, h)
	h.until("active with 2 nodes", 40, active)

	ud := launchUserData(t, h)
	zr, err := gzip.NewReader(bytes.NewReader(ud))
	if err != nil {
		t.Fatalf("user data is not eksctl's gzip-compressed cloud-config: %v\n%.200q", err, ud)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#cloud-config\n", "path: /etc/eksctl/kubelet.env", "path: /etc/eksctl/kubelet-extra.json",
		"- - /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh", "MAX_PODS=58"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("no %q in the cloud-config:\n%s", want, doc)
		}
	}

	cfg := nodeadmView(t, ud)
	if cl := cfg.Spec.Cluster; cl.Name != testCluster || cl.APIServerEndpoint != "https://127.0.0.1:6443" || cl.CIDR != "10.100.0.0/16" {
		t.Errorf("cluster %+v", cl)
	}
	wantFlags := []string{
		"--node-labels=alpha.eksctl.io/cluster-name=c1,alpha.eksctl.io/nodegroup-name=ng1,role=worker",
		"--register-with-taints=dedicated=batch:NoSchedule",
	}
	if !reflect.DeepEqual(cfg.Spec.Kubelet.Flags, wantFlags) {
		t.Errorf("kubelet flags\n%q\nwant\n%q", cfg.Spec.Kubelet.Flags, wantFlags)
	}
	if mp := string(cfg.Spec.Kubelet.Config["maxPods"]); mp != "58" {
		t.Errorf("kubelet config maxPods %q, want 58 (kubelet.env MAX_PODS)", mp)
	}
	var grace string
	if raw, ok := cfg.Spec.Kubelet.Config["shutdownGracePeriod"]; !ok || json.Unmarshal(raw, &grace) != nil || grace != "30s" {
		t.Errorf("kubelet config %v: want shutdownGracePeriod 30s from kubelet-extra.json", cfg.Spec.Kubelet.Config)
	}

	// The same group in the Managed style: EKS's AL2 script, which takes no kubelet
	// settings, so drop them; a new version rolls the group.
	h.mutate(func(ng *v1alpha1.NodeGroup) {
		ng.Spec.Template.UserDataStyle = v1alpha1.UserDataStyleManaged
		ng.Spec.Template.Kubelet = nil
	})
	h.until("rolled onto the managed-style version", 400, func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.LaunchTemplate.Version == "2" && ng.Status.UpdatedSize == 2
	})
	ud = launchUserData(t, h)
	if !strings.Contains(string(ud), "/etc/eks/bootstrap.sh c1 --kubelet-extra-args") {
		t.Errorf("managed-style user data is not EKS's bootstrap.sh script:\n%s", ud)
	}
	labels := map[string]string{}
	for _, f := range nodeadmView(t, ud).Spec.Kubelet.Flags {
		if v, ok := strings.CutPrefix(f, "--node-labels="); ok {
			for _, kv := range strings.Split(v, ",") {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = v
			}
		}
	}
	if labels[userdata.LabelNodeGroup] != "ng1" || labels[userdata.LabelCapacityType] != "ON_DEMAND" {
		t.Errorf("managed-style labels %v lack EKS's", labels)
	}
}

// An Eksctl-style AmazonLinux2023 group gets eksctl's NodeConfig parts, and its user
// data of its own (eksctl's overrideBootstrapCommand: a bare NodeConfig, which the
// Managed style refuses as not MIME) is merged last.
func TestEksctlStyleAL2023(t *testing.T) {
	ng := baseGroup(1)
	ng.Spec.Template.UserDataStyle = v1alpha1.UserDataStyleEksctl
	ng.Spec.Template.MaxPods = ptr.To[int32](11)
	ng.Spec.Template.UserData = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 5m\n"
	h := newHarness(t, ng)
	withRealCA(t, h)
	h.until("active", 40, active)
	ud := launchUserData(t, h)
	if n := strings.Count(string(ud), "Content-Type: application/node.eks.aws"); n != 3 {
		t.Errorf("%d NodeConfig parts, want 3 (eksctl's, its maxPods part, the user's):\n%s", n, ud)
	}
	cfg := nodeadmView(t, ud)
	want := map[string]string{"clusterDNS": `["10.100.0.10"]`, "maxPods": "11", "shutdownGracePeriod": `"5m"`}
	got := map[string]string{}
	for k, v := range cfg.Spec.Kubelet.Config {
		got[k] = string(v)
	}
	if !maps.Equal(got, want) {
		t.Errorf("kubelet config %v, want %v", got, want)
	}
	if f := cfg.Spec.Kubelet.Flags; len(f) != 1 || f[0] != "--node-labels=alpha.eksctl.io/nodegroup-name=ng1" {
		t.Errorf("kubelet flags %q", f)
	}

	// Managed style refuses the bare NodeConfig as EKS does.
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.UserDataStyle = v1alpha1.UserDataStyleManaged })
	h.tick()
	if got := h.get(); !hasIssue(got.Status.Health.Issues, v1alpha1.IssueEc2LaunchTemplateInvalidConfig) {
		t.Errorf("managed style with a bare NodeConfig: issues %+v", got.Status.Health.Issues)
	}
}

// Nodes of an Eksctl-style group carry alpha.eksctl.io/nodegroup-name instead of
// eks.amazonaws.com/nodegroup; their events still reach the group.
func TestNodeGroupOfNode(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   []reconcile.Request
	}{
		{map[string]string{v1alpha1.LabelNodeGroup: "a"}, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "a"}}}},
		{map[string]string{v1alpha1.LabelEksctlNodeGroupName: "b"}, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "b"}}}},
		{map[string]string{v1alpha1.LabelNodeGroup: "a", v1alpha1.LabelEksctlNodeGroupName: "b"}, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "a"}}}},
		{map[string]string{"role": "worker"}, nil},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: c.labels}}
		if got := nodeGroupOfNode(context.Background(), n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("labels %v: %v, want %v", c.labels, got, c.want)
		}
	}
}

// Every NodeGroup user data style maps to a distinct renderer style (the ones the
// userdata package's property test covers); anything else is an error.
func TestStyle(t *testing.T) {
	seen := map[userdata.Style]bool{}
	for _, s := range v1alpha1.UserDataStyles {
		got, err := Style(s)
		if err != nil || seen[got] || (got != userdata.Managed && got != userdata.SelfManaged) {
			t.Errorf("Style(%s) = %q, %v", s, got, err)
		}
		seen[got] = true
	}
	if got, err := Style(""); got != userdata.Managed || err != nil {
		t.Errorf(`Style("") = %q, %v; want managed`, got, err)
	}
	if _, err := Style("eksctl"); err == nil {
		t.Error(`Style("eksctl") (lower case) is accepted`)
	}
}
