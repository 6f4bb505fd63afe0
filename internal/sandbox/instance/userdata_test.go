package instance

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

var testCluster = ClusterInfo{
	Name:        "demo",
	Endpoint:    "https://198.18.0.1:6443",
	CAPEM:       []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	ServiceCIDR: netip.MustParsePrefix("10.100.0.0/16"),
}

// The user data of every family decodes, through the same decoder nodeadm uses, into
// a NodeConfig for the cluster, and carries the bootstrap token when given one.
func TestUserDataDecodesForEveryFamily(t *testing.T) {
	const token = "abcdef.0123456789abcdef"
	for _, f := range AMIFamilies {
		for _, tok := range []string{"", token} {
			t.Run(string(f)+"/token="+tok, func(t *testing.T) {
				data, err := UserData(f, testCluster, tok)
				if err != nil {
					t.Fatal(err)
				}
				res, err := userdata.Decode(t.Context(), data, nil)
				if err != nil {
					t.Fatalf("decoding %s user data: %v\n%s", f, err, data)
				}
				if len(res.Configs) != 1 {
					t.Fatalf("%d NodeConfigs, want 1", len(res.Configs))
				}
				cl := res.Configs[0].Config.Spec.Cluster
				if cl.Name != "demo" || cl.APIServerEndpoint != testCluster.Endpoint || !strings.Contains(string(cl.CertificateAuthority), "MIIB") {
					t.Errorf("cluster = %+v", cl)
				}
				if res.BootstrapToken != tok {
					t.Errorf("bootstrap token %q, want %q", res.BootstrapToken, tok)
				}
				for _, fd := range res.Findings {
					if fd.Level == userdata.LevelWarning || fd.Level == userdata.LevelIgnored {
						t.Errorf("finding: %s", fd)
					}
				}
			})
		}
	}
}

func TestUserDataRefusesAnIncompleteCluster(t *testing.T) {
	c := testCluster
	c.Endpoint = ""
	if _, err := UserData(AmazonLinux2023, c, ""); err == nil {
		t.Error("user data without an endpoint was rendered")
	}
	if _, err := UserData("Windows", testCluster, ""); err == nil || !strings.Contains(err.Error(), "AmazonLinux2023") {
		t.Errorf("unknown family: %v", err)
	}
}

func TestParseAMIFamily(t *testing.T) {
	for in, want := range map[string]AMIFamily{"": AmazonLinux2023, "AL2023": AmazonLinux2023, "al2": AmazonLinux2, "Bottlerocket": Bottlerocket, "AmazonLinux2": AmazonLinux2} {
		if got, err := ParseAMIFamily(in); err != nil || got != want {
			t.Errorf("ParseAMIFamily(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseAMIFamily("Ubuntu"); err == nil {
		t.Error("Ubuntu accepted")
	}
}
