package userdata

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ptr[T any](v T) *T { return &v }

// goldenCases cover every family and style; the names say which reference vector
// (userdata-and-nodegroups.md §8) a case reproduces.
var goldenCases = []struct {
	name string
	c    Cluster
	t    Template
}{
	{
		name: "tv2-al2-eksctl-cloud-config",
		c:    Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("test"), ServiceCIDR: "10.100.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2, Style: SelfManaged, NodeGroupName: "ng1",
			Labels:  map[string]string{"alpha.eksctl.io/cluster-name": "c1", "alpha.eksctl.io/nodegroup-name": "ng1", "role": "worker"},
			Taints:  []corev1.Taint{{Key: "key1", Value: "value1", Effect: corev1.TaintEffectNoSchedule}},
			MaxPods: ptr[int32](123), Kubelet: map[string]any{"foo": "bar"}},
	},
	{
		name: "tv2-al2-eksctl-prebootstrap-token-mime",
		c:    Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("test"), ServiceCIDR: "10.96.0.0/12", BootstrapToken: "abcdef.0123456789abcdef"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2, Style: SelfManaged, NodeGroupName: "ng1", PreBootstrapCommands: []string{"date"},
			UserData: "#!/bin/bash\necho hello\n"},
	},
	{
		name: "seed000-al2-managed",
		c:    Cluster{Name: "ironman-2022", Endpoint: "https://1234567890ABCDEFGHIJKLMNOPQRSTUV.gr7.eu-west-1.eks.amazonaws.com", CertificateAuthority: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), ServiceCIDR: "10.100.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2, Style: Managed, NodeGroupName: "ng1-public-ssh", InstanceType: "m5.large",
			Labels:     map[string]string{"alpha.eksctl.io/cluster-name": "ironman-2022", "alpha.eksctl.io/nodegroup-name": "ng1-public-ssh"},
			ReleaseAMI: "ami-0ec9e1727a24fb788", LaunchTemplateID: "lt-000b4417a7baebbf8", LaunchTemplateVersion: "1"},
	},
	{
		name: "al2-managed-user-mime-taints",
		c:    Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("test"), ServiceCIDR: "172.30.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2, Style: Managed, NodeGroupName: "ng1", CapacityType: "SPOT", MaxPods: ptr[int32](17),
			Taints:   []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
			UserData: "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"==MYBOUNDARY==\"\r\n\r\n--==MYBOUNDARY==\r\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\r\n\r\n#!/bin/bash\r\necho \"Running custom user data script\"\r\n\r\n--==MYBOUNDARY==--\r\n"},
	},
	{
		name: "tv3-al2023-eksctl",
		c:    Cluster{Name: "al2023-test", Endpoint: "https://test.xxx.us-west-2.eks.amazonaws.com", CertificateAuthority: []byte("test CA"), ServiceCIDR: "10.100.0.0/16"},
		t:    Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: SelfManaged, NodeGroupName: "al2023-mng-test", Labels: map[string]string{"alpha.eksctl.io/nodegroup-name": "al2023-mng-test"}},
	},
	{
		name: "tv3-al2023-eksctl-maxpods-taint-kubelet-override",
		c:    Cluster{Name: "al2023-test", Endpoint: "https://test.xxx.us-west-2.eks.amazonaws.com", CertificateAuthority: []byte("test CA"), ServiceCIDR: "10.100.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: SelfManaged, NodeGroupName: "al2023-mng-test", MaxPods: ptr[int32](11),
			Labels:               map[string]string{"alpha.eksctl.io/nodegroup-name": "al2023-mng-test"},
			Taints:               []corev1.Taint{{Key: "special", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			Kubelet:              map[string]any{"shutdownGracePeriod": "5m", "kubeReserved": map[string]any{"cpu": "500m", "memory": "250Mi"}},
			PreBootstrapCommands: []string{"echo pre"},
			UserData:             `{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"instance":{"localStorage":{"strategy":"RAID0"}},"kubelet":{"config":{"shutdownGracePeriod":"5m"}}}}`},
	},
	{
		name: "tv4-al2023-eksctl-ipv6",
		c:    Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("test"), ServiceCIDR: "fd40:6404:f93b::/108"},
		t:    Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: SelfManaged, NodeGroupName: "ng1", Labels: map[string]string{"role": "worker"}},
	},
	{
		name: "seed001-al2023-managed-user-nodeconfig",
		c:    Cluster{Name: "my-cluster", Endpoint: "https://1111122222.sk1.ap-northeast-2.eks.amazonaws.com", CertificateAuthority: []byte("certificateAuthority"), ServiceCIDR: "172.20.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: Managed, NodeGroupName: "ng-al2023", InstanceType: "t3.medium", ReleaseAMI: "ami-057051082a0861071",
			Kubelet:  map[string]any{"shutdownGracePeriod": "30s", "featureGates": map[string]any{"DisableKubeletCloudCredentialProviders": true}},
			UserData: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 20\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\n--BOUNDARY--\n"},
	},
	{
		name: "al2023-managed-bootstrap-token",
		c:    Cluster{Name: "local", Endpoint: "https://10.0.0.1:6443", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.96.0.0/12", BootstrapToken: "abcdef.0123456789abcdef"},
		t:    Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: Managed, NodeGroupName: "ng", InstanceType: "unknown.type"},
	},
	{
		name: "tv6-bottlerocket-eksctl",
		c:    Cluster{Name: "c1", Endpoint: "https://X.eks.amazonaws.com", CertificateAuthority: []byte("CA")},
		t: Template{Family: v1alpha1.AMIFamilyBottlerocket, Style: SelfManaged, NodeGroupName: "ng1", MaxPods: ptr[int32](50),
			Labels: map[string]string{"alpha.eksctl.io/cluster-name": "c1", "alpha.eksctl.io/nodegroup-name": "ng1", "role": "worker"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
	},
	{
		name: "tv6-bottlerocket-eksctl-user-admin",
		c:    Cluster{Name: "c1", Endpoint: "https://X.eks.amazonaws.com", CertificateAuthority: []byte("CA"), ServiceCIDR: "10.100.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyBottlerocket, Style: SelfManaged, NodeGroupName: "ng1",
			UserData: "[settings.host-containers.admin]\nenabled = \"user-val\"\n[settings.kubernetes]\ncluster-name = \"ignored\"\n[settings.ntp]\ntime-servers = [\"169.254.169.123\"]\n"},
	},
	{
		name: "seed001-bottlerocket-managed",
		c:    Cluster{Name: "bys-dev-eks-sec", Endpoint: "https://A2FAB60F0DBB94CDCD057CE2227F2252.yl4.ap-northeast-2.eks.amazonaws.com", CertificateAuthority: []byte("CA"), ServiceCIDR: "172.20.0.0/16"},
		t: Template{Family: v1alpha1.AMIFamilyBottlerocket, Style: Managed, NodeGroupName: "ng-bottlerocket", InstanceType: "m5.large", ReleaseAMI: "ami-0c0c53d11a3f898ea",
			LaunchTemplateID: "lt-05fd1822cf902ddbe", LaunchTemplateVersion: "1",
			Labels:   map[string]string{"alpha.eksctl.io/cluster-name": "bys-dev-eks-sec", "alpha.eksctl.io/nodegroup-name": "ng-bottlerocket"},
			Kubelet:  map[string]any{"kubeReserved": map[string]any{"memory": "475Mi"}, "evictionHard": map[string]any{"memory.available": "12%"}},
			UserData: "settings.kubernetes.max-pods = 20\nsettings.host-containers.admin.enabled = true\n[settings.network]\nhostname = \"h\"\n"},
	},
	{
		name: "tv8-windows-eksctl",
		c:    Cluster{Name: "windohs", Endpoint: "https://test.com", CertificateAuthority: []byte("test"), ServiceCIDR: "10.100.0.0/16", DNSClusterIP: "172.20.0.10"},
		t:    Template{Family: v1alpha1.AMIFamilyWindows, Style: SelfManaged, NodeGroupName: "win", MaxPods: ptr[int32](100)},
	},
	{
		name: "windows-managed-user-powershell",
		c:    Cluster{Name: "test-cluster", Endpoint: "https://test-cluster", CertificateAuthority: []byte("ca-bundle\n"), ServiceCIDR: "10.0.100.0/24"},
		t: Template{Family: v1alpha1.AMIFamilyWindows, Style: Managed, NodeGroupName: "win", InstanceType: "m5.large",
			Labels:               map[string]string{"os": "windows"},
			Taints:               []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}},
			PreBootstrapCommands: []string{`Write-Host "pre"`},
			UserData:             "<powershell>\nWrite-Host \"Running custom user data script\"\nWrite-Host \"Finished running custom user data script\"\n</powershell>\n"},
	},
}

// readable returns rendered user data as a golden file holds it: gzip is undone (and
// must be present where the case says so).
func readable(t *testing.T, data []byte) []byte {
	t.Helper()
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte("# gzip-compressed\n"), out...)
	}
	return data
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.c, tc.t)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Render(tc.c, tc.t)
			if err != nil || !bytes.Equal(out, again) {
				t.Fatalf("Render is not deterministic")
			}
			checkGolden(t, filepath.Join("testdata", "golden", tc.name+".txt"), readable(t, out))
		})
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestReferenceVectors compares whole outputs with the reference's vectors (TV3, TV6)
// and the properties the others state (TV2, TV8).
func TestReferenceVectors(t *testing.T) {
	render := func(name string) string {
		for _, tc := range goldenCases {
			if tc.name == name {
				out, err := Render(tc.c, tc.t)
				if err != nil {
					t.Fatal(err)
				}
				return string(readable(t, out))
			}
		}
		t.Fatalf("no case %s", name)
		return ""
	}
	// The one difference from TV3: the boundary is quoted (see writeMIME).
	tv3 := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n" +
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata: {}\nspec:\n  cluster:\n    apiServerEndpoint: https://test.xxx.us-west-2.eks.amazonaws.com\n" +
		"    certificateAuthority: dGVzdCBDQQ==\n    cidr: 10.100.0.0/16\n    name: al2023-test\n  containerd: {}\n  instance:\n    localStorage: {}\n    network: {}\n" +
		"  kubelet:\n    config:\n      clusterDNS:\n      - 10.100.0.10\n    flags:\n    - --node-labels=alpha.eksctl.io/nodegroup-name=al2023-mng-test\n\n--//--\n"
	if got := render("tv3-al2023-eksctl"); got != tv3 {
		t.Errorf("TV3:\n%s\nwant:\n%s", got, tv3)
	}
	tv6 := "\n[settings]\n\n  [settings.host-containers]\n\n    [settings.host-containers.admin]\n\n      # Bottlerocket Admin Container\n      # enabled = false\n\n" +
		"  [settings.kubernetes]\n\n    # Kubernetes Control Plane API Endpoint\n    api-server = \"https://X.eks.amazonaws.com\"\n\n" +
		"    # Kubernetes Cluster CA Certificate\n    cluster-certificate = \"Q0E=\"\n\n    # Kubernetes Cluster Name\n    cluster-name = \"c1\"\n    max-pods = 50\n\n" +
		"    [settings.kubernetes.node-labels]\n      \"alpha.eksctl.io/cluster-name\" = \"c1\"\n      \"alpha.eksctl.io/nodegroup-name\" = \"ng1\"\n      role = \"worker\"\n\n" +
		"    [settings.kubernetes.node-taints]\n      dedicated = \"gpu:NoSchedule\"\n"
	if got := render("tv6-bottlerocket-eksctl"); got != tv6 {
		t.Errorf("TV6:\n%s\nwant:\n%s", got, tv6)
	}
	tv2 := render("tv2-al2-eksctl-cloud-config")
	if !strings.HasPrefix(tv2, "# gzip-compressed\n#cloud-config\npackages: null\nruncmd:\n- - /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\n- - /var/lib/cloud/scripts/eksctl/bootstrap.helper.sh\nwrite_files:\n") {
		t.Errorf("TV2: the cloud-config does not start as eksctl's:\n%s", tv2)
	}
	for _, line := range []string{"CLUSTER_NAME=c1", "API_SERVER_URL=https://E", "B64_CLUSTER_CA=dGVzdA==", "NODE_TAINTS=key1=value1:NoSchedule", "MAX_PODS=123", "CLUSTER_DNS=10.100.0.10", "CONTAINER_RUNTIME=containerd", "content: '{\"foo\":\"bar\"}'"} {
		if !strings.Contains(tv2, line) {
			t.Errorf("TV2: no %q in\n%s", line, tv2)
		}
	}
	tv8 := render("tv8-windows-eksctl")
	if want := `& $EKSBootstrapScriptFile -EKSClusterName "windohs" -APIServerEndpoint "https://test.com" -Base64ClusterCA "dGVzdA==" -ServiceCIDR "10.100.0.0/16" -DNSClusterIP "172.20.0.10" -ContainerRuntime "containerd" -KubeletExtraArgs "--node-labels= --register-with-taints= --max-pods=100" 3>&1 4>&1 5>&1 6>&1`; !strings.Contains(tv8, want) {
		t.Errorf("TV8: want the line\n%s\nin\n%s", want, tv8)
	}
}

func TestRenderErrors(t *testing.T) {
	c := Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.0/16"}
	tests := []struct {
		name string
		c    Cluster
		t    Template
		want string
	}{
		{"no cluster endpoint", Cluster{Name: "c1", CertificateAuthority: []byte("ca")}, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng"}, "name, endpoint and CA are all required"},
		{"http endpoint", Cluster{Name: "c1", Endpoint: "http://E", CertificateAuthority: []byte("ca")}, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng"}, "want an https:// URL"},
		{"bad CIDR", Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.10/16"}, Template{Family: v1alpha1.AMIFamilyAmazonLinux2, NodeGroupName: "ng"}, "want a network address"},
		{"AL2023 without CIDR", Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("ca")}, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng"}, "needs the cluster's service CIDR"},
		{"no name", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023}, "node group name is required"},
		{"family", c, Template{Family: "Ubuntu2204", NodeGroupName: "ng"}, `AMI family "Ubuntu2204"`},
		{"style", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, Style: "karpenter", NodeGroupName: "ng"}, `style "karpenter"`},
		{"label key", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", Labels: map[string]string{"bad key": "v"}}, `label key "bad key"`},
		{"label value", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", Labels: map[string]string{"k": "a,b=c"}}, `label k value "a,b=c"`},
		{"taint effect", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", Taints: []corev1.Taint{{Key: "k", Effect: "Never"}}}, `taints[0] effect "Never"`},
		{"taint twice", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", Taints: []corev1.Taint{{Key: "k", Effect: "NoSchedule"}, {Key: "k", Value: "v", Effect: "NoSchedule"}}}, "appears twice"},
		{"max pods twice", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", MaxPods: ptr[int32](3), Kubelet: map[string]any{"maxPods": 4}}, "maxPods is set twice"},
		{"max pods zero", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", MaxPods: ptr[int32](0)}, "want a positive number"},
		{"critical kubelet", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", Kubelet: map[string]any{"authentication": map[string]any{}}}, "kubelet.authentication cannot be set"},
		{"AL2 managed kubelet", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2, NodeGroupName: "ng", Kubelet: map[string]any{"podPidsLimit": 5}}, "not supported for AmazonLinux2 managed groups"},
		{"Windows kubelet", c, Template{Family: v1alpha1.AMIFamilyWindows, NodeGroupName: "ng", Kubelet: map[string]any{"podPidsLimit": 5}}, "not supported for Windows"},
		{"Windows token", Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("ca"), BootstrapToken: "abcdef.0123456789abcdef"}, Template{Family: v1alpha1.AMIFamilyWindows, NodeGroupName: "ng"}, "bootstrap tokens are not supported for Windows"},
		{"Bottlerocket kubelet", c, Template{Family: v1alpha1.AMIFamilyBottlerocket, NodeGroupName: "ng", Kubelet: map[string]any{"registryPullQPS": 5}}, "kubelet.registryPullQPS has no Bottlerocket setting"},
		{"Bottlerocket pre-bootstrap", c, Template{Family: v1alpha1.AMIFamilyBottlerocket, NodeGroupName: "ng", PreBootstrapCommands: []string{"date"}}, "preBootstrapCommands are not supported for Bottlerocket"},
		{"Bottlerocket not TOML", c, Template{Family: v1alpha1.AMIFamilyBottlerocket, NodeGroupName: "ng", UserData: "#!/bin/bash\necho hi\n"}, "must be TOML"},
		{"Bottlerocket eksctl labels in settings", c, Template{Family: v1alpha1.AMIFamilyBottlerocket, Style: SelfManaged, NodeGroupName: "ng", UserData: "settings.kubernetes.node-labels.a = 'b'\n"}, "sets settings.kubernetes.node-labels"},
		{"managed AL2 not MIME", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2, NodeGroupName: "ng", UserData: "#!/bin/bash\necho hi\n"}, "user data was not in the MIME multipart format"},
		{"managed AL2023 not MIME", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", UserData: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"}, "user data was not in the MIME multipart format"},
		{"MIME without boundary", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", UserData: "MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nx\n"}, "has no boundary"},
		{"custom AMI without user data", c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng", AMIID: "ami-123"}, "EKS merges nothing into it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.c, tt.t)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestManagedCustomAMIUserDataIsVerbatim(t *testing.T) {
	c := Cluster{Name: "c1", Endpoint: "https://E", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.0/16"}
	own := "#!/bin/bash\n/etc/eks/bootstrap.sh c1\n"
	out, err := Render(c, Template{Family: v1alpha1.AMIFamilyAmazonLinux2, NodeGroupName: "ng", AMIID: "ami-123", UserData: own, Labels: map[string]string{"a": "b"}})
	if err != nil || string(out) != own {
		t.Fatalf("got %q, %v; want the user data as it is", out, err)
	}
}
