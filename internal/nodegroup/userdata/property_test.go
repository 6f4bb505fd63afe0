package userdata_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/pki"
	nodeadm "github.com/nodejoin/nodejoin/internal/userdata"
)

var (
	propertySeed  = flag.Uint64("property.seed", 1, "seed of the random templates")
	propertyCount = flag.Int("property.count", 150, "random templates per family and style")
)

// vpcResolver answers as an instance in a 192.168.0.0/16 VPC would; generated user
// data always names the endpoint and CA, so DescribeCluster must never be called.
type vpcResolver struct{}

func (vpcResolver) DescribeCluster(context.Context, string, int) (*nodeadm.ClusterInfo, error) {
	return nil, errors.New("generated user data must not need DescribeCluster")
}
func (vpcResolver) VPCIPv4CIDRs(context.Context) ([]string, error) {
	return []string{"192.168.0.0/16"}, nil
}

func testCA(t testing.TB) []byte {
	t.Helper()
	ca, err := pki.NewCA("kubernetes", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pki.EncodeCert(ca.Cert)
}

// gen draws random templates.
type gen struct{ r *mrand.Rand }

func (g gen) word(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 1+g.r.IntN(n))
	for i := range b {
		b[i] = letters[g.r.IntN(len(letters))]
	}
	b[0] = 'a' + byte(g.r.IntN(26)) //nolint:gosec // G115: IntN(26) < 26.
	return string(b)
}

func (g gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// kubeletPool are kubelet settings a template may carry: any for NodeConfig and
// kubelet-extra.json, only those with a setting for Bottlerocket.
var kubeletPool = []struct {
	key          string
	value        any
	bottlerocket bool
}{
	{"shutdownGracePeriod", "45s", true},
	{"kubeReserved", map[string]any{"cpu": "150m", "memory": "300Mi"}, true},
	{"evictionHard", map[string]any{"memory.available": "5%", "nodefs.available": "10%"}, true},
	{"podPidsLimit", float64(2048), true},
	{"cpuCFSQuota", false, true},
	{"containerLogMaxFiles", float64(3), true},
	{"imageGCHighThresholdPercent", float64(80), true},
	{"featureGates", map[string]any{"DisableKubeletCloudCredentialProviders": true}, false},
	{"registryPullQPS", float64(7), false},
}

// extra is what a case's own user data adds to the intended configuration.
type extra struct{ kubelet map[string]any }

func (g gen) template(f nodejoinv1alpha1.AMIFamily, s userdata.Style) (userdata.Cluster, userdata.Template, extra) {
	cidrs := []string{"10.100.0.0/16", "172.20.0.0/16", "10.96.0.0/12", "172.16.0.0/16"}
	if f == nodejoinv1alpha1.AMIFamilyAmazonLinux2023 || f == nodejoinv1alpha1.AMIFamilyAmazonLinux2 {
		cidrs = append(cidrs, "fd40:6404:f93b::/108")
	}
	c := userdata.Cluster{
		Name:        g.word(12),
		Endpoint:    g.pick("https://"+strings.ToUpper(g.word(20))+".gr7.eu-west-1.eks.amazonaws.com", "https://10.0.0.1:6443"),
		ServiceCIDR: cidrs[g.r.IntN(len(cidrs))],
	}
	if g.r.IntN(4) == 0 && !strings.Contains(c.ServiceCIDR, ":") {
		c.DNSClusterIP = strings.TrimSuffix(c.ServiceCIDR[:strings.LastIndex(c.ServiceCIDR, ".")], "") + ".53"
	}
	if f != nodejoinv1alpha1.AMIFamilyWindows && g.r.IntN(3) == 0 {
		c.BootstrapToken = "abcdef." + strings.Repeat("0123456789abcdef", 1)
	}
	t := userdata.Template{Family: f, Style: s, NodeGroupName: g.word(20),
		InstanceType: g.pick("m5.large", "t3.medium", "c5.24xlarge", "nonexistent.type"),
		CapacityType: g.pick("", "ON_DEMAND", "SPOT")}
	if s == userdata.Managed && g.r.IntN(2) == 0 {
		t.ReleaseAMI, t.LaunchTemplateID, t.LaunchTemplateVersion = "ami-0"+g.word(16), "lt-0"+g.word(16), strconv.Itoa(1+g.r.IntN(9))
	}
	t.Labels = map[string]string{}
	for range g.r.IntN(5) {
		k := g.word(10)
		if g.r.IntN(2) == 0 {
			k = g.word(6) + ".example.com/" + k
		}
		t.Labels[k] = g.pick("", g.word(10), g.word(5)+"-"+g.word(5))
	}
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	for range g.r.IntN(4) {
		taint := corev1.Taint{Key: g.word(8), Value: g.pick("", g.word(8)), Effect: effects[g.r.IntN(3)]}
		if g.r.IntN(3) == 0 {
			taint.Key = "example.com/" + taint.Key
		}
		if !slices.ContainsFunc(t.Taints, func(o corev1.Taint) bool { return o.Key == taint.Key && o.Effect == taint.Effect }) {
			t.Taints = append(t.Taints, taint)
		}
	}
	if g.r.IntN(2) == 0 {
		n := int32(1 + g.r.IntN(250)) //nolint:gosec // G115: between 1 and 250.
		t.MaxPods = &n
	}
	kubeletOK := f == nodejoinv1alpha1.AMIFamilyAmazonLinux2023 || f == nodejoinv1alpha1.AMIFamilyBottlerocket || f == nodejoinv1alpha1.AMIFamilyAmazonLinux2 && s == userdata.SelfManaged
	if kubeletOK {
		t.Kubelet = map[string]any{}
		for _, k := range kubeletPool {
			if g.r.IntN(3) == 0 && (f != nodejoinv1alpha1.AMIFamilyBottlerocket || k.bottlerocket) {
				t.Kubelet[k.key] = k.value
			}
		}
	}
	if f != nodejoinv1alpha1.AMIFamilyBottlerocket {
		for range g.r.IntN(3) {
			if f == nodejoinv1alpha1.AMIFamilyWindows {
				t.PreBootstrapCommands = append(t.PreBootstrapCommands, fmt.Sprintf("Write-Host %q", g.word(10)))
			} else {
				t.PreBootstrapCommands = append(t.PreBootstrapCommands, "echo "+g.word(10))
			}
		}
	}
	ex := extra{kubelet: map[string]any{}}
	if g.r.IntN(2) == 0 {
		switch f {
		case nodejoinv1alpha1.AMIFamilyWindows:
			t.UserData = "<powershell>\nWrite-Host \"" + g.word(10) + "\"\n</powershell>\n"
		case nodejoinv1alpha1.AMIFamilyBottlerocket:
			t.UserData = "[settings.ntp]\ntime-servers = [\"169.254.169.123\"]\n[settings.network]\nhostname = \"" + g.word(8) + "\"\n"
		default:
			shell := "#!/bin/bash\necho " + g.word(10) + "\n"
			nodeConfig := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      imageGCLowThresholdPercent: 60\n"
			if f == nodejoinv1alpha1.AMIFamilyAmazonLinux2023 && g.r.IntN(2) == 0 {
				ex.kubelet["imageGCLowThresholdPercent"] = float64(60)
				if s == userdata.SelfManaged && g.r.IntN(2) == 0 {
					t.UserData = nodeConfig
					break
				}
				t.UserData = mime(part{"application/node.eks.aws", nodeConfig}, part{`text/x-shellscript; charset="us-ascii"`, shell})
				break
			}
			t.UserData = mime(part{`text/x-shellscript; charset="us-ascii"`, shell})
			if s == userdata.SelfManaged && g.r.IntN(2) == 0 {
				t.UserData = shell
			}
		}
	}
	return c, t, ex
}

type part struct{ contentType, body string }

// mime writes a user's MIME document with CRLF line endings and its own boundary.
func mime(parts ...part) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"==USER==\"\r\n\r\n")
	for _, p := range parts {
		b.WriteString("--==USER==\r\nContent-Type: " + p.contentType + "\r\n\r\n" + strings.ReplaceAll(p.body, "\n", "\r\n") + "\r\n")
	}
	b.WriteString("--==USER==--\r\n")
	return b.String()
}

// effective is what a node ends up with, as compared by the property.
type effective struct {
	Name, Endpoint, CIDR, DNS string
	CA                        string
	Labels                    map[string]string
	Taints                    []string
	MaxPods                   int
	Kubelet                   map[string]string // JSON of each other kubelet config key
	Token                     string
}

// intended is what Render was asked for.
func intended(t *testing.T, c userdata.Cluster, tmpl userdata.Template, ex extra) effective {
	labels, err := userdata.NodeLabels(c, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	e := effective{Name: c.Name, Endpoint: c.Endpoint, CA: string(c.CertificateAuthority), CIDR: c.ServiceCIDR, Labels: labels, Kubelet: map[string]string{}, Token: c.BootstrapToken}
	e.DNS = c.DNSClusterIP
	if e.DNS == "" {
		e.DNS, _ = nodeconfig.ClusterDNS(c.ServiceCIDR)
	}
	for _, taint := range tmpl.Taints {
		e.Taints = append(e.Taints, taint.Key+"="+taint.Value+":"+string(taint.Effect))
	}
	sort.Strings(e.Taints)
	if tmpl.MaxPods != nil {
		e.MaxPods = int(*tmpl.MaxPods)
	} else if tmpl.Style != userdata.SelfManaged {
		if info, ok := instancetypes.Lookup(tmpl.InstanceType); ok {
			e.MaxPods = min(info.StandardMaxPods(), 110)
		}
	}
	for k, v := range tmpl.Kubelet {
		e.Kubelet[k] = jsonOf(t, v)
	}
	for k, v := range ex.kubelet {
		e.Kubelet[k] = jsonOf(t, v)
	}
	return e
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var norm any
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(norm)
	return string(b)
}

// decoded is what nodeadm makes of user data.
func decoded(t *testing.T, data []byte, _ userdata.Template) effective {
	res, err := nodeadm.Decode(t.Context(), data, vpcResolver{})
	if err != nil {
		t.Fatalf("nodeadm cannot decode it: %v", err)
	}
	cfgs := make([]*v1alpha1.NodeConfig, len(res.Configs))
	for i, c := range res.Configs {
		cfgs[i] = c.Config
	}
	merged, err := nodeconfig.Merge(cfgs)
	if err != nil {
		t.Fatalf("merging: %v", err)
	}
	if errs := merged.Validate(); len(errs) > 0 {
		t.Fatalf("the merged NodeConfig is invalid: %v", errs.ToAggregate())
	}
	cl := merged.Spec.Cluster
	e := effective{Name: cl.Name, Endpoint: cl.APIServerEndpoint, CA: string(cl.CertificateAuthority), CIDR: cl.CIDR, Labels: map[string]string{}, Kubelet: map[string]string{}, Token: res.BootstrapToken}
	for _, f := range merged.Spec.Kubelet.Flags {
		switch {
		case strings.HasPrefix(f, "--node-labels="):
			e.Labels = map[string]string{}
			for _, kv := range strings.Split(strings.TrimPrefix(f, "--node-labels="), ",") {
				if kv != "" {
					k, v, _ := strings.Cut(kv, "=")
					e.Labels[k] = v
				}
			}
		case strings.HasPrefix(f, "--register-with-taints="):
			e.Taints = nil
			for _, s := range strings.Split(strings.TrimPrefix(f, "--register-with-taints="), ",") {
				if s == "" {
					continue
				}
				kv, effect, _ := strings.Cut(s, ":")
				k, v, _ := strings.Cut(kv, "=")
				e.Taints = append(e.Taints, k+"="+v+":"+effect)
			}
		case strings.HasPrefix(f, "--max-pods="):
			n, err := strconv.Atoi(strings.TrimPrefix(f, "--max-pods="))
			if err != nil {
				t.Fatalf("flag %s", f)
			}
			e.MaxPods = n
		default:
			t.Errorf("unexpected kubelet flag %q", f)
		}
	}
	flagMaxPods := e.MaxPods
	for k, raw := range merged.Spec.Kubelet.Config {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		switch k {
		case "clusterDNS":
			list, _ := v.([]any)
			if len(list) != 1 {
				t.Fatalf("clusterDNS %s", raw)
			}
			e.DNS = list[0].(string)
		case "maxPods":
			if flagMaxPods == 0 {
				e.MaxPods = int(v.(float64))
			}
		case "registerWithTaints":
			var taints []corev1.Taint
			if err := json.Unmarshal(raw, &taints); err != nil {
				t.Fatal(err)
			}
			for _, taint := range taints {
				e.Taints = append(e.Taints, taint.Key+"="+taint.Value+":"+string(taint.Effect))
			}
		default:
			e.Kubelet[k] = jsonOf(t, v)
		}
	}
	if e.DNS == "" && cl.CIDR != "" {
		e.DNS, _ = nodeconfig.ClusterDNS(cl.CIDR)
	}
	sort.Strings(e.Taints)
	return e
}

// TestRenderDecodesToIntent is the property: for every family and style and random
// templates, nodeadm's decoder reads the generated user data back into a valid
// NodeConfig carrying the cluster, labels, taints, max pods and kubelet configuration
// the template asked for. -property.seed and -property.count vary the draw.
func TestRenderDecodesToIntent(t *testing.T) {
	ca := testCA(t)
	g := gen{r: mrand.New(mrand.NewPCG(*propertySeed, 0x5eed))} //nolint:gosec // G404: a seeded generator, so a failure reproduces.
	for _, f := range nodejoinv1alpha1.AMIFamilies {
		for _, s := range []userdata.Style{userdata.Managed, userdata.SelfManaged} {
			t.Run(string(f)+"/"+string(s), func(t *testing.T) {
				for i := range *propertyCount {
					c, tmpl, ex := g.template(f, s)
					c.CertificateAuthority = ca
					t.Run(strconv.Itoa(i), func(t *testing.T) { checkRoundTrip(t, c, tmpl, ex) })
				}
			})
		}
	}
}

// FuzzRenderDecodes is the same property over templates drawn from fuzzed seeds
// (go test -fuzz FuzzRenderDecodes ./internal/nodegroup/userdata).
func FuzzRenderDecodes(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed)
	}
	ca := testCA(f)
	styles := []userdata.Style{userdata.Managed, userdata.SelfManaged, ""}
	f.Fuzz(func(t *testing.T, seed uint64) {
		// One family and style per input, picked by the seed: each input costs one round
		// trip, so the fixed count of inputs make test fuzzes with stays within minutes,
		// and every family and style still comes up every twelve seeds.
		fam := nodejoinv1alpha1.AMIFamilies[seed%uint64(len(nodejoinv1alpha1.AMIFamilies))]
		s := styles[(seed/uint64(len(nodejoinv1alpha1.AMIFamilies)))%uint64(len(styles))]
		g := gen{r: mrand.New(mrand.NewPCG(seed, 0xf022))} //nolint:gosec // G404: seeded by the fuzzer, so a failure reproduces.
		c, tmpl, ex := g.template(fam, s)
		c.CertificateAuthority = ca
		checkRoundTrip(t, c, tmpl, ex)
	})
}

func checkRoundTrip(t *testing.T, c userdata.Cluster, tmpl userdata.Template, ex extra) {
	t.Helper()
	data, err := userdata.Render(c, tmpl)
	if err != nil {
		t.Fatalf("Render: %v\ntemplate %+v", err, tmpl)
	}
	again, _ := userdata.Render(c, tmpl)
	if string(again) != string(data) {
		t.Fatal("Render is not deterministic")
	}
	want := intended(t, c, tmpl, ex)
	got := decoded(t, data, tmpl)
	if tmpl.Family == nodejoinv1alpha1.AMIFamilyBottlerocket && (c.DNSClusterIP != "" || (c.ServiceCIDR != "10.100.0.0/16" && c.ServiceCIDR != "172.20.0.0/16")) {
		// Bottlerocket has no setting for the service range: nodeadm infers it from the
		// DNS address of EKS's two default ranges and otherwise from the VPC, as
		// bootstrap.sh does.
		want.CIDR, got.CIDR = "", ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v\nuser data:\n%s", got, want, data)
	}
}
