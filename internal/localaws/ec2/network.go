package ec2

// This file holds EC2's network model: subnets, elastic network interfaces (ENIs) and
// their private addresses, the per-instance-type limits, and the hooks through which
// the sandbox makes attachments and assignments real (the VPC router).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

// DefaultSecurityGroupID is the VPC's default security group, which every network
// interface is in unless created with others.
const DefaultSecurityGroupID = "sg-00000000000000000"

// Subnet is a subnet of the local VPC.
type Subnet struct {
	ID, VPCID, AvailabilityZone string
	CIDR                        netip.Prefix
	Tags                        map[string]string
}

// NetworkInterface is an elastic network interface as EC2 holds it.
type NetworkInterface struct {
	ID, SubnetID, VPCID, AvailabilityZone, OwnerID string
	Description                                    string
	MAC                                            string
	// InterfaceType is "interface" for the ENIs EC2 users create.
	InterfaceType string
	// Status is available (detached) or in-use (attached).
	Status string
	// PrivateIPv4s are the interface's private addresses, the primary one first.
	PrivateIPv4s    []string
	IPv6            []string
	Groups          []string
	Tags            map[string]string
	SourceDestCheck bool
	Attachment      *NetworkInterfaceAttachment
}

// NetworkInterfaceAttachment is an interface's attachment to an instance.
type NetworkInterfaceAttachment struct {
	ID, InstanceID                string
	DeviceIndex, NetworkCardIndex int
	DeleteOnTermination           bool
	// Status is attached (attachments complete at once here).
	Status     string
	AttachTime time.Time
}

func (n *NetworkInterface) clone() NetworkInterface {
	c := *n
	c.PrivateIPv4s = slices.Clone(n.PrivateIPv4s)
	c.IPv6 = slices.Clone(n.IPv6)
	c.Groups = slices.Clone(n.Groups)
	c.Tags = maps.Clone(n.Tags)
	if n.Attachment != nil {
		a := *n.Attachment
		c.Attachment = &a
	}
	return c
}

// NetworkHooks make the local cloud's network real: EC2 calls them, one at a time and
// in order, after an interface of an instance was attached or detached, or addresses
// were assigned to or unassigned from an attached interface. An error from
// InterfaceAttached or AddressesAssigned undoes the change and fails the API call with
// InternalError (which clients retry); errors of the removals are logged.
type NetworkHooks interface {
	// InterfaceAttached: nic (with its attachment and addresses) is now attached.
	InterfaceAttached(ctx context.Context, nic NetworkInterface) error
	// InterfaceDetached: nic, as it was while attached, is detached (or its instance
	// terminated); everything of it must go.
	InterfaceDetached(ctx context.Context, nic NetworkInterface) error
	// AddressesAssigned: addrs were added to the attached nic (shown with them).
	AddressesAssigned(ctx context.Context, nic NetworkInterface, addrs []string) error
	// AddressesUnassigned: addrs were taken from the attached nic (shown without them).
	AddressesUnassigned(ctx context.Context, nic NetworkInterface, addrs []string) error
}

// SetNetworkHooks installs the hooks (nil removes them); log receives the errors of
// removals.
func (e *EC2) SetNetworkHooks(h NetworkHooks, log *slog.Logger) {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.hooks = h
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e.hookLog = log
}

// AddSubnet adds a subnet of the local VPC, in which instances and interfaces get
// their addresses.
func (e *EC2) AddSubnet(s Subnet) error {
	if !strings.HasPrefix(s.ID, "subnet-") || !s.CIDR.IsValid() || !s.CIDR.Addr().Is4() || s.CIDR.Bits() > 28 {
		return fmt.Errorf("subnet %q %s: want an ID subnet-… and an IPv4 range of /28 or larger", s.ID, s.CIDR)
	}
	if s.AvailabilityZone == "" {
		s.AvailabilityZone = "us-west-2a"
	}
	if s.VPCID == "" {
		s.VPCID = "vpc-00000000000000000"
	}
	s.CIDR = s.CIDR.Masked()
	s.Tags = maps.Clone(s.Tags)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.subnets[s.ID]; dup {
		return fmt.Errorf("subnet %s exists already", s.ID)
	}
	e.subnets[s.ID] = &subnetState{Subnet: s}
	return nil
}

type subnetState struct {
	Subnet
	// next is the offset where the next address search starts (next fit, so that a
	// freed address is not given out again at once).
	next int
}

// size is the number of addresses of the subnet.
func (s *subnetState) size() int { return 1 << (32 - s.CIDR.Bits()) }

// usable tells whether EC2 may give out the address at offset off: not the first
// four (network, router, DNS, reserved) nor the last (broadcast).
func (s *subnetState) usable(off int) bool { return off >= 4 && off < s.size()-1 }

func (s *subnetState) addr(off int) netip.Addr {
	a := s.CIDR.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(off)                                                                     //nolint:gosec // G115: off < size() ≤ 2^28.
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) //nolint:gosec // G115: each byte of v, truncation intended.
}

// firstPick is where address searches start: past the subnet's first 256 addresses
// when it is larger than that, which instances take from the eleventh on.
func (s *subnetState) firstPick() int {
	if s.size() > 512 {
		return 256
	}
	return 4
}

// usedAddrs is every private address in use, with the interface holding it. Locked.
func (e *EC2) usedAddrs() map[netip.Addr]string {
	used := map[netip.Addr]string{}
	for _, n := range e.enis {
		for _, a := range n.PrivateIPv4s {
			if addr, err := netip.ParseAddr(a); err == nil {
				used[addr] = n.ID
			}
		}
	}
	for _, r := range e.instances {
		if r.State == "terminated" {
			continue
		}
		if addr, err := netip.ParseAddr(r.PrivateIPv4); err == nil {
			if _, ok := used[addr]; !ok {
				used[addr] = "instance " + r.ID
			}
		}
	}
	return used
}

// AddressInUse tells whether a private address is held by an instance or interface.
func (e *EC2) AddressInUse(addr netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.usedAddrs()[addr]
	return ok
}

// allocAddrs picks n free addresses of a subnet. Locked.
func (e *EC2) allocAddrs(s *subnetState, n int) ([]string, *protocol.Error) {
	used := e.usedAddrs()
	var out []string
	if s.next == 0 {
		s.next = s.firstPick()
	}
	size := s.size()
	for i := 0; i < size && len(out) < n; i++ {
		off := (s.next + i) % size
		if !s.usable(off) {
			continue
		}
		a := s.addr(off)
		if _, taken := used[a]; taken {
			continue
		}
		out = append(out, a.String())
		used[a] = "new"
		if len(out) == n {
			s.next = (off + 1) % size
		}
	}
	if len(out) < n {
		return nil, protocol.Errorf(http.StatusBadRequest, "InsufficientFreeAddressesInSubnet", "The specified subnet %s does not have enough free addresses to satisfy the request.", s.ID)
	}
	return out, nil
}

// availableAddrs counts the subnet's free addresses. Locked.
func (e *EC2) availableAddrs(s *subnetState) int {
	n := s.size() - 5
	for a := range e.usedAddrs() {
		if s.CIDR.Contains(a) {
			n--
		}
	}
	return max(n, 0)
}

// unlimited are the limits of an instance type missing from the table: those of the
// largest types, so that nothing local is refused for want of a row.
var unlimited = nodeconfig.ENIInfo{ENIs: 15, IPsPerENI: 50}

// typeLimits are an instance type's network interfaces and IPv4 addresses per interface.
func typeLimits(instanceType string) nodeconfig.ENIInfo {
	if info, ok := instancetypes.Lookup(instanceType); ok {
		return info
	}
	return unlimited
}

// ipLimit is how many private IPv4 addresses nic may hold. Locked.
func (e *EC2) ipLimit(n *NetworkInterface) int {
	if n.Attachment == nil {
		return unlimited.IPsPerENI
	}
	if r := e.instances[n.Attachment.InstanceID]; r != nil {
		return typeLimits(r.Type).IPsPerENI
	}
	return unlimited.IPsPerENI
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// newMAC draws an unused locally administered unicast MAC. Locked.
func (e *EC2) newMAC() string {
	for {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		mac := fmt.Sprintf("0e:01:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
		if !slices.ContainsFunc(slices.Collect(maps.Values(e.enis)), func(n *NetworkInterface) bool { return n.MAC == mac }) {
			return mac
		}
	}
}

// launchPrimaryInterface creates and attaches an instance's primary interface. Locked.
func (e *EC2) launchPrimaryInterface(r *InstanceRecord) {
	suffix := strings.TrimPrefix(r.ID, "i-")
	groups := []string{DefaultSecurityGroupID}
	if len(r.SecurityGroupIDs) > 0 {
		groups = slices.Clone(r.SecurityGroupIDs)
	}
	n := &NetworkInterface{
		ID: "eni-" + suffix, SubnetID: r.SubnetID, VPCID: r.VPCID, AvailabilityZone: r.AvailabilityZone,
		OwnerID: r.AccountID, MAC: r.MAC, InterfaceType: "interface", Status: "in-use",
		PrivateIPv4s: append([]string{r.PrivateIPv4}, r.SecondaryPrivateIPv4s...), IPv6: slices.Clone(r.IPv6),
		Groups: groups, Tags: map[string]string{}, SourceDestCheck: true,
		Attachment: &NetworkInterfaceAttachment{ID: "eni-attach-" + suffix, InstanceID: r.ID, DeleteOnTermination: true,
			Status: "attached", AttachTime: r.LaunchTime},
	}
	e.enis[n.ID] = n
}

// instanceInterfaces are the interfaces attached to an instance, by device index. Locked.
func (e *EC2) instanceInterfaces(id string) []*NetworkInterface {
	var out []*NetworkInterface
	for _, n := range e.enis {
		if n.Attachment != nil && n.Attachment.InstanceID == id {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, byDeviceIndex)
	return out
}

// interfacesByInstance is instanceInterfaces of every instance, found in one pass over
// the interfaces, so that DescribeInstances over many instances is linear. Locked.
func (e *EC2) interfacesByInstance() map[string][]*NetworkInterface {
	out := map[string][]*NetworkInterface{}
	for _, n := range e.enis {
		if n.Attachment != nil {
			out[n.Attachment.InstanceID] = append(out[n.Attachment.InstanceID], n)
		}
	}
	for _, nics := range out {
		slices.SortFunc(nics, byDeviceIndex)
	}
	return out
}

// byDeviceIndex orders attached interfaces by network card, then device index.
func byDeviceIndex(a, b *NetworkInterface) int {
	return a.Attachment.NetworkCardIndex*1000 + a.Attachment.DeviceIndex - b.Attachment.NetworkCardIndex*1000 - b.Attachment.DeviceIndex
}

// InstanceNetworkInterfaces returns copies of the interfaces attached to an instance,
// ordered by device index: what its instance metadata shows.
func (e *EC2) InstanceNetworkInterfaces(instanceID string) []NetworkInterface {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []NetworkInterface
	for _, n := range e.instanceInterfaces(instanceID) {
		out = append(out, n.clone())
	}
	return out
}

// NetworkInterfaces returns copies of every interface, ordered by ID.
func (e *EC2) NetworkInterfaces() []NetworkInterface {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]NetworkInterface, 0, len(e.enis))
	for _, id := range slices.Sorted(maps.Keys(e.enis)) {
		out = append(out, e.enis[id].clone())
	}
	return out
}

// SubnetOf returns a subnet.
func (e *EC2) SubnetOf(id string) (Subnet, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.subnets[id]
	if !ok {
		return Subnet{}, false
	}
	return s.Subnet, true
}

// terminateInterfaces detaches an instance's interfaces as it terminates and deletes
// those marked delete-on-termination. Called with hookMu held, mu not.
func (e *EC2) terminateInterfaces(ctx context.Context, id string) {
	e.mu.Lock()
	var gone []NetworkInterface
	for _, n := range e.instanceInterfaces(id) {
		gone = append(gone, n.clone())
		if n.Attachment.DeleteOnTermination {
			delete(e.enis, n.ID)
			continue
		}
		n.Attachment, n.Status = nil, "available"
	}
	e.mu.Unlock()
	for _, n := range gone {
		e.hookDetached(ctx, n)
	}
}

func (e *EC2) hookDetached(ctx context.Context, n NetworkInterface) {
	if e.hooks == nil {
		return
	}
	if err := e.hooks.InterfaceDetached(ctx, n); err != nil {
		e.hookLog.Warn("VPC router: removing a detached network interface failed", "eni", n.ID, "err", err)
	}
}

var errHookFailed = &protocol.Error{Status: http.StatusInternalServerError, Code: "InternalError", Message: "An internal error has occurred"}

func notFoundENI(id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", id)
}

// eni returns an interface by ID, checking the ID's form. Locked.
func (e *EC2) eni(id string) (*NetworkInterface, *protocol.Error) {
	if !eniIDRE.MatchString(id) {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidNetworkInterfaceId.Malformed", "Invalid id: %q (expecting \"eni-...\")", id)
	}
	n, ok := e.enis[id]
	if !ok {
		return nil, notFoundENI(id)
	}
	return n, nil
}
