package hostnet

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
)

// newNamespace creates a throwaway network namespace (closed, and so gone, at the end
// of the test) and returns a netlink handle into it; the test's thread stays in its own.
func newNamespace(t *testing.T) *netlink.Handle {
	h, _ := newNamespaceHandle(t)
	return h
}

// newNamespaceHandle is newNamespace, also returning the namespace.
func newNamespaceHandle(t *testing.T) (*netlink.Handle, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orig.Close() }()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("returning to the original namespace: %v", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		_ = ns.Close()
	})
	return h, ns
}

// forwarding turns IPv4 forwarding on in ns (a new namespace starts with it off).
func forwarding(t *testing.T, ns netns.NsHandle) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orig.Close() }()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	werr := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	if err := netns.Set(orig); err != nil {
		t.Fatalf("returning to the original namespace: %v", err) // the thread stays locked and dies
	}
	runtime.UnlockOSThread()
	if werr != nil {
		t.Fatal(werr)
	}
}

// veth adds a veth pair name/name+"p" (as the local cloud plugs ENIs in) with mac on name.
func veth(t *testing.T, h *netlink.Handle, name, mac string) netlink.Link {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: hw}, PeerName: name + "p"}); err != nil {
		t.Fatalf("adding %s: %v", name, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func routes(t *testing.T, h *netlink.Handle, table int) []string {
	t.Helper()
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		l, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			t.Fatal(err)
		}
		dst := "default"
		if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" {
			dst = r.Dst.String()
		}
		s := dst
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		out = append(out, s+" dev "+l.Attrs().Name)
	}
	return out
}

func TestSetupENIInNamespace(t *testing.T) {
	h, ns := newNamespaceHandle(t)
	eth0 := veth(t, h, "eth0", "02:00:00:00:00:01")
	if err := h.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("198.18.0.11/16"))}); err != nil {
		t.Fatal(err)
	}
	veth(t, h, "eth1", "02:00:00:00:00:02")
	l := Linux{Handle: h, LinkTimeout: 5 * time.Second}
	eni := datastore.ENI{ID: "eni-1", MAC: "02:00:00:00:00:02", DeviceNumber: 1,
		PrimaryIP: netip.MustParseAddr("198.18.1.20"), SubnetCIDR: netip.MustParsePrefix("198.18.0.0/16")}
	for range 2 { // idempotent
		if err := l.SetupENI(t.Context(), eni); err != nil {
			t.Fatalf("SetupENI: %v", err)
		}
	}
	eth1, err := h.LinkByName("eth1")
	if err != nil {
		t.Fatal(err)
	}
	if eth1.Attrs().Flags&net.FlagUp == 0 {
		t.Error("eth1 is not up")
	}
	addrs, err := h.AddrList(eth1, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != "198.18.1.20/16" {
		t.Errorf("eth1 addresses = %v, want 198.18.1.20/16", addrs)
	}
	rs := routes(t, h, 2)
	sort.Strings(rs)
	got := strings.Join(rs, "; ")
	if want := "198.18.0.1/32 dev eth1; default via 198.18.0.1 dev eth1"; got != want {
		t.Errorf("table 2 = %q, want %q", got, want)
	}
	main := strings.Join(routes(t, h, syscall.RT_TABLE_MAIN), "; ")
	if strings.Contains(main, "dev eth1") || !strings.Contains(main, "198.18.0.0/16 dev eth0") {
		t.Errorf("main table = %q, want the subnet through eth0 only", main)
	}

	// A re-setup with another primary address replaces the stale one.
	eni.PrimaryIP = netip.MustParseAddr("198.18.1.21")
	if err := l.SetupENI(t.Context(), eni); err != nil {
		t.Fatal(err)
	}
	addrs, _ = h.AddrList(eth1, netlink.FAMILY_V4)
	if len(addrs) != 1 || addrs[0].IPNet.String() != "198.18.1.21/16" {
		t.Errorf("eth1 addresses after re-setup = %v", addrs)
	}

	// With the plugin's rule for a pod on this ENI, the pod's traffic (arriving from its
	// veth) leaves through eth1 to the gateway; a pod without one (on the primary ENI)
	// keeps the main table's default through eth0.
	forwarding(t, ns)
	veth(t, h, "enipod", "02:00:00:00:00:99") // a pod's host-side veth
	for _, name := range []string{"eth0p", "eth1p", "enipod", "enipodp"} {
		peer, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(peer); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: net.ParseIP("198.18.0.1")}); err != nil {
		t.Fatal(err)
	}
	pod := net.ParseIP("198.18.1.40")
	rule := netlink.NewRule()
	rule.Src, rule.Table, rule.Priority = &net.IPNet{IP: pod, Mask: net.CIDRMask(32, 32)}, eni.RouteTable(), 1536
	if err := h.RuleAdd(rule); err != nil {
		t.Fatal(err)
	}
	via := func(src net.IP) string {
		t.Helper()
		rs, err := h.RouteGetWithOptions(net.ParseIP("203.0.113.9"), &netlink.RouteGetOptions{SrcAddr: src, Iif: "enipod"})
		if err != nil || len(rs) == 0 {
			t.Fatalf("route get from %v: %v", src, err)
		}
		l, err := h.LinkByIndex(rs[0].LinkIndex)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("via %s dev %s", rs[0].Gw, l.Attrs().Name)
	}
	if got := via(pod); got != "via 198.18.0.1 dev eth1" {
		t.Errorf("pod on eni-1 to the internet: %s, want via 198.18.0.1 dev eth1", got)
	}
	if got := via(net.ParseIP("198.18.1.41")); got != "via 198.18.0.1 dev eth0" {
		t.Errorf("a pod on the primary ENI (no rule) to the internet: %s, want via 198.18.0.1 dev eth0", got)
	}

	if err := l.TeardownENI(t.Context(), eni); err != nil {
		t.Fatal(err)
	}
	if rs := routes(t, h, 2); len(rs) != 0 {
		t.Errorf("table 2 after teardown = %v", rs)
	}
}

func TestSetupENIWithoutInterface(t *testing.T) {
	h := newNamespace(t)
	l := Linux{Handle: h, LinkTimeout: 200 * time.Millisecond}
	err := l.SetupENI(t.Context(), datastore.ENI{ID: "eni-9", MAC: "02:00:00:00:00:09", DeviceNumber: 3,
		PrimaryIP: netip.MustParseAddr("198.18.1.30"), SubnetCIDR: netip.MustParsePrefix("198.18.0.0/16")})
	if err == nil || !strings.Contains(err.Error(), "02:00:00:00:00:09") {
		t.Fatalf("SetupENI without the interface: err = %v, want one naming the MAC", err)
	}
}

func TestGateway(t *testing.T) {
	for in, want := range map[string]string{"198.18.0.0/16": "198.18.0.1", "10.0.32.0/19": "10.0.32.1", "10.0.33.7/19": "10.0.32.1"} {
		if got := Gateway(netip.MustParsePrefix(in)); got.String() != want {
			t.Errorf("Gateway(%s) = %s, want %s", in, got, want)
		}
	}
}
