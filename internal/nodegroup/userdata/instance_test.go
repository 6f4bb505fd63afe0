package userdata_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	nodeadm "github.com/nodejoin/nodejoin/internal/userdata"
)

var instanceCluster = userdata.Cluster{
	Name:                 "demo",
	Endpoint:             "https://198.18.0.1:6443",
	CertificateAuthority: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	ServiceCIDR:          "10.100.0.0/16",
}

const instanceToken = "abcdef.0123456789abcdef"

func TestRenderInstanceGolden(t *testing.T) {
	for _, f := range userdata.InstanceFamilies {
		c := instanceCluster
		c.BootstrapToken = instanceToken
		out, err := userdata.RenderInstance(c, f)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := userdata.RenderInstance(c, f)
		if !bytes.Equal(out, again) {
			t.Fatalf("%s: RenderInstance is not deterministic", f)
		}
		userdata.CheckGolden(t, filepath.Join("testdata", "golden", "instance-"+strings.ToLower(string(f))+".txt"), out)
	}
}

// Every family RenderInstance renders decodes, through nodeadm's decoder, into one
// NodeConfig for the cluster, with the bootstrap token when given one and no warning.
// Bottlerocket's settings have no service range, which nodeadm infers only for EKS's
// default ranges (elsewhere it asks the VPC), so it is tried with the default alone.
func TestRenderInstanceDecodes(t *testing.T) {
	for _, f := range userdata.InstanceFamilies {
		for _, cidr := range []string{"10.100.0.0/16", "172.16.0.0/16"} {
			for _, tok := range []string{"", instanceToken} {
				if f == nodejoinv1alpha1.AMIFamilyBottlerocket && cidr != "10.100.0.0/16" {
					continue
				}
				t.Run(string(f)+"/"+cidr+"/token="+tok, func(t *testing.T) {
					c := instanceCluster
					c.ServiceCIDR, c.BootstrapToken = cidr, tok
					data, err := userdata.RenderInstance(c, f)
					if err != nil {
						t.Fatal(err)
					}
					res, err := nodeadm.Decode(t.Context(), data, nil)
					if err != nil {
						t.Fatalf("decoding: %v\n%s", err, data)
					}
					if len(res.Configs) != 1 {
						t.Fatalf("%d NodeConfigs, want 1", len(res.Configs))
					}
					cl := res.Configs[0].Config.Spec.Cluster
					if cl.Name != "demo" || cl.APIServerEndpoint != c.Endpoint || !strings.Contains(string(cl.CertificateAuthority), "MIIB") {
						t.Errorf("cluster = %+v", cl)
					}
					if cl.CIDR != "" && cl.CIDR != cidr {
						t.Errorf("cidr = %s, want %s", cl.CIDR, cidr)
					}
					if res.BootstrapToken != tok {
						t.Errorf("bootstrap token %q, want %q", res.BootstrapToken, tok)
					}
					for _, fd := range res.Findings {
						if fd.Level == nodeadm.LevelWarning || fd.Level == nodeadm.LevelIgnored {
							t.Errorf("finding: %s", fd)
						}
					}
				})
			}
		}
	}
}

func TestRenderInstanceRefuses(t *testing.T) {
	c := instanceCluster
	c.Endpoint = ""
	if _, err := userdata.RenderInstance(c, nodejoinv1alpha1.AMIFamilyAmazonLinux2023); err == nil {
		t.Error("user data without an endpoint was rendered")
	}
	c = instanceCluster
	c.ServiceCIDR = ""
	if _, err := userdata.RenderInstance(c, nodejoinv1alpha1.AMIFamilyAmazonLinux2023); err == nil {
		t.Error("user data without a service CIDR was rendered")
	}
	if _, err := userdata.RenderInstance(instanceCluster, nodejoinv1alpha1.AMIFamilyWindows); !errors.Is(err, userdata.ErrInstanceFamily) {
		t.Errorf("Windows: %v", err)
	}
}
