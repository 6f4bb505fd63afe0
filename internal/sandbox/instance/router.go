package instance

// This file is the local VPC's router: the hooks through which the local EC2 makes the
// network interfaces and private addresses of real instances reachable (see
// docs/network.md, "The VPC router").
//
// The cluster namespace plays the VPC. Its bridge holds one port per attached
// interface (eth0 from launch, ethN when EC2 attaches interface N), with a static
// forwarding entry for the interface's MAC, and the namespace holds a permanent
// neighbour entry for every private address, pointing at the MAC of the interface
// holding it. Every port answers ARP from those entries (the bridge's proxy_arp), and
// a port with proxy_arp gets no flooded broadcasts, so instances learn only what the
// VPC says, as on AWS; the cluster namespace never needs to ask.

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netns"
)

var _ localaws.NetworkHooks = (*Provider)(nil)

// routerInstance returns the running instance with a namespace that has the ID, or nil.
func (p *Provider) routerInstance(id string) *Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst := p.instances[id]
	if inst == nil || inst.Kubelet != KubeletReal || inst.Namespace == "" || p.cfg.ClusterNS.Name == "" {
		return nil
	}
	return inst
}

// interfacePort names the bridge side of an instance's interface at a device index:
// njv<offset> for eth0, njv<offset>e<N> for ethN.
func (p *Provider) interfacePort(inst *Instance, dev int) string {
	port := vethName(p.cfg.NodeCIDR, netip.MustParseAddr(inst.IP))
	if dev > 0 {
		port += "e" + strconv.Itoa(dev)
	}
	return port
}

// InterfaceAttached creates ethN (N the device index) in the instance's namespace with
// the interface's MAC and no address (ipamd configures it, as on EC2), its other end
// on the bridge, and makes the interface's addresses reachable through it.
func (p *Provider) InterfaceAttached(ctx context.Context, nic localaws.NetworkInterface) error {
	inst := p.routerInstance(nic.Attachment.InstanceID)
	if inst == nil {
		return nil
	}
	dev := nic.Attachment.DeviceIndex
	if dev == 0 {
		return p.addNeighbours(ctx, nic.MAC, nic.PrivateIPv4s[1:])
	}
	cns, ns := p.cfg.ClusterNS, netns.NS{Name: inst.Namespace}
	port, name := p.interfacePort(inst, dev), "eth"+strconv.Itoa(dev)
	if err := ignoreMissing(cns.IP(ctx, "link", "del", port)); err != nil {
		return err
	}
	if err := cns.IP(ctx, "link", "add", port, "type", "veth", "peer", "name", name, "netns", ns.Name); err != nil {
		return err
	}
	for _, s := range [][]string{{"link", "set", name, "address", nic.MAC}, {"link", "set", name, "up"}} {
		if err := ns.IP(ctx, s...); err != nil {
			return err
		}
	}
	// Replies to pods on this interface leave through it, requests reach them on eth0
	// or here: a strict reverse-path filter would drop them.
	if err := ns.Sysctl("net.ipv4.conf."+name+".rp_filter", "2"); err != nil {
		return err
	}
	if err := p.joinBridge(ctx, port, nic.MAC); err != nil {
		return err
	}
	return p.addNeighbours(ctx, nic.MAC, nic.PrivateIPv4s)
}

// InterfaceDetached removes what InterfaceAttached made. Eth0 stays (it goes with the
// instance); only its further addresses are withdrawn.
func (p *Provider) InterfaceDetached(ctx context.Context, nic localaws.NetworkInterface) error {
	inst := p.routerInstance(nic.Attachment.InstanceID)
	if inst == nil {
		return nil
	}
	dev := nic.Attachment.DeviceIndex
	if dev == 0 {
		return p.delNeighbours(ctx, nic.PrivateIPv4s[1:])
	}
	err := p.delNeighbours(ctx, nic.PrivateIPv4s)
	// Deleting the bridge side deletes ethN too, and the port's forwarding entry.
	return errors.Join(err, ignoreMissing(p.cfg.ClusterNS.IP(ctx, "link", "del", p.interfacePort(inst, dev))))
}

// AddressesAssigned makes addresses reachable through the interface holding them.
func (p *Provider) AddressesAssigned(ctx context.Context, nic localaws.NetworkInterface, addrs []string) error {
	if p.routerInstance(nic.Attachment.InstanceID) == nil {
		return nil
	}
	return p.addNeighbours(ctx, nic.MAC, addrs)
}

// AddressesUnassigned withdraws addresses.
func (p *Provider) AddressesUnassigned(ctx context.Context, nic localaws.NetworkInterface, addrs []string) error {
	if p.routerInstance(nic.Attachment.InstanceID) == nil {
		return nil
	}
	return p.delNeighbours(ctx, addrs)
}

// joinBridge puts a port on the cluster bridge: up, answering ARP from the VPC's
// entries, with the interface's MAC pinned to it.
func (p *Provider) joinBridge(ctx context.Context, port, mac string) error {
	return joinBridge(ctx, p.cfg.ClusterNS, p.cfg.Bridge, port, mac)
}

func joinBridge(ctx context.Context, cns netns.NS, bridge, port, mac string) error {
	if err := cns.IP(ctx, "link", "set", port, "master", bridge, "up"); err != nil {
		return err
	}
	if err := cns.IP(ctx, "link", "set", "dev", port, "type", "bridge_slave", "proxy_arp", "on"); err != nil {
		return err
	}
	return cns.Bridge(ctx, "fdb", "replace", mac, "dev", port, "master", "static")
}

func (p *Provider) addNeighbours(ctx context.Context, mac string, addrs []string) error {
	return addNeighbours(ctx, p.cfg.ClusterNS, p.cfg.Bridge, mac, addrs)
}

func addNeighbours(ctx context.Context, cns netns.NS, bridge, mac string, addrs []string) error {
	for _, a := range addrs {
		if err := cns.IP(ctx, "neigh", "replace", a, "lladdr", mac, "dev", bridge, "nud", "permanent"); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) delNeighbours(ctx context.Context, addrs []string) error {
	var errs []error
	for _, a := range addrs {
		errs = append(errs, ignoreMissing(p.cfg.ClusterNS.IP(ctx, "neigh", "del", a, "dev", p.cfg.Bridge)))
	}
	return errors.Join(errs...)
}

// ignoreMissing drops iproute2's errors for a device or entry that is not there.
func ignoreMissing(err error) error {
	if err != nil && (strings.Contains(err.Error(), "Cannot find device") || strings.Contains(err.Error(), "No such file or directory") ||
		strings.Contains(err.Error(), "No such device")) {
		return nil
	}
	return err
}

// removeRoutes withdraws a terminated instance's addresses from the VPC: its own, and
// every permanent neighbour entry whose MAC no bridge port holds any more (the ports
// of an instance go with its namespace). It needs only the record, so it also runs
// after a crash.
func removeRoutes(ctx context.Context, r *Record) error {
	cns := netns.NS{Name: r.ClusterNamespace}
	if r.ClusterNamespace == "" || !cns.Exists() {
		return nil
	}
	bridge := r.Bridge
	if bridge == "" {
		return nil
	}
	if err := ignoreMissing(cns.IP(ctx, "neigh", "del", r.IP, "dev", bridge)); err != nil {
		return err
	}
	return sweepNeighbours(ctx, cns, bridge)
}

// sweepNeighbours deletes the bridge's permanent neighbour entries whose MAC has no
// forwarding entry left.
func sweepNeighbours(ctx context.Context, cns netns.NS, bridge string) error {
	out, err := cns.IPOutput(ctx, "-j", "neigh", "show", "dev", bridge, "nud", "permanent")
	if err != nil {
		return err
	}
	var neigh []struct {
		Dst    string `json:"dst"`
		LLAddr string `json:"lladdr"`
	}
	if err := json.Unmarshal(out, &neigh); err != nil {
		return err
	}
	out, err = cns.BridgeOutput(ctx, "-j", "fdb", "show", "br", bridge)
	if err != nil {
		return err
	}
	var fdb []struct {
		MAC string `json:"mac"`
	}
	if err := json.Unmarshal(out, &fdb); err != nil {
		return err
	}
	held := map[string]bool{}
	for _, f := range fdb {
		held[strings.ToLower(f.MAC)] = true
	}
	var errs []error
	for _, n := range neigh {
		if !held[strings.ToLower(n.LLAddr)] {
			errs = append(errs, ignoreMissing(cns.IP(ctx, "neigh", "del", n.Dst, "dev", bridge)))
		}
	}
	return errors.Join(errs...)
}
