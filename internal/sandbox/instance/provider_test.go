package instance

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws"
)

// Addresses start at the eleventh of the range, skip the bridge's, are reused once
// released (but not at once: see TestAddressesGoRound), and running out names the flag
// that gives more.
func TestAddressAllocation(t *testing.T) {
	p, err := New(Config{Cluster: testCluster, Dir: t.TempDir(), Cloud: &localaws.Cloud{AccountID: "000000000000", EC2: localaws.NewEC2("000000000000")},
		NodeCIDR: netip.MustParsePrefix("198.18.0.0/28"), Gateway: netip.MustParseAddr("198.18.0.12")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		a, err := p.allocate()
		if err != nil {
			if !strings.Contains(err.Error(), "--node-cidr") {
				t.Errorf("exhaustion error %q does not name --node-cidr", err)
			}
			break
		}
		got = append(got, a.String())
	}
	// .11, (.12 is the bridge), .13, .14; .15 is the broadcast address.
	if strings.Join(got, " ") != "198.18.0.11 198.18.0.13 198.18.0.14" {
		t.Errorf("allocated %v", got)
	}
	p.release(netip.MustParseAddr("198.18.0.13"))
	if a, err := p.allocate(); err != nil || a.String() != "198.18.0.13" {
		t.Errorf("after release: %v, %v", a, err)
	}
	if name := p.dnsName(netip.MustParseAddr("198.18.0.11")); name != "ip-198-18-0-11.local.internal" {
		t.Errorf("dns name %s", name)
	}
}

// A freed address is given again only after the rest of the range: a terminated
// instance's Node (named after its address) may outlive it, and the next instance's
// kubelet must not register as that Node.
func TestAddressesGoRound(t *testing.T) {
	p, err := New(Config{Cluster: testCluster, Dir: t.TempDir(), Cloud: &localaws.Cloud{AccountID: "000000000000", EC2: localaws.NewEC2("000000000000")},
		NodeCIDR: netip.MustParsePrefix("198.18.0.0/28"), Gateway: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	alloc := func() string {
		t.Helper()
		a, err := p.allocate()
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	var got []string
	got = append(got, alloc(), alloc())
	p.release(netip.MustParseAddr("198.18.0.11"))
	got = append(got, alloc(), alloc()) // .13 and .14 first: .15 is the broadcast address
	p.release(netip.MustParseAddr("198.18.0.13"))
	got = append(got, alloc(), alloc()) // round to .11, then .13
	if want := "198.18.0.11 198.18.0.12 198.18.0.13 198.18.0.14 198.18.0.11 198.18.0.13"; strings.Join(got, " ") != want {
		t.Errorf("allocated %v, want %s", got, want)
	}
}

func TestVethNamesFitAnInterfaceName(t *testing.T) {
	prefix := netip.MustParsePrefix("198.18.0.0/16")
	for _, a := range []string{"198.18.0.11", "198.18.255.254"} {
		n := vethName(prefix, netip.MustParseAddr(a))
		if len(n) > 15 {
			t.Errorf("%s: %q is longer than an interface name may be", a, n)
		}
	}
	if a, b := vethName(prefix, netip.MustParseAddr("198.18.1.2")), vethName(prefix, netip.MustParseAddr("198.18.2.1")); a == b {
		t.Errorf("two addresses share veth %s", a)
	}
}

func TestMountsUnderListsTheMountTable(t *testing.T) {
	points, err := mountsUnder("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(points, "/proc") {
		t.Errorf("mounts under /proc = %q, want /proc among them", points)
	}
	for _, p := range points {
		if p != "/proc" && !strings.HasPrefix(p, "/proc/") {
			t.Errorf("mount %q is not under /proc", p)
		}
	}
}

// An address EC2 gave to an interface is never an instance's, and the node range is
// the VPC's subnet.
func TestAllocationSkipsAddressesEC2GaveOut(t *testing.T) {
	e := localaws.NewEC2("000000000000")
	p, err := New(Config{Cluster: testCluster, Dir: t.TempDir(), Cloud: &localaws.Cloud{AccountID: "000000000000", EC2: e},
		NodeCIDR: netip.MustParsePrefix("198.18.0.0/28"), Gateway: netip.MustParseAddr("198.18.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := e.SubnetOf(localaws.DefaultSubnetID)
	if !ok || s.CIDR != netip.MustParsePrefix("198.18.0.0/28") {
		t.Fatalf("subnet %+v, %t", s, ok)
	}
	inst := localaws.Instance{ID: "i-00000001", PrivateIPv4: "198.18.0.12", SubnetID: localaws.DefaultSubnetID}
	if err := e.Launch(inst, localaws.WithSecondaryPrivateIPv4s("198.18.0.11")); err != nil {
		t.Fatal(err)
	}
	a, err := p.allocate()
	if err != nil || a.String() != "198.18.0.13" {
		t.Errorf("allocated %v, %v; want 198.18.0.13 (.11 and .12 are EC2's)", a, err)
	}
}
