package ec2

// This file holds EC2's instances: the inventory of launched instances, their states,
// and DescribeInstances.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// InstanceRecord is what EC2 knows of a launched instance: its metadata and what only
// the EC2 API reports.
type InstanceRecord struct {
	Instance
	// State is one of pending, running, stopping, stopped, shutting-down, terminated.
	State      string
	LaunchTime time.Time
	// SecondaryPrivateIPv4s are further private addresses of the primary network interface.
	SecondaryPrivateIPv4s []string
	// PublicIPv4 and PublicDNSName are empty for an instance without a public address.
	PublicIPv4    string
	PublicDNSName string

	// nics are the attached interfaces, in a record shown to callers.
	nics []NetworkInterface
	// Tags are the instance's tags (WithTags).
	Tags map[string]string
	// SecurityGroupIDs are the groups of the primary network interface
	// (WithSecurityGroups); none for the VPC's default group.
	SecurityGroupIDs []string
}

// LaunchOption sets what Instance does not describe on a launched instance.
type LaunchOption func(*InstanceRecord)

// WithPublicIPv4 gives the instance a public IPv4 address and EC2's public DNS name for it.
func WithPublicIPv4(addr string) LaunchOption {
	return func(r *InstanceRecord) { r.PublicIPv4 = addr }
}

// WithSecondaryPrivateIPv4s adds private addresses to the primary network interface.
func WithSecondaryPrivateIPv4s(addrs ...string) LaunchOption {
	return func(r *InstanceRecord) { r.SecondaryPrivateIPv4s = append(r.SecondaryPrivateIPv4s, addrs...) }
}

// instanceStateCodes are EC2's codes of the instance states (the low byte of code).
var instanceStateCodes = map[string]int{
	"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80,
}

var (
	instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	eniIDRE      = regexp.MustCompile(`^eni-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

// Launch adds a running instance. Its ID must be an EC2 instance ID not yet launched;
// InstanceDefaults fills what else it leaves out.
func (e *EC2) Launch(inst Instance, opts ...LaunchOption) error {
	if inst.ID == "" {
		return errors.New("launching an instance without an ID")
	}
	if !instanceIDRE.MatchString(inst.ID) {
		return fmt.Errorf("instance ID %q is not i- and 8 or 17 hex digits", inst.ID)
	}
	if inst.AccountID == "" {
		inst.AccountID = e.AccountID
	}
	if inst.Type == "" {
		inst.Type = "m5.large"
	}
	if err := InstanceDefaults(&inst); err != nil {
		return err
	}
	rec := &InstanceRecord{Instance: inst, State: "running", LaunchTime: e.now().UTC().Truncate(time.Second)}
	for _, o := range opts {
		o(rec)
	}
	rec = rec.clone()
	for _, a := range rec.SecondaryPrivateIPv4s {
		if addr, err := netip.ParseAddr(a); err != nil || !addr.Is4() {
			return fmt.Errorf("instance %s: secondary private IPv4 %q is not an IPv4 address", inst.ID, a)
		}
	}
	for _, a := range rec.IPv6 {
		if addr, err := netip.ParseAddr(a); err != nil || !addr.Is6() || addr.Is4In6() {
			return fmt.Errorf("instance %s: %q is not an IPv6 address", inst.ID, a)
		}
	}
	if rec.PublicIPv4 != "" {
		addr, err := netip.ParseAddr(rec.PublicIPv4)
		if err != nil || !addr.Is4() {
			return fmt.Errorf("instance %s: public IPv4 %q is not an IPv4 address", inst.ID, rec.PublicIPv4)
		}
		rec.PublicDNSName = PublicDNSName(addr, rec.Region)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.admitLaunch(rec); err != nil {
		return err
	}
	e.instances[inst.ID] = rec
	e.launchPrimaryInterface(rec)
	return nil
}

// admitLaunch refuses an instance already launched, one in a security group that does
// not exist, and one whose addresses are in use. Locked.
func (e *EC2) admitLaunch(rec *InstanceRecord) error {
	if _, dup := e.instances[rec.ID]; dup {
		return fmt.Errorf("instance %s is already launched", rec.ID)
	}
	if err := e.checkLaunchGroups(rec.ID, rec.SecurityGroupIDs); err != nil {
		return err
	}
	used := e.usedAddrs()
	for _, a := range rec.privateIPv4s() {
		if holder, taken := used[netip.MustParseAddr(a)]; taken {
			return fmt.Errorf("instance %s: private IPv4 %s is in use by %s", rec.ID, a, holder)
		}
	}
	return nil
}

// PublicDNSName is EC2's public DNS name for an address: ec2-A-B-C-D.compute-1.amazonaws.com
// in us-east-1, ec2-A-B-C-D.REGION.compute.amazonaws.com elsewhere.
func PublicDNSName(addr netip.Addr, region string) string {
	host := "ec2-" + strings.ReplaceAll(addr.String(), ".", "-")
	if region == "us-east-1" {
		return host + ".compute-1.amazonaws.com"
	}
	return host + "." + region + ".compute.amazonaws.com"
}

// SetState moves an instance to an EC2 instance state.
func (e *EC2) SetState(id, state string) error {
	if _, ok := instanceStateCodes[state]; !ok {
		return fmt.Errorf("unknown instance state %q", state)
	}
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	rec, ok := e.instances[id]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("no instance %s", id)
	}
	was := rec.State
	rec.State = state
	e.mu.Unlock()
	if state == "terminated" && was != "terminated" {
		e.terminateInterfaces(context.Background(), id)
	}
	return nil
}

// Remove forgets an instance, as EC2 does some time after it terminated.
func (e *EC2) Remove(id string) {
	e.mu.Lock()
	delete(e.instances, id)
	e.mu.Unlock()
}

// Instances returns every instance, ordered by ID.
func (e *EC2) Instances() []InstanceRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]InstanceRecord, 0, len(e.instances))
	attached := e.interfacesByInstance()
	for _, id := range slices.Sorted(maps.Keys(e.instances)) {
		out = append(out, *viewWith(e.instances[id], attached[id]))
	}
	return out
}

// HasRole tells whether any instance not terminated has the role; false on a nil EC2.
func (e *EC2) HasRole(role string) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rec := range e.instances {
		// A terminated instance holds its role no more: the role can then be deleted.
		if rec.Role == role && rec.State != "terminated" {
			return true
		}
	}
	return false
}

func (r *InstanceRecord) clone() *InstanceRecord {
	c := *r
	c.VPCIPv4CIDRs = slices.Clone(r.VPCIPv4CIDRs)
	c.IPv6 = slices.Clone(r.IPv6)
	c.UserData = slices.Clone(r.UserData)
	c.SecondaryPrivateIPv4s = slices.Clone(r.SecondaryPrivateIPv4s)
	c.nics = slices.Clone(r.nics)
	c.Tags = maps.Clone(r.Tags)
	c.SecurityGroupIDs = slices.Clone(r.SecurityGroupIDs)
	return &c
}

// viewWith is an instance as callers see it: with its attached interfaces (by device
// index), the primary interface's further addresses as SecondaryPrivateIPv4s. Callers
// that show many instances find every instance's interfaces in one pass
// (interfacesByInstance) instead of one pass over every interface per instance.
func viewWith(r *InstanceRecord, attached []*NetworkInterface) *InstanceRecord {
	c := r.clone()
	c.nics = nil
	for _, n := range attached {
		c.nics = append(c.nics, n.clone())
		if n.Attachment.DeviceIndex == 0 {
			c.SecondaryPrivateIPv4s = slices.Clone(n.PrivateIPv4s[1:])
		}
	}
	return c
}

// shown is the instance as DescribeInstances reports it now: a terminated instance has
// no addresses, names or network interfaces any more.
func (r *InstanceRecord) shown() *InstanceRecord {
	c := r.clone()
	if c.State == "terminated" {
		c.PrivateIPv4, c.PrivateDNSName, c.MAC, c.SubnetID, c.VPCID = "", "", "", "", ""
		c.IPv6, c.SecondaryPrivateIPv4s, c.PublicIPv4, c.PublicDNSName = nil, nil, "", ""
		c.nics = nil
	}
	return c
}

func (r *InstanceRecord) privateIPv4s() []string {
	if r.PrivateIPv4 == "" {
		return nil
	}
	if r.nics == nil {
		return append([]string{r.PrivateIPv4}, r.SecondaryPrivateIPv4s...)
	}
	var out []string
	for _, n := range r.nics {
		out = append(out, n.PrivateIPv4s...)
	}
	return out
}

// ec2Filters are the DescribeInstances filters understood: each returns the values an
// instance has for the filter's name.
var ec2Filters = map[string]func(r *InstanceRecord) []string{
	"instance-id":         func(r *InstanceRecord) []string { return one(r.ID) },
	"instance-state-name": func(r *InstanceRecord) []string { return one(r.State) },
	"instance-state-code": func(r *InstanceRecord) []string { return one(strconv.Itoa(instanceStateCodes[r.State])) },
	"instance-type":       func(r *InstanceRecord) []string { return one(r.Type) },
	"image-id":            func(r *InstanceRecord) []string { return one(r.ImageID) },
	"availability-zone":   func(r *InstanceRecord) []string { return one(r.AvailabilityZone) },
	"owner-id":            func(r *InstanceRecord) []string { return one(r.AccountID) },
	"vpc-id":              func(r *InstanceRecord) []string { return one(r.VPCID) },
	"subnet-id":           func(r *InstanceRecord) []string { return one(r.SubnetID) },
	"private-dns-name":    func(r *InstanceRecord) []string { return one(r.PrivateDNSName) },
	"private-ip-address":  func(r *InstanceRecord) []string { return one(r.PrivateIPv4) },
	"dns-name":            func(r *InstanceRecord) []string { return one(r.PublicDNSName) },
	"ip-address":          func(r *InstanceRecord) []string { return one(r.PublicIPv4) },
	"network-interface.addresses.private-ip-address": func(r *InstanceRecord) []string { return r.privateIPv4s() },
	"network-interface.ipv6-addresses.ipv6-address":  func(r *InstanceRecord) []string { return r.IPv6 },
	"iam-instance-profile.arn": func(r *InstanceRecord) []string {
		if r.Role == "" {
			return nil
		}
		return one(iam.InstanceProfileARN(r.AccountID, r.Role))
	},
}

// WithTags tags a launched instance.
func WithTags(tags map[string]string) LaunchOption {
	return func(r *InstanceRecord) { r.Tags = maps.Clone(tags) }
}

// instances is the describeSet of DescribeInstances: instances as they are shown now.
// Locked.
func (e *EC2) instanceSet() describeSet[*InstanceRecord] {
	attached := e.interfacesByInstance()
	return describeSet[*InstanceRecord]{
		keys: slices.Sorted(maps.Keys(e.instances)),
		get: func(id string) (*InstanceRecord, bool) {
			r, ok := e.instances[id]
			if !ok {
				return nil, false
			}
			return viewWith(r, attached[id]).shown(), true
		},
		tags:   func(r *InstanceRecord) map[string]string { return r.Tags },
		values: func(r *InstanceRecord, name string) []string { return ec2Filters[name](r) },
		notFound: func(ids []string) *protocol.Error {
			if len(ids) == 1 {
				return protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
			}
			return protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(ids, ", "))
		},
		requestOrder: true,
	}
}

func (e *EC2) describeInstances(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "InstanceId", func(n string) bool { return ec2Filters[n] != nil || isTagFilter(n) }, 5, 1000, "IncludeManagedResources")
	if aerr != nil {
		return nil, aerr
	}
	for _, id := range in.ids {
		if !instanceIDRE.MatchString(id) {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: %q", id)
		}
	}
	if in.Max != 0 && len(in.ids) > 0 {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	page, next, aerr := e.instanceSet().page(in)
	e.mu.Unlock()
	if aerr != nil {
		return nil, aerr
	}
	var out []reservationXML
	for _, rec := range page {
		out = append(out, reservation(rec))
	}
	return newDescribeOutput(r, "reservationSet", out, next), nil
}
