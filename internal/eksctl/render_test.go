package eksctl

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	nodeconfigv1alpha1 "github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/pki"
	nodeadm "github.com/nodejoin/nodejoin/internal/userdata"
)

// seed002Endpoint is the (redacted) endpoint of seed 002's cluster.
const seed002Endpoint = "https://XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX.gr7.eu-west-1.eks.amazonaws.com"

func renderCA(t *testing.T) []byte {
	t.Helper()
	ca, err := pki.NewCA("kubernetes", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pki.EncodeCert(ca.Cert)
}

// noCloud is a nodeadm resolver for user data that must name everything itself.
type noCloud struct{}

func (noCloud) DescribeCluster(context.Context, string, int) (*nodeadm.ClusterInfo, error) {
	return nil, errors.New("generated user data must not need DescribeCluster")
}
func (noCloud) VPCIPv4CIDRs(context.Context) ([]string, error) {
	return nil, errors.New("generated user data must not need the VPC's ranges")
}

// renderGroup renders a converted group as the NodeGroup controller does (defaulted,
// nodegroup.Render) and decodes it through nodeadm into one merged NodeConfig's labels
// and max pods.
func renderGroup(t *testing.T, c userdata.Cluster, ng v1alpha1.NodeGroup) (data []byte, labels map[string]string, maxPods int) {
	t.Helper()
	ng.Default()
	data, err := nodegroup.Render(t.Context(), c, &ng, "")
	if err != nil {
		t.Fatalf("group %s (%s, %s): %v", ng.Name, ng.Spec.Template.AMIFamily, ng.Spec.Template.UserDataStyle, err)
	}
	res, err := nodeadm.Decode(t.Context(), data, noCloud{})
	if err != nil {
		t.Fatalf("group %s: nodeadm cannot decode its user data: %v", ng.Name, err)
	}
	var cfgs []*nodeconfigv1alpha1.NodeConfig
	for _, cfg := range res.Configs {
		cfgs = append(cfgs, cfg.Config)
	}
	merged, err := nodeconfig.Merge(cfgs)
	if err != nil {
		t.Fatalf("group %s: merging its NodeConfigs: %v", ng.Name, err)
	}
	if errs := merged.Validate(); len(errs) > 0 {
		t.Fatalf("group %s: the merged NodeConfig is invalid: %v", ng.Name, errs.ToAggregate())
	}
	if cl := merged.Spec.Cluster; cl.Name != c.Name || cl.APIServerEndpoint != c.Endpoint || cl.CIDR != c.ServiceCIDR {
		t.Errorf("group %s: cluster %s %s %s, want %s %s %s", ng.Name, cl.Name, cl.APIServerEndpoint, cl.CIDR, c.Name, c.Endpoint, c.ServiceCIDR)
	}
	labels = map[string]string{}
	for _, f := range merged.Spec.Kubelet.Flags {
		if v, ok := strings.CutPrefix(f, "--node-labels="); ok {
			labels = map[string]string{}
			for _, kv := range strings.Split(v, ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					labels[k] = v
				}
			}
		}
		if v, ok := strings.CutPrefix(f, "--max-pods="); ok {
			if maxPods, err = strconv.Atoi(v); err != nil {
				t.Fatalf("flag %s", f)
			}
		}
	}
	if raw, ok := merged.Spec.Kubelet.Config["maxPods"]; ok && maxPods == 0 {
		if maxPods, err = strconv.Atoi(string(raw)); err != nil {
			t.Fatalf("maxPods %s", raw)
		}
	}
	return data, labels, maxPods
}

// Every group of the seeds' and the fields' ClusterConfigs renders in its kind's style
// and decodes through nodeadm: self-managed groups (nodeGroups) as eksctl writes them
// (AmazonLinux2: gzip-compressed #cloud-config; no eks.amazonaws.com labels), managed
// groups as EKS does (eks.amazonaws.com/nodegroup).
func TestConvertedGroupsRenderInTheirStyle(t *testing.T) {
	ca := renderCA(t)
	for _, name := range []string{"seed000-ironman-2022", "seed001-bottlerocket", "seed001-windows", "seed002-demo-self-ng", "fields"} {
		res := convertFile(t, name+".yaml", readFile(t, name+".yaml"))
		c := userdata.Cluster{Name: res.Cluster, Endpoint: seed002Endpoint, CertificateAuthority: ca, ServiceCIDR: "10.100.0.0/16"}
		for _, ng := range res.NodeGroups {
			t.Run(name+"/"+ng.Name, func(t *testing.T) {
				typ := ng.Labels[LabelNodeGroupType]
				tp := ng.Spec.Template
				switch {
				case typ == TypeUnmanaged && tp.UserDataStyle != v1alpha1.UserDataStyleEksctl:
					t.Fatalf("self-managed group has userDataStyle %q, want Eksctl", tp.UserDataStyle)
				case typ == TypeManaged && tp.UserDataStyle != "":
					t.Fatalf("managed group has userDataStyle %q, want it unset (Managed)", tp.UserDataStyle)
				}
				data, labels, maxPods := renderGroup(t, c, ng)
				for k, v := range tp.Labels {
					if labels[k] != v {
						t.Errorf("label %s = %q, want %q (decoded labels %v)", k, labels[k], v, labels)
					}
				}
				_, eks := labels[userdata.LabelNodeGroup]
				if eks != (typ == TypeManaged) {
					t.Errorf("%s group: eks.amazonaws.com/nodegroup label present = %v; labels %v", typ, eks, labels)
				}
				if tp.MaxPods != nil && maxPods != int(*tp.MaxPods) {
					t.Errorf("max pods %d, want %d", maxPods, *tp.MaxPods)
				}
				gz := len(data) > 1 && data[0] == 0x1f && data[1] == 0x8b
				if want := typ == TypeUnmanaged && tp.AMIFamily == v1alpha1.AMIFamilyAmazonLinux2 && tp.UserData == ""; gz != want {
					t.Errorf("gzip-compressed cloud-config = %v, want %v:\n%.300s", gz, want, data)
				}
			})
		}
	}
}

// Seed 002's self-managed group renders as the cloud-config the seed decodes: the same
// runcmd, the same files in the same order with the same owners and modes, and
// kubelet.env with the same keys and values (the endpoint and CA aside; the runtime is
// containerd, the only one nodejoin runs).
func TestSeed002CloudConfig(t *testing.T) {
	res := convertFile(t, "seed002-demo-self-ng.yaml", readFile(t, "seed002-demo-self-ng.yaml"))
	if len(res.NodeGroups) != 1 {
		t.Fatalf("%d groups", len(res.NodeGroups))
	}
	ca := renderCA(t)
	c := userdata.Cluster{Name: res.Cluster, Endpoint: seed002Endpoint, CertificateAuthority: ca, ServiceCIDR: "10.100.0.0/16"}
	data, labels, _ := renderGroup(t, c, res.NodeGroups[0])
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	doc, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(doc), "#cloud-config\npackages: null\nruncmd:\n") {
		t.Errorf("cloud-config starts %.60q", doc)
	}
	var cc struct {
		RunCmd     [][]string                                           `json:"runcmd"`
		WriteFiles []struct{ Content, Owner, Path, Permissions string } `json:"write_files"`
	}
	if err := sigsyaml.Unmarshal(doc, &cc); err != nil {
		t.Fatal(err)
	}
	// From the seed's decoded user data.
	wantRun := [][]string{{"/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh"}, {"/var/lib/cloud/scripts/eksctl/bootstrap.helper.sh"}}
	if !reflect.DeepEqual(cc.RunCmd, wantRun) {
		t.Errorf("runcmd %q, want %q", cc.RunCmd, wantRun)
	}
	wantFiles := []string{
		"/etc/eksctl/kubelet-extra.json root:root 0644",
		"/etc/eksctl/kubelet.env root:root 0644",
		"/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh root:root 0755",
		"/var/lib/cloud/scripts/eksctl/bootstrap.helper.sh root:root 0755",
	}
	var files []string
	env := map[string]string{}
	for _, f := range cc.WriteFiles {
		files = append(files, f.Path+" "+f.Owner+" "+f.Permissions)
		switch f.Path {
		case "/etc/eksctl/kubelet-extra.json":
			if f.Content != "{}" {
				t.Errorf("kubelet-extra.json = %q, want {}", f.Content)
			}
		case "/etc/eksctl/kubelet.env":
			for _, line := range strings.Split(f.Content, "\n") {
				k, v, _ := strings.Cut(line, "=")
				env[k] = v
			}
		}
	}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Errorf("write_files\n%q\nwant\n%q", files, wantFiles)
	}
	wantEnv := map[string]string{
		"NODE_TAINTS":       "",
		"CLUSTER_DNS":       "10.100.0.10",
		"CONTAINER_RUNTIME": "containerd", // the seed's dockerd is listed as ignored
		"CLUSTER_NAME":      "ironman-2022",
		"API_SERVER_URL":    seed002Endpoint,
		"B64_CLUSTER_CA":    base64.StdEncoding.EncodeToString(ca),
		"NODE_LABELS":       "alpha.eksctl.io/cluster-name=ironman-2022,alpha.eksctl.io/nodegroup-name=demo-self-ng",
	}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("kubelet.env\n%v\nwant\n%v", env, wantEnv)
	}
	if want := map[string]string{LabelClusterName: "ironman-2022", LabelNodeGroupName: "demo-self-ng"}; !maps.Equal(labels, want) {
		t.Errorf("nodeadm decodes labels %v, want %v", labels, want)
	}
	if !slices.Contains(res.Ignored, Ignored{Field: "nodeGroups[0].containerRuntime", Line: 16, Value: "dockerd", Reason: "containerd is the only container runtime"}) {
		t.Errorf("containerRuntime is not listed as ignored: %v", res.Ignored)
	}
}

// overrideBootstrapCommand of an AmazonLinux2023 group is merged last in both kinds: a
// self-managed group's as eksctl appends it, a managed group's as a MIME part (EKS takes
// MIME only), so its settings win either way.
func TestOverrideBootstrapAL2023(t *testing.T) {
	const doc = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata:\n  name: c1\n"
	const override = "    overrideBootstrapCommand: |\n      apiVersion: node.eks.aws/v1alpha1\n      kind: NodeConfig\n      spec:\n        kubelet:\n          config:\n            shutdownGracePeriod: 5m\n"
	ca := renderCA(t)
	c := userdata.Cluster{Name: "c1", Endpoint: seed002Endpoint, CertificateAuthority: ca, ServiceCIDR: "10.100.0.0/16"}
	for _, kind := range []string{"nodeGroups", "managedNodeGroups"} {
		t.Run(kind, func(t *testing.T) {
			res := convertFile(t, "cluster.yaml", []byte(doc+kind+":\n  - name: ng\n"+override))
			ng := res.NodeGroups[0]
			ng.Default()
			data, err := nodegroup.Render(t.Context(), c, &ng, "")
			if err != nil {
				t.Fatal(err)
			}
			dec, err := nodeadm.Decode(t.Context(), data, noCloud{})
			if err != nil {
				t.Fatal(err)
			}
			var cfgs []*nodeconfigv1alpha1.NodeConfig
			for _, cfg := range dec.Configs {
				cfgs = append(cfgs, cfg.Config)
			}
			merged, err := nodeconfig.Merge(cfgs)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(merged.Spec.Kubelet.Config["shutdownGracePeriod"]); got != `"5m"` {
				t.Errorf("shutdownGracePeriod %s, want \"5m\" from the override:\n%s", got, data)
			}
		})
	}
}
