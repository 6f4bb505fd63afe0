package userdata

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPowerShellTranslates(t *testing.T) {
	tests := []struct {
		name       string
		data       string
		r          *fakeResolver
		wantName   string
		wantCIDR   string
		wantFlags  []string
		wantConfig map[string]string // kubelet config key → JSON
	}{
		{
			// eksctl's self-managed form (reference TV8 with -DNSClusterIP and --max-pods).
			name: "eksctl",
			data: "<powershell>\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
				"& $EKSBootstrapScriptFile -EKSClusterName \"windohs\" -APIServerEndpoint \"https://test.com\" -Base64ClusterCA \"" + testCAB64 + "\" -ServiceCIDR \"10.100.0.0/16\" -DNSClusterIP \"172.20.0.10\" -ContainerRuntime \"containerd\" -KubeletExtraArgs \"--node-labels= --register-with-taints= --max-pods=100\" 3>&1 4>&1 5>&1 6>&1\n</powershell>\n",
			wantName: "windohs", wantCIDR: "10.100.0.0/16",
			wantFlags:  []string{"--node-labels=", "--register-with-taints=", "--max-pods=100"},
			wantConfig: map[string]string{"clusterDNS": `["172.20.0.10"]`},
		},
		{
			// Karpenter's form (TV13): single quotes, the user's commands first, no CIDR.
			name: "karpenter",
			data: "<powershell>\nWrite-Host \"Running custom user data script\"\n[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
				"& $EKSBootstrapScriptFile -EKSClusterName 'test-cluster' -APIServerEndpoint 'https://test-cluster' -Base64ClusterCA '" + testCAB64 + "' -KubeletExtraArgs '--node-labels=\"karpenter.sh/nodepool=np,testing/cluster=unspecified\" --register-with-taints=\"karpenter.sh/unregistered:NoExecute\" --max-pods=110' -DNSClusterIP '10.100.0.10'\n</powershell>",
			wantName: "test-cluster", wantCIDR: "10.100.0.0/16",
			wantFlags:  []string{"--node-labels=karpenter.sh/nodepool=np,testing/cluster=unspecified", "--register-with-taints=karpenter.sh/unregistered:NoExecute", "--max-pods=110"},
			wantConfig: map[string]string{"clusterDNS": `["10.100.0.10"]`},
		},
		{
			// eksctl's override form: variables, then a call of the script by path with
			// line continuations; the cluster's endpoint and CA come from DescribeCluster.
			name: "variables and continuation",
			data: "<POWERSHELL>\r\n[string]$EKSClusterName = 'my-cluster'\r\n[string]$KubeletExtraArgs = '--node-labels=a=b'\r\n$Cidr = \"172.20.0.0/16\"\r\n" +
				"& \"C:\\Program Files\\Amazon\\EKS\\Start-EKSBootstrap.ps1\" -EKSClusterName $EKSClusterName `\r\n  -KubeletExtraArgs:$KubeletExtraArgs -ServiceCIDR \"${Cidr}\"\r\n</POWERSHELL>\r\n",
			r:        &fakeResolver{cluster: "my-cluster", info: ClusterInfo{Endpoint: "https://x.eks.amazonaws.com", CertificateData: []byte(testCAPEM)}},
			wantName: "my-cluster", wantCIDR: "172.20.0.0/16",
			wantFlags: []string{"--node-labels=a=b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Resolver
			if tt.r != nil {
				r = tt.r
			}
			c, findings := translateOne(t, tt.data, r)
			if c.Spec.Cluster.Name != tt.wantName || c.Spec.Cluster.CIDR != tt.wantCIDR {
				t.Errorf("cluster %q CIDR %q, want %q %q", c.Spec.Cluster.Name, c.Spec.Cluster.CIDR, tt.wantName, tt.wantCIDR)
			}
			if string(c.Spec.Cluster.CertificateAuthority) != testCAPEM || c.Spec.Cluster.APIServerEndpoint == "" {
				t.Errorf("endpoint %q, CA %q", c.Spec.Cluster.APIServerEndpoint, c.Spec.Cluster.CertificateAuthority)
			}
			if strings.Join(c.Spec.Kubelet.Flags, " ") != strings.Join(tt.wantFlags, " ") {
				t.Errorf("flags %q, want %q", c.Spec.Kubelet.Flags, tt.wantFlags)
			}
			for k, want := range tt.wantConfig {
				if got := string(c.Spec.Kubelet.Config[k]); got != want {
					t.Errorf("kubelet config %s = %s, want %s", k, got, want)
				}
			}
			if len(findings) == 0 || !strings.Contains(findings[0].Msg, "Start-EKSBootstrap.ps1 call for cluster "+tt.wantName) {
				t.Errorf("findings %v", findings)
			}
		})
	}
}

func TestPowerShellErrors(t *testing.T) {
	call := "& $EKSBootstrapScriptFile -EKSClusterName 'c' -APIServerEndpoint 'https://e' -Base64ClusterCA '" + testCAB64 + "' -ServiceCIDR '10.100.0.0/16'"
	tests := []struct{ name, data, want string }{
		{"unknown parameter", "<powershell>\n[string]$EKSBootstrapScriptFile = 'Start-EKSBootstrap.ps1'\n" + call + " -Bogus 1\n</powershell>", "unknown Start-EKSBootstrap.ps1 parameter -Bogus"},
		{"unset variable", "<powershell>\n& 'Start-EKSBootstrap.ps1' -EKSClusterName $Name\n</powershell>", "variable $Name is not set to a constant"},
		{"two calls", "<powershell>\n[string]$EKSBootstrapScriptFile = 'Start-EKSBootstrap.ps1'\n" + call + "\n" + call + "\n</powershell>", "called 2 times (lines 3 and 4)"},
		{"no value", "<powershell>\n& Start-EKSBootstrap.ps1 -EKSClusterName\n</powershell>", "-EKSClusterName has no value"},
		{"no cluster", "<powershell>\n& Start-EKSBootstrap.ps1 -ServiceCIDR '10.100.0.0/16'\n</powershell>", "without -EKSClusterName"},
		{"unterminated", "<powershell>\n& Start-EKSBootstrap.ps1 -EKSClusterName 'c\n</powershell>", "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(t.Context(), []byte(tt.data), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPowerShellWithoutBootstrapIsListed(t *testing.T) {
	res, err := Decode(t.Context(), []byte("<powershell>\nWrite-Host hi\n</powershell>\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Configs) != 0 || len(res.Findings) != 1 || res.Findings[0].Level != LevelIgnored {
		b, _ := json.Marshal(res.Findings)
		t.Fatalf("configs %d, findings %s", len(res.Configs), b)
	}
}

// FuzzPowerShell: any <powershell> user data decodes or fails with an error; it never
// panics, and a call it translates names a cluster.
func FuzzPowerShell(f *testing.F) {
	for _, s := range []string{
		"& $EKSBootstrapScriptFile -EKSClusterName \"c\" -APIServerEndpoint \"https://e\" -Base64ClusterCA \"" + testCAB64 + "\" -ServiceCIDR \"10.100.0.0/16\" 3>&1",
		"[string]$N = 'c'\n& 'Start-EKSBootstrap.ps1' -EKSClusterName:$N `\n -DNSClusterIP '172.20.0.10' -APIServerEndpoint 'https://e' -Base64ClusterCA '" + testCAB64 + "'",
		"& Start-EKSBootstrap.ps1 -EKSClusterName \"a`\"b\" -KubeletExtraArgs '--node-labels=\"a=b\"'",
		"$x = \"${",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		res, err := Decode(t.Context(), []byte("<powershell>\n"+body+"\n</powershell>\n"), nil)
		if err != nil {
			return
		}
		for _, c := range res.Configs {
			if c.Config.Spec.Cluster.Name == "" {
				t.Fatalf("a translated call without a cluster name: %q", body)
			}
		}
	})
}
