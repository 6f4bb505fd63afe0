package cniplugin

import (
	"crypto/sha1" //nolint:gosec // G505: names veths as the VPC CNI does; not used for security.
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	// gatewayIP is the link-local next hop every pod routes through: no interface has
	// it; a static ARP entry in the pod maps it to the host veth's MAC, as in the VPC CNI.
	gatewayIP = "169.254.1.1"
	// toPodRulePriority is the rule sending traffic for a pod to the main table (where
	// its /32 route through the veth lives), ahead of any ENI table.
	toPodRulePriority = 512
	// fromPodRulePriority is the rule sending a secondary-ENI pod's traffic to its ENI's
	// table, so it leaves through the ENI that holds its address.
	fromPodRulePriority = 1536
	// mainTable is the kernel's main routing table (ipamd's RouteTableID for the primary ENI).
	mainTable = unix.RT_TABLE_MAIN
)

var (
	gateway     = net.ParseIP(gatewayIP).To4()
	gatewayHost = &net.IPNet{IP: gateway, Mask: net.CIDRMask(32, 32)}
	defaultNet  = &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
)

// podNetwork is what the plugin builds for one pod: a veth pair, the pod's /32 and the
// routes and rules around it.
type podNetwork struct {
	HostVeth string
	IfName   string
	Netns    string
	IP       net.IP
	// Table is the route table of the ENI holding IP (mainTable for the primary ENI).
	Table int
	MTU   int
}

func (p podNetwork) host32() *net.IPNet {
	return &net.IPNet{IP: p.IP.To4(), Mask: net.CIDRMask(32, 32)}
}

// hostVethName is prefix + 11 hex characters of sha1(namespace.name), as the VPC CNI
// names its veths, so the name is stable for a pod and fits IFNAMSIZ. Without Kubernetes
// arguments the container ID stands in for the pod.
func hostVethName(prefix, podNamespace, podName, containerID string) string {
	key := podNamespace + "." + podName
	if podName == "" {
		key = containerID
	}
	sum := sha1.Sum([]byte(key)) //nolint:gosec // G401: an interface name, not a security hash; the VPC CNI's names need sha1.
	return prefix + hex.EncodeToString(sum[:])[:11]
}

// linkExistsIn reports whether netns (a path) has a link named name.
func linkExistsIn(netnsPath, name string) (bool, error) {
	var exists bool
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		_, err := netlinksafe.LinkByName(name)
		if err == nil {
			exists = true
			return nil
		}
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("looking up %s: %w", name, err)
	})
	return exists, err
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

// clearHostVeth removes a veth left with the host name (a previous sandbox of the same
// pod whose DEL never came); it refuses to remove any other kind of link.
func clearHostVeth(name string) error {
	link, err := netlinksafe.LinkByName(name)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("looking up host interface %s: %w", name, err)
	}
	if _, ok := link.(*netlink.Veth); !ok {
		return fmt.Errorf("host interface %s exists and is a %s, not a veth: refusing to replace it (rename or remove that interface, or set another vethPrefix)", name, link.Type())
	}
	if err := netlink.LinkDel(link); err != nil && !isNotFound(err) {
		return fmt.Errorf("removing stale veth %s: %w", name, err)
	}
	return nil
}

// setup wires the pod in. It runs in the host's network namespace (the calling
// thread's) and returns the host and pod interfaces. On error the caller tears down.
func setup(p podNetwork) (hostIf, podIf net.Interface, err error) {
	if err := clearHostVeth(p.HostVeth); err != nil {
		return hostIf, podIf, err
	}
	netns, err := ns.GetNS(p.Netns)
	if err != nil {
		return hostIf, podIf, fmt.Errorf("opening network namespace %s: %w", p.Netns, err)
	}
	defer func() { _ = netns.Close() }() // a handle only read from: a close error changes nothing

	err = netns.Do(func(hostNS ns.NetNS) error {
		hostIf, podIf, err = ip.SetupVethWithName(p.IfName, p.HostVeth, p.MTU, "", hostNS)
		if err != nil {
			return fmt.Errorf("creating veth pair %s/%s: %w", p.IfName, p.HostVeth, err)
		}
		link, err := netlinksafe.LinkByName(p.IfName)
		if err != nil {
			return fmt.Errorf("looking up %s: %w", p.IfName, err)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("setting %s up: %w", p.IfName, err)
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: p.host32()}); err != nil {
			return fmt.Errorf("adding %s to %s: %w", p.host32(), p.IfName, err)
		}
		idx := link.Attrs().Index
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: gatewayHost, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("adding route %s dev %s: %w", gatewayHost, p.IfName, err)
		}
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: defaultNet, Gw: gateway, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
			return fmt.Errorf("adding default route via %s dev %s: %w", gatewayIP, p.IfName, err)
		}
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: gateway, HardwareAddr: hostIf.HardwareAddr}); err != nil {
			return fmt.Errorf("adding ARP entry %s lladdr %s dev %s: %w", gatewayIP, hostIf.HardwareAddr, p.IfName, err)
		}
		return nil
	})
	if err != nil {
		return hostIf, podIf, err
	}

	host, err := netlinksafe.LinkByName(p.HostVeth)
	if err != nil {
		return hostIf, podIf, fmt.Errorf("looking up host veth %s: %w", p.HostVeth, err)
	}
	if err := netlink.RouteReplace(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: p.host32(), Scope: netlink.SCOPE_LINK}); err != nil {
		return hostIf, podIf, fmt.Errorf("adding host route %s dev %s: %w", p.host32(), p.HostVeth, err)
	}
	// Rules left by an earlier sandbox that held this address go first.
	if err := removeRules(p.IP); err != nil {
		return hostIf, podIf, err
	}
	for _, r := range podRules(p) {
		if err := netlink.RuleAdd(r); err != nil {
			return hostIf, podIf, fmt.Errorf("adding rule %s: %w", r, err)
		}
	}
	return hostIf, podIf, nil
}

// podRules are the policy rules of a pod: to it through the main table, and from it
// through its ENI's table when that is not the main one.
func podRules(p podNetwork) []*netlink.Rule {
	to := netlink.NewRule()
	to.Family = netlink.FAMILY_V4
	to.Dst = p.host32()
	to.Table = mainTable
	to.Priority = toPodRulePriority
	rules := []*netlink.Rule{to}
	if p.Table != mainTable && p.Table != 0 {
		from := netlink.NewRule()
		from.Family = netlink.FAMILY_V4
		from.Src = p.host32()
		from.Table = p.Table
		from.Priority = fromPodRulePriority
		rules = append(rules, from)
	}
	return rules
}

// podRulesOf lists the rules this plugin made for addr.
func podRulesOf(addr net.IP) ([]netlink.Rule, error) {
	all, err := netlinksafe.RuleList(netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("listing policy rules: %w", err)
	}
	var out []netlink.Rule
	for _, r := range all {
		switch {
		case r.Priority == toPodRulePriority && isHost(r.Dst, addr):
			out = append(out, r)
		case r.Priority == fromPodRulePriority && isHost(r.Src, addr):
			out = append(out, r)
		}
	}
	return out, nil
}

func isHost(n *net.IPNet, addr net.IP) bool {
	if n == nil {
		return false
	}
	ones, bits := n.Mask.Size()
	return ones == 32 && bits == 32 && n.IP.Equal(addr)
}

func removeRules(addr net.IP) error {
	rules, err := podRulesOf(addr)
	if err != nil {
		return err
	}
	for i := range rules {
		if err := netlink.RuleDel(&rules[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing rule %s: %w", &rules[i], err)
		}
	}
	return nil
}

// teardown removes what setup made, whatever part of it exists: the rules for addr (when
// known) and the pod's interface when its namespace is still there, which takes its host
// peer and the host route with it. The host veth is never removed by name: that name
// comes from the pod's namespace and name, so once this sandbox's namespace is gone (and
// its veth pair with it) a host veth of that name belongs to a newer sandbox of the same
// pod, such as a StatefulSet's pod recreated while the runtime still cleans up the old one.
// Missing pieces are not errors.
func teardown(addr net.IP, netnsPath, ifName string) error {
	var errs []error
	if addr != nil {
		if err := removeRules(addr); err != nil {
			errs = append(errs, err)
		}
	}
	if netnsPath != "" && ifName != "" {
		err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
			link, err := netlinksafe.LinkByName(ifName)
			if err != nil {
				if isNotFound(err) {
					return nil
				}
				return fmt.Errorf("looking up %s: %w", ifName, err)
			}
			if _, ok := link.(*netlink.Veth); !ok {
				return nil
			}
			if err := netlink.LinkDel(link); err != nil && !isNotFound(err) {
				return fmt.Errorf("removing %s: %w", ifName, err)
			}
			return nil
		})
		if err != nil && !netnsGone(err) {
			errs = append(errs, fmt.Errorf("in network namespace %s: %w", netnsPath, err))
		}
	}
	return errors.Join(errs...)
}

// netnsGone reports whether err says the namespace no longer exists (DEL after the
// sandbox is gone is normal).
func netnsGone(err error) bool {
	var notExist ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return errors.As(err, &notExist) || errors.As(err, &notNS) || errors.Is(err, os.ErrNotExist)
}

// check verifies that what setup made for p is in place, naming the first thing missing.
//
//nolint:gocyclo // a flat list of checks, one per thing setup made.
func check(p podNetwork) error {
	host, err := netlinksafe.LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("host veth %s: %w", p.HostVeth, err)
	}
	if _, ok := host.(*netlink.Veth); !ok {
		return fmt.Errorf("host interface %s is a %s, not a veth", p.HostVeth, host.Type())
	}
	if host.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("host veth %s is down", p.HostVeth)
	}
	routes, err := netlinksafe.RouteListFiltered(netlink.FAMILY_V4,
		&netlink.Route{LinkIndex: host.Attrs().Index, Dst: p.host32(), Table: mainTable},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing routes of %s: %w", p.HostVeth, err)
	}
	if len(routes) == 0 {
		return fmt.Errorf("host route %s dev %s is missing", p.host32(), p.HostVeth)
	}
	if err := checkRules(p); err != nil {
		return err
	}

	netns, err := ns.GetNS(p.Netns)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", p.Netns, err)
	}
	defer func() { _ = netns.Close() }() // a handle only read from: a close error changes nothing
	hostMAC, hostIndex := host.Attrs().HardwareAddr, host.Attrs().Index
	return netns.Do(func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(p.IfName)
		if err != nil {
			return fmt.Errorf("pod interface %s: %w", p.IfName, err)
		}
		if _, ok := link.(*netlink.Veth); !ok {
			return fmt.Errorf("pod interface %s is a %s, not a veth", p.IfName, link.Type())
		}
		if link.Attrs().ParentIndex != hostIndex {
			return fmt.Errorf("pod interface %s is not the peer of host veth %s", p.IfName, p.HostVeth)
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("pod interface %s is down", p.IfName)
		}
		addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("listing addresses of %s: %w", p.IfName, err)
		}
		found := false
		for _, a := range addrs {
			if isHost(a.IPNet, p.IP) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("address %s is missing on pod interface %s", p.host32(), p.IfName)
		}
		routes, err := netlinksafe.RouteList(link, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("listing routes of %s: %w", p.IfName, err)
		}
		var gwRoute, defRoute bool
		for _, r := range routes {
			switch {
			case isHost(r.Dst, gateway) && r.Scope == netlink.SCOPE_LINK:
				gwRoute = true
			case (r.Dst == nil || r.Dst.String() == defaultNet.String()) && r.Gw.Equal(gateway):
				defRoute = true
			}
		}
		if !gwRoute {
			return fmt.Errorf("pod route %s dev %s scope link is missing", gatewayHost, p.IfName)
		}
		if !defRoute {
			return fmt.Errorf("pod default route via %s dev %s is missing", gatewayIP, p.IfName)
		}
		neighs, err := netlink.NeighList(link.Attrs().Index, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("listing ARP entries of %s: %w", p.IfName, err)
		}
		for _, n := range neighs {
			if n.IP.Equal(gateway) && n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr.String() == hostMAC.String() {
				return nil
			}
		}
		return fmt.Errorf("pod ARP entry %s lladdr %s dev %s is missing", gatewayIP, hostMAC, p.IfName)
	})
}

func checkRules(p podNetwork) error {
	have, err := podRulesOf(p.IP)
	if err != nil {
		return err
	}
	for _, want := range podRules(p) {
		found := false
		for _, r := range have {
			if r.Priority == want.Priority && r.Table == want.Table {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("policy rule %s is missing", want)
		}
	}
	return nil
}
