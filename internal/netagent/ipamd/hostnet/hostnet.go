// Package hostnet sets a secondary ENI up in the node's network namespace, as the VPC
// CNI's ipamd does (setupENINetwork): the interface with the ENI's MAC is brought up
// with the ENI's primary address, the kernel's subnet route through it is removed from
// the main table (the primary ENI serves the subnet there), and the ENI's own route
// table (device number + 1) gets the subnet's gateway and a default route through it.
// The CNI plugin's per-pod rule `from <pod IP> lookup <table>` then sends a pod's
// traffic out of the ENI that holds its address.
package hostnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
)

// Linux configures ENIs through netlink.
type Linux struct {
	// Handle is the netlink handle (nil: the calling thread's network namespace).
	Handle *netlink.Handle
	// LinkTimeout is how long SetupENI waits for the ENI's interface to appear after
	// the attach (default 60 s).
	LinkTimeout time.Duration
}

func (l Linux) h() *netlink.Handle {
	if l.Handle != nil {
		return l.Handle
	}
	return &netlink.Handle{}
}

// Gateway is a subnet's router: its first host address, as in a VPC.
func Gateway(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// LinkByMAC finds the interface with a MAC address, waiting up to timeout for it to
// appear (the cloud plugs it in shortly after the attach).
func (l Linux) LinkByMAC(ctx context.Context, mac string, timeout time.Duration) (netlink.Link, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("ENI MAC %q: %w", mac, err)
	}
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Millisecond
	for {
		links, err := l.h().LinkList()
		if err != nil {
			return nil, fmt.Errorf("listing links: %w", err)
		}
		for _, lk := range links {
			if strings.EqualFold(lk.Attrs().HardwareAddr.String(), hw.String()) {
				return lk, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no interface with MAC %s appeared within %s: is the ENI attached to this instance?", mac, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the interface with MAC %s: %w", mac, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// SetupENI configures the ENI's interface and route table. It is idempotent.
func (l Linux) SetupENI(ctx context.Context, e datastore.ENI) error {
	if !e.PrimaryIP.Is4() || !e.SubnetCIDR.IsValid() {
		return fmt.Errorf("ENI %s: primary IPv4 address %v and subnet %v are needed", e.ID, e.PrimaryIP, e.SubnetCIDR)
	}
	timeout := l.LinkTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	h := l.h()
	link, err := l.LinkByMAC(ctx, e.MAC, timeout)
	if err != nil {
		return err
	}
	name := link.Attrs().Name
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	want := netip.PrefixFrom(e.PrimaryIP, e.SubnetCIDR.Bits())
	addrs, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if p, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			ones, _ := a.Mask.Size()
			if netip.PrefixFrom(p, ones) == want {
				continue
			}
		}
		if err := h.AddrDel(link, &a); err != nil {
			return fmt.Errorf("removing stale address %s from %s: %w", a.IPNet, name, err)
		}
	}
	if err := h.AddrReplace(link, &netlink.Addr{IPNet: ipNet(want)}); err != nil {
		return fmt.Errorf("adding %s to %s: %w", want, name, err)
	}
	// The kernel added a route to the subnet through this interface in the main table;
	// the primary ENI serves the subnet there.
	subnet := e.SubnetCIDR.Masked()
	if err := h.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(subnet), Table: syscall.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK}); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("removing the main table's route to %s through %s: %w", subnet, name, err)
	}
	table := e.RouteTable()
	gw := Gateway(e.SubnetCIDR)
	if err := l.flushTable(table, link.Attrs().Index); err != nil {
		return err
	}
	routes := []*netlink.Route{
		{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.PrefixFrom(gw, 32)), Scope: netlink.SCOPE_LINK, Table: table},
		{LinkIndex: link.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: net.IP(gw.AsSlice()), Table: table},
	}
	for _, r := range routes {
		if err := h.RouteReplace(r); err != nil {
			return fmt.Errorf("adding route %s in table %d through %s: %w", r, table, name, err)
		}
	}
	return nil
}

// flushTable removes routes of a table that do not go through keepLink (-1: all).
func (l Linux) flushTable(table, keepLink int) error {
	routes, err := l.h().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing routes of table %d: %w", table, err)
	}
	for _, r := range routes {
		if r.LinkIndex == keepLink {
			continue
		}
		if err := l.h().RouteDel(&r); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("removing route %s from table %d: %w", r, table, err)
		}
	}
	return nil
}

// TeardownENI empties the ENI's route table. The interface itself goes with the detach.
func (l Linux) TeardownENI(_ context.Context, e datastore.ENI) error {
	if e.Primary {
		return nil
	}
	return l.flushTable(e.RouteTable(), -1)
}
