package userdata

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// fakeResolver answers DescribeCluster for the clusters it knows and counts the calls.
type fakeResolver struct {
	cluster string
	info    ClusterInfo
	others  map[string]ClusterInfo
	vpc     []string
	calls   int
	retries int
}

func (f *fakeResolver) DescribeCluster(_ context.Context, name string, retries int) (*ClusterInfo, error) {
	f.calls++
	f.retries = retries
	info, ok := f.others[name]
	if name == f.cluster {
		info, ok = f.info, true
	}
	if !ok {
		return nil, fmt.Errorf("ResourceNotFoundException: No cluster found for name: %s", name)
	}
	return &info, nil
}

func (f *fakeResolver) VPCIPv4CIDRs(context.Context) ([]string, error) { return f.vpc, nil }

const testCAPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

var testCAB64 = base64.StdEncoding.EncodeToString([]byte(testCAPEM))

func translateOne(t *testing.T, data string, r Resolver) (*v1alpha1.NodeConfig, []Finding) {
	t.Helper()
	res, err := Decode(t.Context(), []byte(data), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Configs) != 1 {
		t.Fatalf("%d configs, want 1; findings %v", len(res.Configs), res.Findings)
	}
	return res.Configs[0].Config, res.Findings
}

func kubeletConfig(t *testing.T, c *v1alpha1.NodeConfig) string {
	t.Helper()
	b, err := json.Marshal(c.Spec.Kubelet.Config)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasFinding(fs []Finding, level Level, substr string) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Level == level && strings.Contains(f.Msg, substr) })
}

func TestBootstrapFlagsTranslate(t *testing.T) {
	script := "#!/bin/bash\nset -ex\nB64_CLUSTER_CA=" + testCAB64 + "\nAPI_SERVER_URL=https://abc.gr7.eu-west-1.eks.amazonaws.com\nK8S_CLUSTER_DNS_IP=10.100.0.10\n" +
		"/etc/eks/bootstrap.sh ironman --kubelet-extra-args '--node-labels=a=b,c=d --max-pods=29' --b64-cluster-ca $B64_CLUSTER_CA --apiserver-endpoint $API_SERVER_URL --dns-cluster-ip $K8S_CLUSTER_DNS_IP --use-max-pods false --pause-container-version 3.5\n"
	r := &fakeResolver{}
	c, findings := translateOne(t, script, r)
	if r.calls != 0 {
		t.Error("DescribeCluster called although endpoint and CA were given")
	}
	cl := c.Spec.Cluster
	if cl.Name != "ironman" || cl.APIServerEndpoint != "https://abc.gr7.eu-west-1.eks.amazonaws.com" || string(cl.CertificateAuthority) != testCAPEM || cl.CIDR != "10.100.0.0/16" {
		t.Errorf("cluster = %+v", cl)
	}
	if !slices.Equal(c.Spec.Kubelet.Flags, []string{"--node-labels=a=b,c=d", "--max-pods=29"}) {
		t.Errorf("flags = %q", c.Spec.Kubelet.Flags)
	}
	if got := kubeletConfig(t, c); got != `{"clusterDNS":["10.100.0.10"],"maxPods":110}` {
		t.Errorf("kubelet config = %s", got)
	}
	if !hasFinding(findings, LevelIgnored, "--pause-container-version 3.5") || !hasFinding(findings, LevelInfo, "inferred from --dns-cluster-ip 10.100.0.10") {
		t.Errorf("findings = %v", findings)
	}
}

func TestBootstrapClusterNameOnlyDescribesTheCluster(t *testing.T) {
	r := &fakeResolver{cluster: "bys-dev-eks-main", info: ClusterInfo{
		Endpoint: "https://x.eks.amazonaws.com", CertificateData: []byte(testCAPEM), ServiceIPv4CIDR: "172.20.0.0/16", IPFamily: "ipv4",
	}}
	c, _ := translateOne(t, "set -ex\n/etc/eks/bootstrap.sh bys-dev-eks-main --aws-api-retry-attempts 5\n", r)
	if r.calls != 1 || r.retries != 5 {
		t.Errorf("DescribeCluster calls %d retries %d", r.calls, r.retries)
	}
	if c.Spec.Cluster.APIServerEndpoint != "https://x.eks.amazonaws.com" || c.Spec.Cluster.CIDR != "172.20.0.0/16" || string(c.Spec.Cluster.CertificateAuthority) != testCAPEM {
		t.Errorf("cluster = %+v", c.Spec.Cluster)
	}

	_, err := Decode(t.Context(), []byte("/etc/eks/bootstrap.sh other\n"), r)
	if err == nil || !strings.Contains(err.Error(), "describing cluster other: ResourceNotFoundException") {
		t.Errorf("error = %v", err)
	}
	_, err = Decode(t.Context(), []byte("/etc/eks/bootstrap.sh other\n"), nil)
	if !errors.Is(err, ErrNoResolver) || !strings.Contains(err.Error(), "gives no --apiserver-endpoint or --b64-cluster-ca for cluster other") {
		t.Errorf("error without resolver = %v", err)
	}
}

func TestBootstrapServiceCIDRRules(t *testing.T) {
	base := "/etc/eks/bootstrap.sh c --apiserver-endpoint https://x --b64-cluster-ca " + testCAB64
	tests := []struct {
		name, args string
		vpc        []string
		cidr, dns  string
		wantErr    string
	}{
		{"service CIDR flag", " --service-ipv4-cidr 192.168.0.0/16", nil, "192.168.0.0/16", "", ""},
		{"VPC in 10/8", "", []string{"10.0.0.0/16"}, "172.20.0.0/16", "", ""},
		{"VPC elsewhere", "", []string{"192.168.0.0/16"}, "10.100.0.0/16", "", ""},
		{"custom DNS list", " --dns-cluster-ip 192.168.0.1,192.168.0.2", []string{"192.168.0.0/16"}, "10.100.0.0/16", `["192.168.0.1","192.168.0.2"]`, ""},
		{"IPv6 CIDR", " --service-ipv6-cidr fd00::/108", nil, "fd00::/108", "", ""},
		{"IPv6 without CIDR or DNS", " --ip-family ipv6", nil, "", "", "one of --service-ipv6-cidr or --dns-cluster-ip must be provided"},
		{"IPv4 family with IPv6 CIDR", " --ip-family ipv4 --service-ipv6-cidr fd00::/108", nil, "", "", "--ip-family should be ipv6"},
		{"docker", " --container-runtime docker", nil, "", "", "containerd is the only supported container runtime"},
		{"unknown flag", " --max-pods 3", nil, "", "", "unknown bootstrap.sh flag --max-pods"},
		{"flag without value", " --use-max-pods", nil, "", "", "flag --use-max-pods has no value"},
		{"bad bool", " --use-max-pods nope", nil, "", "", "want true or false"},
		{"bad CA", " --b64-cluster-ca %%%", nil, "", "", "--b64-cluster-ca is not base64"},
		{"two names", " other", nil, "", "", `bootstrap.sh takes one cluster name, got ["c" "other"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Decode(t.Context(), []byte(base+tt.args+"\n"), &fakeResolver{vpc: tt.vpc})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := res.Configs[0].Config
			if c.Spec.Cluster.CIDR != tt.cidr {
				t.Errorf("cidr = %q, want %q", c.Spec.Cluster.CIDR, tt.cidr)
			}
			if tt.dns != "" && string(c.Spec.Kubelet.Config["clusterDNS"]) != tt.dns {
				t.Errorf("clusterDNS = %s, want %s", c.Spec.Kubelet.Config["clusterDNS"], tt.dns)
			}
		})
	}
}

func TestReservedCPUsDropReservedCgroups(t *testing.T) {
	c, _ := translateOne(t, "/etc/eks/bootstrap.sh c --apiserver-endpoint https://x --b64-cluster-ca "+testCAB64+" --dns-cluster-ip 172.20.0.10 --kubelet-extra-args '--reserved-cpus=0-1'\n", nil)
	if got := kubeletConfig(t, c); got != `{"clusterDNS":["172.20.0.10"],"kubeReservedCgroup":"","systemReservedCgroup":""}` {
		t.Errorf("kubelet config = %s", got)
	}
}

func TestCloudConfigEksctl(t *testing.T) {
	env := "CLUSTER_NAME=ironman\nAPI_SERVER_URL=https://x.eks.amazonaws.com\nB64_CLUSTER_CA=" + testCAB64 + "\nNODE_LABELS=alpha.eksctl.io/nodegroup-name=ng1,role=web\nNODE_TAINTS=dedicated=web:NoSchedule\nMAX_PODS=17\nCLUSTER_DNS=172.20.0.10\n"
	cc := "#cloud-config\npackages: null\nruncmd:\n- - /bin/bash\n  - -c\n  - echo pre-bootstrap\n- - /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\nwrite_files:\n" +
		"- content: '{\"evictionHard\":{\"memory.available\":\"200Mi\"}}'\n  owner: root:root\n  path: /etc/eksctl/kubelet-extra.json\n  permissions: \"0644\"\n" +
		"- content: |\n" + indent(env, "    ") + "  owner: root:root\n  path: /etc/eksctl/kubelet.env\n  permissions: \"0644\"\n" +
		"- content: '#!/bin/bash'\n  path: /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\n  permissions: \"0755\"\n"
	c, findings := translateOne(t, string(b64(gz(t, cc))), nil)
	if c.Spec.Cluster.Name != "ironman" || c.Spec.Cluster.CIDR != "172.20.0.0/16" {
		t.Errorf("cluster = %+v", c.Spec.Cluster)
	}
	if !slices.Equal(c.Spec.Kubelet.Flags, []string{"--node-labels=alpha.eksctl.io/nodegroup-name=ng1,role=web", "--register-with-taints=dedicated=web:NoSchedule"}) {
		t.Errorf("flags = %q", c.Spec.Kubelet.Flags)
	}
	if got := kubeletConfig(t, c); got != `{"clusterDNS":["172.20.0.10"],"evictionHard":{"memory.available":"200Mi"},"maxPods":17}` {
		t.Errorf("kubelet config = %s", got)
	}
	if !hasFinding(findings, LevelIgnored, `runcmd commands other than eksctl's scripts are not run by nodeadm: "echo pre-bootstrap"`) {
		t.Errorf("findings = %v", findings)
	}
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

func TestBottlerocket(t *testing.T) {
	toml := "[settings.kubernetes]\ncluster-name = 'c'\napi-server = 'https://x'\ncluster-certificate = '" + testCAB64 + "'\ncluster-dns-ip = '172.20.0.10'\nmax-pods = 20\n" +
		"[settings.kubernetes.node-labels]\n'alpha.eksctl.io/nodegroup-name' = 'ng'\n'a' = 'b'\n[settings.kubernetes.node-taints]\n'dedicated' = 'gpu:NoSchedule'\n'spot' = ['true:PreferNoSchedule']\n" +
		"[settings.host-containers.admin]\nenabled = true\n"
	c, findings := translateOne(t, toml, nil)
	if c.Spec.Cluster.Name != "c" || c.Spec.Cluster.CIDR != "172.20.0.0/16" || string(c.Spec.Cluster.CertificateAuthority) != testCAPEM {
		t.Errorf("cluster = %+v", c.Spec.Cluster)
	}
	if !slices.Equal(c.Spec.Kubelet.Flags, []string{"--node-labels=a=b,alpha.eksctl.io/nodegroup-name=ng"}) {
		t.Errorf("flags = %q", c.Spec.Kubelet.Flags)
	}
	want := `{"clusterDNS":["172.20.0.10"],"maxPods":20,"registerWithTaints":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"},{"key":"spot","value":"true","effect":"PreferNoSchedule"}]}`
	if got := kubeletConfig(t, c); got != want {
		t.Errorf("kubelet config = %s", got)
	}
	if !hasFinding(findings, LevelIgnored, "settings.host-containers") {
		t.Errorf("findings = %v", findings)
	}
	_, err := Decode(t.Context(), []byte("[settings.kubernetes]\ncluster-name = 'c'\nmax-pods = 'many'\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "max-pods: want a positive integer") {
		t.Errorf("error = %v", err)
	}
	_, err = Decode(t.Context(), []byte("[settings.kubernetes]\ncluster-name = 'c\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("syntax error = %v", err)
	}
}

func TestOtherPartsAreListed(t *testing.T) {
	data := mimeDoc("Content-Type: application/node.eks.aws\n\n"+nodeConfigDoc, "Content-Type: text/x-shellscript\n\n#!/bin/bash\nyum install -y htop\n", "Content-Type: text/plain\n\nnotes\n")
	res, err := Decode(t.Context(), []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Configs) != 1 || res.Configs[0].Source != "user data part 1" {
		t.Errorf("configs = %+v", res.Configs)
	}
	if !hasFinding(res.Findings, LevelIgnored, "shell script without a bootstrap.sh call") || !hasFinding(res.Findings, LevelIgnored, "other (text/plain)") {
		t.Errorf("findings = %v", res.Findings)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(nodeConfigDoc))
	f.Add([]byte("#!/bin/bash\nX=1\n/etc/eks/bootstrap.sh c --apiserver-endpoint https://x --b64-cluster-ca " + testCAB64 + " --dns-cluster-ip $X\n"))
	f.Add([]byte("#cloud-config\nwrite_files:\n- path: /etc/eksctl/kubelet.env\n  content: CLUSTER_NAME=c\n"))
	f.Add([]byte("[settings.kubernetes]\ncluster-name = 'c'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Decode(t.Context(), data, &fakeResolver{cluster: "c", info: ClusterInfo{Endpoint: "https://x", ServiceIPv4CIDR: "10.100.0.0/16"}})
		if err == nil && res == nil {
			t.Fatal("nil result without error")
		}
	})
}

func TestNodeJoinConfigPartCarriesABootstrapToken(t *testing.T) {
	data := mimeDoc("Content-Type: application/node.eks.aws\n\n"+nodeConfigDoc,
		"Content-Type: application/nodejoin.io\n\napiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: abcdef.0123456789abcdef\n")
	res, err := Decode(t.Context(), []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.BootstrapToken != "abcdef.0123456789abcdef" || len(res.Configs) != 1 {
		t.Errorf("token %q, %d configs", res.BootstrapToken, len(res.Configs))
	}
	for _, f := range res.Findings {
		if strings.Contains(f.Msg, "0123456789abcdef") {
			t.Errorf("finding shows the token: %s", f)
		}
	}
}

func TestBottlerocketBootstrapToken(t *testing.T) {
	base := "[settings.kubernetes]\ncluster-name = \"demo\"\napi-server = \"https://198.18.0.1:6443\"\ncluster-certificate = \"Y2E=\"\ncluster-dns-ip = \"10.100.0.10\"\n"
	res, err := Decode(t.Context(), []byte(base+"bootstrap-token = \"abcdef.0123456789abcdef\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.BootstrapToken != "abcdef.0123456789abcdef" || len(res.Configs) != 1 {
		t.Errorf("token %q, %d configs", res.BootstrapToken, len(res.Configs))
	}
	for _, f := range res.Findings {
		if strings.Contains(f.Msg, "0123456789abcdef") {
			t.Errorf("finding shows the token: %s", f)
		}
		if f.Level == LevelIgnored && strings.Contains(f.Msg, "bootstrap-token") {
			t.Errorf("bootstrap-token reported as ignored: %s", f)
		}
	}
	_, err = Decode(t.Context(), []byte(base+"bootstrap-token = \"ABCDEF.secretsecretsecret\"\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "settings.kubernetes.bootstrap-token") || strings.Contains(err.Error(), "secretsecret") {
		t.Errorf("malformed token: got %v, want an error naming the setting without quoting it", err)
	}
}
