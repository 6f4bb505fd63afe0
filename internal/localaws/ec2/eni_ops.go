package ec2

// This file holds the changes to network interfaces and their addresses, as the EC2
// actions (eni_actions.go) ask for them, and their rules.

import (
	"context"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

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
func (e *EC2) createNetworkInterface(req createENIRequest) (NetworkInterface, *protocol.Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if req.token != "" {
		if prev, ok := e.tokens[req.token]; ok {
			if prev.key != req.key {
				return NetworkInterface{}, &protocol.Error{Status: http.StatusBadRequest, Code: "IdempotentParameterMismatch", Message: "The client token you have provided is associated with a resource that has different parameters."}
			}
			if n, ok := e.enis[prev.id]; ok {
				return n.clone(), nil
			}
		}
	}
	s, ok := e.subnets[req.subnetID]
	if !ok {
		return NetworkInterface{}, protocol.Errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", req.subnetID)
	}
	for _, g := range req.groups {
		if !e.groupExists(g) {
			return NetworkInterface{}, protocol.Errorf(http.StatusBadRequest, "InvalidSecurityGroupID.NotFound", "The security group '%s' does not exist", g)
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
			return NetworkInterface{}, protocol.InvalidParameter("Invalid value '%s' for PrivateIpAddresses", a)
		}
		off := int(ipv4Diff(addr, s.CIDR.Addr()))
		if !s.CIDR.Contains(addr) || !s.usable(off) {
			return NetworkInterface{}, protocol.InvalidParameter("Address %s does not fall within the subnet's address range", a)
		}
		if _, taken := used[addr]; taken || slices.Contains(addrs, addr.String()) {
			return NetworkInterface{}, protocol.Errorf(http.StatusBadRequest, "InvalidIPAddress.InUse", "The specified address %s is already in use.", a)
		}
		addrs = append(addrs, addr.String())
	}
	want := req.count
	if req.primary == "" {
		want++
	}
	if len(addrs)+want > unlimited.IPsPerENI {
		return NetworkInterface{}, &protocol.Error{Status: http.StatusBadRequest, Code: "PrivateIpAddressLimitExceeded", Message: "Number of private addresses will exceed limit."}
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

func (e *EC2) deleteNetworkInterface(id string) *protocol.Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, aerr := e.eni(id)
	if aerr != nil {
		return aerr
	}
	if n.Attachment != nil {
		return protocol.Errorf(http.StatusBadRequest, "InvalidNetworkInterface.InUse", "The network interface '%s' is currently in use.", id)
	}
	delete(e.enis, id)
	return nil
}

type attachRequest struct {
	instanceID, eniID string
	deviceIndex       int
	networkCard       int
}

func (e *EC2) attachNetworkInterface(ctx context.Context, req attachRequest) (string, *protocol.Error) {
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
		return "", protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: %q", req.instanceID)
	}
	if !ok {
		e.mu.Unlock()
		return "", protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", req.instanceID)
	}
	if r.State != "running" && r.State != "stopped" {
		e.mu.Unlock()
		return "", protocol.Errorf(http.StatusBadRequest, "IncorrectInstanceState", "The instance '%s' is not in a valid state for this operation.", r.ID)
	}
	if n.Attachment != nil {
		e.mu.Unlock()
		return "", protocol.Errorf(http.StatusBadRequest, "InvalidNetworkInterface.InUse", "Interface: [%s] in use.", n.ID)
	}
	if n.AvailabilityZone != r.AvailabilityZone {
		e.mu.Unlock()
		return "", protocol.InvalidParameter("The network interface %s is in %s, the instance %s in %s: they must be in the same availability zone.", n.ID, n.AvailabilityZone, r.ID, r.AvailabilityZone)
	}
	if req.networkCard != 0 {
		e.mu.Unlock()
		return "", protocol.InvalidParameter("Invalid network card index %d: instance type %s has 1 network card.", req.networkCard, r.Type)
	}
	limits := typeLimits(r.Type)
	attached := e.instanceInterfaces(r.ID)
	if slices.ContainsFunc(attached, func(a *NetworkInterface) bool { return a.Attachment.DeviceIndex == req.deviceIndex }) {
		e.mu.Unlock()
		return "", protocol.InvalidParameter("Instance '%s' already has an interface attached at device index '%d'.", r.ID, req.deviceIndex)
	}
	if len(attached)+1 > limits.ENIs {
		e.mu.Unlock()
		return "", protocol.Errorf(http.StatusBadRequest, "AttachmentLimitExceeded", "Interface count %d exceeds the limit for %s", len(attached)+1, r.Type)
	}
	if len(n.PrivateIPv4s) > limits.IPsPerENI {
		e.mu.Unlock()
		return "", protocol.Errorf(http.StatusBadRequest, "PrivateIpAddressLimitExceeded", "Network interface %s has %d private addresses, more than the %d of instance type %s.", n.ID, len(n.PrivateIPv4s), limits.IPsPerENI, r.Type)
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
			return "", errHookFailed
		}
	}
	return shown.Attachment.ID, nil
}

func (e *EC2) detachNetworkInterface(ctx context.Context, attachmentID string) *protocol.Error {
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	if !strings.HasPrefix(attachmentID, "eni-attach-") {
		e.mu.Unlock()
		return protocol.Errorf(http.StatusBadRequest, "InvalidNetworkInterfaceAttachmentId.Malformed", "Invalid id: %q (expecting \"eni-attach-...\")", attachmentID)
	}
	var n *NetworkInterface
	for _, c := range e.enis {
		if c.Attachment != nil && c.Attachment.ID == attachmentID {
			n = c
		}
	}
	if n == nil {
		e.mu.Unlock()
		return protocol.Errorf(http.StatusBadRequest, "InvalidAttachmentID.NotFound", "The attachment ID '%s' does not exist", attachmentID)
	}
	if n.Attachment.DeviceIndex == 0 {
		e.mu.Unlock()
		return protocol.Errorf(http.StatusBadRequest, "OperationNotPermitted", "The network interface at device index 0 and networkCard index 0 cannot be detached (%s).", n.ID)
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
func (e *EC2) assignPrivateIPs(ctx context.Context, req assignRequest) ([]string, *protocol.Error) {
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
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", n.SubnetID)
	}
	want := req.count + len(req.addrs)
	if len(n.PrivateIPv4s)+want > e.ipLimit(n) {
		e.mu.Unlock()
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "PrivateIpAddressLimitExceeded", Message: "Number of private addresses will exceed limit."}
	}
	used := e.usedAddrs()
	var added []string
	var moved []*NetworkInterface // interfaces losing an address to reassignment
	for _, a := range req.addrs {
		addr, err := netip.ParseAddr(a)
		if err != nil || !addr.Is4() {
			e.mu.Unlock()
			return nil, protocol.InvalidParameter("Invalid value '%s' for PrivateIpAddresses", a)
		}
		if !s.CIDR.Contains(addr) || !s.usable(int(ipv4Diff(addr, s.CIDR.Addr()))) {
			e.mu.Unlock()
			return nil, protocol.InvalidParameter("Address %s does not fall within the subnet's address range", a)
		}
		holder, taken := used[addr]
		if holder == n.ID || slices.Contains(added, addr.String()) {
			e.mu.Unlock()
			return nil, protocol.InvalidParameter("Address %s is already assigned to the network interface %s", a, n.ID)
		}
		if taken {
			other := e.enis[holder]
			if !req.allowReassign || other == nil || other.PrivateIPv4s[0] == addr.String() {
				e.mu.Unlock()
				return nil, protocol.Errorf(http.StatusBadRequest, "InvalidIPAddress.InUse", "The specified address %s is already in use.", a)
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
			return nil, errHookFailed
		}
	}
	return added, nil
}

func (e *EC2) unassignPrivateIPs(ctx context.Context, eniID string, addrs []string) *protocol.Error {
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
		return &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter privateIpAddress"}
	}
	for _, a := range addrs {
		i := slices.Index(n.PrivateIPv4s, a)
		switch {
		case i < 0:
			e.mu.Unlock()
			return protocol.InvalidParameter("Some of the specified addresses are not assigned to interface %s", n.ID)
		case i == 0:
			e.mu.Unlock()
			return protocol.InvalidParameter("The primary private IP address %s of interface %s cannot be unassigned", a, n.ID)
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

func (e *EC2) modifyNetworkInterface(req modifyENIRequest) *protocol.Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, aerr := e.eni(req.eniID)
	if aerr != nil {
		return aerr
	}
	if req.deleteOnTermination != nil {
		if n.Attachment == nil || n.Attachment.ID != req.attachmentID {
			return protocol.Errorf(http.StatusBadRequest, "InvalidAttachmentID.NotFound", "The attachment ID '%s' does not exist", req.attachmentID)
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
			if !e.groupExists(g) {
				return protocol.Errorf(http.StatusBadRequest, "InvalidSecurityGroupID.NotFound", "The security group '%s' does not exist", g)
			}
		}
		n.Groups = slices.Clone(req.groups)
	}
	return nil
}

// createTags tags network interfaces, subnets, security groups and their rules.
func (e *EC2) createTags(ids []string, tags map[string]string) *protocol.Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var sets []map[string]string
	for _, id := range ids {
		set, aerr := e.taggable(id)
		if aerr != nil {
			return aerr
		}
		sets = append(sets, set)
	}
	for _, set := range sets {
		maps.Copy(set, tags)
	}
	return nil
}
