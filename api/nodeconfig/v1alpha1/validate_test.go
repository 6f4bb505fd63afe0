package v1alpha1

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestValidate(t *testing.T) {
	valid := func(t *testing.T) *NodeConfig {
		return &NodeConfig{Spec: NodeConfigSpec{Cluster: ClusterDetails{
			Name: "c", APIServerEndpoint: "https://example.com", CertificateAuthority: testCA(t), CIDR: "10.100.0.0/16",
		}}}
	}
	yes := true
	tests := []struct {
		name   string
		mutate func(*NodeConfig)
		want   []string
	}{
		{"valid", func(*NodeConfig) {}, nil},
		{"empty", func(c *NodeConfig) { c.Spec.Cluster = ClusterDetails{} }, []string{
			"spec.cluster.name: Required value", "spec.cluster.apiServerEndpoint: Required value",
			"spec.cluster.certificateAuthority: Required value", "spec.cluster.cidr: Required value"}},
		{"http endpoint", func(c *NodeConfig) { c.Spec.Cluster.APIServerEndpoint = "http://example.com" }, []string{"must be an https:// URL"}},
		{"VPC CIDR", func(c *NodeConfig) { c.Spec.Cluster.CIDR = "10.0.0.0/8" }, []string{"looks like a VPC or pod range"}},
		{"default VPC", func(c *NodeConfig) { c.Spec.Cluster.CIDR = "172.31.0.0/16" }, []string{"default VPC"}},
		{"host bits", func(c *NodeConfig) { c.Spec.Cluster.CIDR = "10.100.0.10/16" }, []string{"the network is 10.100.0.0/16"}},
		{"IPv6", func(c *NodeConfig) { c.Spec.Cluster.CIDR = "fd00:10::/108" }, nil},
		{"not a CA", func(c *NodeConfig) { c.Spec.Cluster.CertificateAuthority = []byte("certificateAuthority") }, []string{"no PEM certificate found"}},
		{"outpost without id", func(c *NodeConfig) { c.Spec.Cluster.EnableOutpost = &yes }, []string{"cluster ID must be provided for outposts"}},
		{"unknown gate", func(c *NodeConfig) { c.Spec.FeatureGates = map[Feature]bool{"InstanceIDNodeName": true} }, []string{`spec.featureGates[InstanceIDNodeName]: Unsupported value`}},
		{"bad flag", func(c *NodeConfig) { c.Spec.Kubelet.Flags = []string{"v=2"} }, []string{"spec.kubelet.flags[0]"}},
		{"taint without effect", func(c *NodeConfig) {
			c.Spec.Kubelet.Flags = []string{"--v=2", "--register-with-taints=a=b:NoSchedule,taint1=true"}
		}, []string{`spec.kubelet.flags[1]`, `taint "taint1=true" needs an effect`}},
		{"empty taint list", func(c *NodeConfig) { c.Spec.Kubelet.Flags = []string{"--node-labels=", "--register-with-taints="} }, nil},
		{"bad strategy", func(c *NodeConfig) { c.Spec.Instance.LocalStorage.Strategy = "raid0" }, []string{`spec.instance.localStorage.strategy: Unsupported value: "raid0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid(t)
			tt.mutate(c)
			errs := c.Validate()
			got := errs.ToAggregate()
			if len(tt.want) == 0 {
				if got != nil {
					t.Fatalf("unexpected errors: %v", got)
				}
				return
			}
			if got == nil {
				t.Fatal("no errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors %q lack %q", got, w)
				}
			}
		})
	}
}
