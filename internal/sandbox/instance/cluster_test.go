package instance

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

var testCluster = ClusterInfo{
	Name:        "demo",
	Endpoint:    "https://198.18.0.1:6443",
	CAPEM:       []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	ServiceCIDR: netip.MustParsePrefix("10.100.0.0/16"),
}

// vpcResolver is the instance's view of AWS when its user data names the endpoint and
// CA: only the VPC's range, from instance metadata.
type vpcResolver struct{ vpc string }

func (vpcResolver) DescribeCluster(context.Context, string, int) (*userdata.ClusterInfo, error) {
	return nil, errors.New("DescribeCluster was asked, though the user data names the endpoint and CA")
}

func (r vpcResolver) VPCIPv4CIDRs(context.Context) ([]string, error) { return []string{r.vpc}, nil }

// clusterDNS is the kubelet's clusterDNS as nodeadm settles it from a NodeConfig: the
// kubelet configuration's, or the service range's .10.
func clusterDNS(t *testing.T, cfg *userdata.Config) string {
	t.Helper()
	if raw, ok := cfg.Config.Spec.Kubelet.Config["clusterDNS"]; ok {
		var dns []string
		if err := json.Unmarshal(raw, &dns); err != nil || len(dns) == 0 {
			t.Fatalf("kubelet config clusterDNS %s: %v", raw, err)
		}
		return dns[0]
	}
	dns, err := nodeconfig.ClusterDNS(cfg.Config.Spec.Cluster.CIDR)
	if err != nil {
		t.Fatal(err)
	}
	return dns
}

// The nodes' cluster DNS is the service range's .10, kube-dns's address, for every
// family; the user data names the address only where the AMI's own rule (10.100.0.10,
// or 172.20.0.10 in a VPC in 10.0.0.0/8) would not find it.
func TestUserDataClusterDNSFromTheServiceRange(t *testing.T) {
	al2, al2023, br := nodejoinv1alpha1.AMIFamilyAmazonLinux2, nodejoinv1alpha1.AMIFamilyAmazonLinux2023, nodejoinv1alpha1.AMIFamilyBottlerocket
	for _, tc := range []struct {
		family        nodejoinv1alpha1.AMIFamily
		services, vpc string
		named         bool
	}{
		{al2, "10.100.0.0/16", "198.18.0.0/16", false},
		{al2, "172.20.0.0/16", "10.250.0.0/16", false},
		{al2, "172.20.0.0/16", "198.18.0.0/16", true},
		{al2, "10.100.0.0/16", "10.250.0.0/16", true},
		{al2, "172.16.0.0/16", "198.18.0.0/16", true},
		{br, "10.100.0.0/16", "198.18.0.0/16", false},
		{br, "172.20.0.0/16", "10.250.0.0/16", false},
		{br, "172.20.0.0/16", "198.18.0.0/16", true},
		{al2023, "10.100.0.0/16", "198.18.0.0/16", false},
		{al2023, "172.20.0.0/16", "198.18.0.0/16", false},
		{al2023, "172.16.0.0/16", "10.250.0.0/16", false},
	} {
		t.Run(string(tc.family)+"/"+tc.services+"/vpc="+tc.vpc, func(t *testing.T) {
			c := testCluster
			c.ServiceCIDR = netip.MustParsePrefix(tc.services)
			data, err := c.userData(tc.family, "", netip.MustParsePrefix(tc.vpc))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := nodeconfig.ClusterDNS(tc.services)
			text := string(data)
			if named := strings.Contains(text, "dns-cluster-ip") || strings.Contains(text, "cluster-dns-ip") || strings.Contains(text, "clusterDNS"); named != tc.named {
				t.Errorf("the user data names the cluster DNS address: %v, want %v\n%s", named, tc.named, text)
			}
			res, err := userdata.Decode(t.Context(), data, vpcResolver{tc.vpc})
			if err != nil {
				t.Fatalf("decoding: %v\n%s", err, text)
			}
			if len(res.Configs) != 1 {
				t.Fatalf("%d NodeConfigs, want 1", len(res.Configs))
			}
			if got := clusterDNS(t, &res.Configs[0]); got != want {
				t.Errorf("clusterDNS %s, want %s (kube-dns in %s)\n%s", got, want, tc.services, text)
			}
		})
	}
}
