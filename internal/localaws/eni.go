package localaws

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
func (e *EC2) allocAddrs(s *subnetState, n int) ([]string, *apiError) {
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
		return nil, &apiError{http.StatusBadRequest, "InsufficientFreeAddressesInSubnet",
			fmt.Sprintf("The specified subnet %s does not have enough free addresses to satisfy the request.", s.ID)}
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
// the interfaces: a DescribeInstances over a thousand instances made one pass per
// instance before, and used most of the local cloud's CPU in a 1000-node burst
// (docs/benchmarks.md). Locked.
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

var hookFailed = &apiError{http.StatusInternalServerError, "InternalError", "An internal error has occurred"}

func notFoundENI(id string) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidNetworkInterfaceID.NotFound", fmt.Sprintf("The networkInterface ID '%s' does not exist", id)}
}

// eni returns an interface by ID, checking the ID's form. Locked.
func (e *EC2) eni(id string) (*NetworkInterface, *apiError) {
	if !eniIDRE.MatchString(id) {
		return nil, &apiError{http.StatusBadRequest, "InvalidNetworkInterfaceId.Malformed", fmt.Sprintf("Invalid id: %q (expecting \"eni-...\")", id)}
	}
	n, ok := e.enis[id]
	if !ok {
		return nil, notFoundENI(id)
	}
	return n, nil
}

type createENIRequest struct {
	subnetID, description, interfaceType string
	groups                               []string
	// primary is the explicit primary address; secondaries explicit further ones;
	// count the number of further ones to pick.
	primary     string
	secondaries []string
	count       int
	tags        map[string]string
	token, key  string
}

//nolint:gocyclo // EC2's validation rules one after another, as the API applies them.
func (e *EC2) createNetworkInterface(req createENIRequest) (NetworkInterface, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if req.token != "" {
		if prev, ok := e.tokens[req.token]; ok {
			if prev.key != req.key {
				return NetworkInterface{}, &apiError{http.StatusBadRequest, "IdempotentParameterMismatch",
					"The client token you have provided is associated with a resource that has different parameters."}
			}
			if n, ok := e.enis[prev.id]; ok {
				return n.clone(), nil
			}
		}
	}
	s, ok := e.subnets[req.subnetID]
	if !ok {
		return NetworkInterface{}, &apiError{http.StatusBadRequest, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", req.subnetID)}
	}
	for _, g := range req.groups {
		if g != DefaultSecurityGroupID {
			return NetworkInterface{}, &apiError{http.StatusBadRequest, "InvalidSecurityGroupID.NotFound", fmt.Sprintf("The security group '%s' does not exist", g)}
		}
	}
	if len(req.groups) == 0 {
		req.groups = []string{DefaultSecurityGroupID}
	}
	used := e.usedAddrs()
	var addrs []string
	for _, a := range append(one(req.primary), req.secondaries...) {
		addr, err := netip.ParseAddr(a)
		if err != nil || !addr.Is4() {
			return NetworkInterface{}, invalidParameter("Invalid value '%s' for PrivateIpAddresses", a)
		}
		off := int(ipv4Diff(addr, s.CIDR.Addr()))
		if !s.CIDR.Contains(addr) || !s.usable(off) {
			return NetworkInterface{}, invalidParameter("Address %s does not fall within the subnet's address range", a)
		}
		if _, taken := used[addr]; taken || slices.Contains(addrs, addr.String()) {
			return NetworkInterface{}, &apiError{http.StatusBadRequest, "InvalidIPAddress.InUse", fmt.Sprintf("The specified address %s is already in use.", a)}
		}
		addrs = append(addrs, addr.String())
	}
	want := req.count
	if req.primary == "" {
		want++
	}
	if len(addrs)+want > unlimited.IPsPerENI {
		return NetworkInterface{}, &apiError{http.StatusBadRequest, "PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit."}
	}
	picked, aerr := e.allocAddrs(s, want)
	if aerr != nil {
		return NetworkInterface{}, aerr
	}
	if req.primary == "" {
		addrs = append(picked[:1:1], append(addrs, picked[1:]...)...)
	} else {
		addrs = append(addrs, picked...)
	}
	if req.interfaceType == "" {
		req.interfaceType = "interface"
	}
	n := &NetworkInterface{
		ID: "eni-" + randomHex(17), SubnetID: s.ID, VPCID: s.VPCID, AvailabilityZone: s.AvailabilityZone,
		OwnerID: e.AccountID, Description: req.description, MAC: e.newMAC(), InterfaceType: req.interfaceType,
		Status: "available", PrivateIPv4s: addrs, Groups: req.groups, Tags: req.tags, SourceDestCheck: true,
	}
	if n.Tags == nil {
		n.Tags = map[string]string{}
	}
	e.enis[n.ID] = n
	if req.token != "" {
		e.tokens[req.token] = tokenUse{id: n.ID, key: req.key}
	}
	return n.clone(), nil
}

type tokenUse struct{ id, key string }

func ipv4Diff(a, b netip.Addr) uint32 {
	x, y := a.As4(), b.As4()
	return (uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])) -
		(uint32(y[0])<<24 | uint32(y[1])<<16 | uint32(y[2])<<8 | uint32(y[3]))
}

func (e *EC2) deleteNetworkInterface(id string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, aerr := e.eni(id)
	if aerr != nil {
		return aerr
	}
	if n.Attachment != nil {
		return &apiError{http.StatusBadRequest, "InvalidNetworkInterface.InUse", fmt.Sprintf("The network interface '%s' is currently in use.", id)}
	}
	delete(e.enis, id)
	return nil
}

type attachRequest struct {
	instanceID, eniID string
	deviceIndex       int
	networkCard       int
}

func (e *EC2) attachNetworkInterface(ctx context.Context, req attachRequest) (string, *apiError) {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	n, aerr := e.eni(req.eniID)
	if aerr != nil {
		e.mu.Unlock()
		return "", aerr
	}
	r, ok := e.instances[req.instanceID]
	if !instanceIDRE.MatchString(req.instanceID) {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "InvalidInstanceID.Malformed", fmt.Sprintf("Invalid id: %q", req.instanceID)}
	}
	if !ok {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", req.instanceID)}
	}
	if r.State != "running" && r.State != "stopped" {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is not in a valid state for this operation.", r.ID)}
	}
	if n.Attachment != nil {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "InvalidNetworkInterface.InUse", fmt.Sprintf("Interface: [%s] in use.", n.ID)}
	}
	if n.AvailabilityZone != r.AvailabilityZone {
		e.mu.Unlock()
		return "", invalidParameter("The network interface %s is in %s, the instance %s in %s: they must be in the same availability zone.", n.ID, n.AvailabilityZone, r.ID, r.AvailabilityZone)
	}
	if req.networkCard != 0 {
		e.mu.Unlock()
		return "", invalidParameter("Invalid network card index %d: instance type %s has 1 network card.", req.networkCard, r.Type)
	}
	limits := typeLimits(r.Type)
	attached := e.instanceInterfaces(r.ID)
	if slices.ContainsFunc(attached, func(a *NetworkInterface) bool { return a.Attachment.DeviceIndex == req.deviceIndex }) {
		e.mu.Unlock()
		return "", invalidParameter("Instance '%s' already has an interface attached at device index '%d'.", r.ID, req.deviceIndex)
	}
	if len(attached)+1 > limits.ENIs {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "AttachmentLimitExceeded", fmt.Sprintf("Interface count %d exceeds the limit for %s", len(attached)+1, r.Type)}
	}
	if len(n.PrivateIPv4s) > limits.IPsPerENI {
		e.mu.Unlock()
		return "", &apiError{http.StatusBadRequest, "PrivateIpAddressLimitExceeded",
			fmt.Sprintf("Network interface %s has %d private addresses, more than the %d of instance type %s.", n.ID, len(n.PrivateIPv4s), limits.IPsPerENI, r.Type)}
	}
	n.Attachment = &NetworkInterfaceAttachment{ID: "eni-attach-" + randomHex(17), InstanceID: r.ID, DeviceIndex: req.deviceIndex,
		Status: "attached", AttachTime: e.now().UTC().Truncate(time.Second)}
	n.Status = "in-use"
	shown := n.clone()
	e.mu.Unlock()
	if e.hooks != nil {
		if err := e.hooks.InterfaceAttached(ctx, shown); err != nil {
			e.hookLog.Warn("VPC router: attaching a network interface failed", "eni", n.ID, "instance", r.ID, "err", err)
			e.hookDetached(context.WithoutCancel(ctx), shown)
			e.mu.Lock()
			n.Attachment, n.Status = nil, "available"
			e.mu.Unlock()
			return "", hookFailed
		}
	}
	return shown.Attachment.ID, nil
}

func (e *EC2) detachNetworkInterface(ctx context.Context, attachmentID string) *apiError {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	if !strings.HasPrefix(attachmentID, "eni-attach-") {
		e.mu.Unlock()
		return &apiError{http.StatusBadRequest, "InvalidNetworkInterfaceAttachmentId.Malformed", fmt.Sprintf("Invalid id: %q (expecting \"eni-attach-...\")", attachmentID)}
	}
	var n *NetworkInterface
	for _, c := range e.enis {
		if c.Attachment != nil && c.Attachment.ID == attachmentID {
			n = c
		}
	}
	if n == nil {
		e.mu.Unlock()
		return &apiError{http.StatusBadRequest, "InvalidAttachmentID.NotFound", fmt.Sprintf("The attachment ID '%s' does not exist", attachmentID)}
	}
	if n.Attachment.DeviceIndex == 0 {
		e.mu.Unlock()
		return &apiError{http.StatusBadRequest, "OperationNotPermitted", fmt.Sprintf("The network interface at device index 0 and networkCard index 0 cannot be detached (%s).", n.ID)}
	}
	was := n.clone()
	n.Attachment, n.Status = nil, "available"
	e.mu.Unlock()
	e.hookDetached(ctx, was)
	return nil
}

type assignRequest struct {
	eniID         string
	count         int
	addrs         []string
	allowReassign bool
}

//nolint:gocyclo // EC2's validation and assignment rules in order, as the API applies them.
func (e *EC2) assignPrivateIPs(ctx context.Context, req assignRequest) ([]string, *apiError) {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	n, aerr := e.eni(req.eniID)
	if aerr != nil {
		e.mu.Unlock()
		return nil, aerr
	}
	s, ok := e.subnets[n.SubnetID]
	if !ok {
		e.mu.Unlock()
		return nil, &apiError{http.StatusBadRequest, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", n.SubnetID)}
	}
	want := req.count + len(req.addrs)
	if len(n.PrivateIPv4s)+want > e.ipLimit(n) {
		e.mu.Unlock()
		return nil, &apiError{http.StatusBadRequest, "PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit."}
	}
	used := e.usedAddrs()
	var added []string
	var moved []*NetworkInterface // interfaces losing an address to reassignment
	for _, a := range req.addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil || !addr.Is4() {
			e.mu.Unlock()
			return nil, invalidParameter("Invalid value '%s' for PrivateIpAddresses", a)
		}
		if !s.CIDR.Contains(addr) || !s.usable(int(ipv4Diff(addr, s.CIDR.Addr()))) {
			e.mu.Unlock()
			return nil, invalidParameter("Address %s does not fall within the subnet's address range", a)
		}
		holder, taken := used[addr]
		if holder == n.ID || slices.Contains(added, addr.String()) {
			e.mu.Unlock()
			return nil, invalidParameter("Address %s is already assigned to the network interface %s", a, n.ID)
		}
		if taken {
			other := e.enis[holder]
			if !req.allowReassign || other == nil || other.PrivateIPv4s[0] == addr.String() {
				e.mu.Unlock()
				return nil, &apiError{http.StatusBadRequest, "InvalidIPAddress.InUse", fmt.Sprintf("The specified address %s is already in use.", a)}
			}
			moved = append(moved, other)
		}
		added = append(added, addr.String())
	}
	if req.count > 0 {
		picked, aerr := e.allocAddrs(s, req.count)
		if aerr != nil {
			e.mu.Unlock()
			return nil, aerr
		}
		added = append(added, picked...)
	}
	type loss struct {
		nic   NetworkInterface
		addrs []string
	}
	var losses []loss
	for _, other := range moved {
		var lost []string
		other.PrivateIPv4s = slices.DeleteFunc(other.PrivateIPv4s, func(a string) bool {
			if slices.Contains(added, a) {
				lost = append(lost, a)
				return true
			}
			return false
		})
		if other.Attachment != nil && len(lost) > 0 {
			losses = append(losses, loss{other.clone(), lost})
		}
	}
	n.PrivateIPv4s = append(n.PrivateIPv4s, added...)
	shown := n.clone()
	e.mu.Unlock()
	if e.hooks == nil {
		return added, nil
	}
	for _, l := range losses {
		if err := e.hooks.AddressesUnassigned(ctx, l.nic, l.addrs); err != nil {
			e.hookLog.Warn("VPC router: removing reassigned addresses failed", "eni", l.nic.ID, "err", err)
		}
	}
	if shown.Attachment != nil {
		if err := e.hooks.AddressesAssigned(ctx, shown, added); err != nil {
			e.hookLog.Warn("VPC router: adding assigned addresses failed", "eni", n.ID, "err", err)
			e.mu.Lock()
			n.PrivateIPv4s = slices.DeleteFunc(n.PrivateIPv4s, func(a string) bool { return slices.Contains(added, a) })
			undone := n.clone()
			e.mu.Unlock()
			if err := e.hooks.AddressesUnassigned(context.WithoutCancel(ctx), undone, added); err != nil {
				e.hookLog.Warn("VPC router: removing assigned addresses failed", "eni", n.ID, "err", err)
			}
			return nil, hookFailed
		}
	}
	return added, nil
}

func (e *EC2) unassignPrivateIPs(ctx context.Context, eniID string, addrs []string) *apiError {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	n, aerr := e.eni(eniID)
	if aerr != nil {
		e.mu.Unlock()
		return aerr
	}
	if len(addrs) == 0 {
		e.mu.Unlock()
		return &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter privateIpAddress"}
	}
	for _, a := range addrs {
		i := slices.Index(n.PrivateIPv4s, a)
		switch {
		case i < 0:
			e.mu.Unlock()
			return invalidParameter("Some of the specified addresses are not assigned to interface %s", n.ID)
		case i == 0:
			e.mu.Unlock()
			return invalidParameter("The primary private IP address %s of interface %s cannot be unassigned", a, n.ID)
		}
	}
	n.PrivateIPv4s = slices.DeleteFunc(n.PrivateIPv4s, func(a string) bool { return slices.Contains(addrs, a) })
	shown := n.clone()
	e.mu.Unlock()
	if e.hooks != nil && shown.Attachment != nil {
		if err := e.hooks.AddressesUnassigned(ctx, shown, addrs); err != nil {
			e.hookLog.Warn("VPC router: removing unassigned addresses failed", "eni", n.ID, "err", err)
		}
	}
	return nil
}

type modifyENIRequest struct {
	eniID               string
	attachmentID        string
	deleteOnTermination *bool
	sourceDestCheck     *bool
	description         *string
	groups              []string
	setGroups           bool
}

func (e *EC2) modifyNetworkInterface(req modifyENIRequest) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, aerr := e.eni(req.eniID)
	if aerr != nil {
		return aerr
	}
	if req.deleteOnTermination != nil {
		if n.Attachment == nil || n.Attachment.ID != req.attachmentID {
			return &apiError{http.StatusBadRequest, "InvalidAttachmentID.NotFound", fmt.Sprintf("The attachment ID '%s' does not exist", req.attachmentID)}
		}
		n.Attachment.DeleteOnTermination = *req.deleteOnTermination
	}
	if req.sourceDestCheck != nil {
		n.SourceDestCheck = *req.sourceDestCheck
	}
	if req.description != nil {
		n.Description = *req.description
	}
	if req.setGroups {
		for _, g := range req.groups {
			if g != DefaultSecurityGroupID {
				return &apiError{http.StatusBadRequest, "InvalidSecurityGroupID.NotFound", fmt.Sprintf("The security group '%s' does not exist", g)}
			}
		}
		n.Groups = slices.Clone(req.groups)
	}
	return nil
}

// createTags tags network interfaces and subnets (the resources of this model).
func (e *EC2) createTags(ids []string, tags map[string]string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "eni-"):
			if _, aerr := e.eni(id); aerr != nil {
				return aerr
			}
		case strings.HasPrefix(id, "subnet-"):
			if e.subnets[id] == nil {
				return &apiError{http.StatusBadRequest, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", id)}
			}
		default:
			return &apiError{http.StatusBadRequest, "InvalidID", fmt.Sprintf("The ID '%s' is not valid", id)}
		}
	}
	for _, id := range ids {
		if n := e.enis[id]; n != nil {
			maps.Copy(n.Tags, tags)
		} else if s := e.subnets[id]; s != nil {
			if s.Tags == nil {
				s.Tags = map[string]string{}
			}
			maps.Copy(s.Tags, tags)
		}
	}
	return nil
}
