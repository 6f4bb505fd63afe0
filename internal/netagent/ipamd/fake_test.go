package ipamd

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// fakeEC2 is an in-memory EC2 with one instance, enforcing the instance type's limits
// with EC2's error codes. Calls can be held (gate) or failed (fail) per operation.
type fakeEC2 struct {
	mu       sync.Mutex
	limits   pool.Limits
	instance string
	subnet   netip.Prefix
	nextIP   netip.Addr
	enis     map[string]*cloud.ENI
	n        int
	calls    map[string]int
	fail     map[string]string // operation -> error code
	gate     map[string]chan struct{}
	noModify bool
}

func newFakeEC2(limits pool.Limits) *fakeEC2 {
	f := &fakeEC2{
		limits: limits, instance: "i-0123", subnet: netip.MustParsePrefix("198.18.0.0/16"),
		nextIP: netip.MustParseAddr("198.18.1.1"), enis: map[string]*cloud.ENI{},
		calls: map[string]int{}, fail: map[string]string{}, gate: map[string]chan struct{}{},
	}
	f.enis["eni-primary"] = &cloud.ENI{ID: "eni-primary", MAC: "02:00:00:00:00:00", SubnetID: "subnet-1", Status: "in-use",
		AttachmentID: "eni-attach-primary", InstanceID: f.instance, PrimaryIP: netip.MustParseAddr("198.18.0.11"), Tags: map[string]string{}}
	return f
}

func apiError(code, format string, args ...any) error {
	return &smithy.GenericAPIError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// enter counts a call, waits at its gate and returns its injected failure.
func (f *fakeEC2) enter(ctx context.Context, op string) error {
	f.mu.Lock()
	f.calls[op]++
	g := f.gate[op]
	code := f.fail[op]
	f.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if code != "" {
		return apiError(code, "injected failure of %s", op)
	}
	return nil
}

func (f *fakeEC2) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeEC2) setFail(op, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if code == "" {
		delete(f.fail, op)
	} else {
		f.fail[op] = code
	}
}

func (f *fakeEC2) hold(op string) func() {
	ch := make(chan struct{})
	f.mu.Lock()
	f.gate[op] = ch
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.gate, op)
		f.mu.Unlock()
		close(ch)
	}
}

func (f *fakeEC2) newIPLocked() netip.Addr {
	ip := f.nextIP
	f.nextIP = f.nextIP.Next()
	return ip
}

func (f *fakeEC2) copyLocked(e *cloud.ENI) cloud.ENI {
	c := *e
	c.Secondary = slices.Clone(e.Secondary)
	sort.Slice(c.Secondary, func(i, j int) bool { return c.Secondary[i].Less(c.Secondary[j]) })
	return c
}

// attached returns the instance's ENIs.
func (f *fakeEC2) attached() []cloud.ENI {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cloud.ENI
	for _, e := range f.enis {
		if e.InstanceID == f.instance {
			out = append(out, f.copyLocked(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceNumber < out[j].DeviceNumber })
	return out
}

// unassignBehindTheBack removes an address as another tool could.
func (f *fakeEC2) unassignBehindTheBack(ip netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.enis {
		e.Secondary = slices.DeleteFunc(e.Secondary, func(x netip.Addr) bool { return x == ip })
	}
}

func (f *fakeEC2) InstanceTypeLimits(ctx context.Context, _ string) (pool.Limits, error) {
	if err := f.enter(ctx, "DescribeInstanceTypes"); err != nil {
		return pool.Limits{}, err
	}
	return f.limits, nil
}

func (f *fakeEC2) InstanceENIs(ctx context.Context, _ string) ([]cloud.ENI, error) {
	if err := f.enter(ctx, "DescribeNetworkInterfaces"); err != nil {
		return nil, err
	}
	return f.attached(), nil
}

func (f *fakeEC2) DescribeENI(ctx context.Context, id string) (cloud.ENI, error) {
	if err := f.enter(ctx, "DescribeNetworkInterfaces"); err != nil {
		return cloud.ENI{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.enis[id]
	if !ok {
		return cloud.ENI{}, apiError(cloud.CodeENINotFound, "The networkInterface ID '%s' does not exist", id)
	}
	return f.copyLocked(e), nil
}

func (f *fakeEC2) LeakedENIs(ctx context.Context, id string) ([]cloud.ENI, error) {
	if err := f.enter(ctx, "DescribeNetworkInterfaces"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cloud.ENI
	for _, e := range f.enis {
		if e.Status == "available" && e.Tags[cloud.TagInstanceID] == id {
			out = append(out, f.copyLocked(e))
		}
	}
	return out, nil
}

func (f *fakeEC2) CreateENI(ctx context.Context, in cloud.CreateENIInput) (cloud.ENI, error) {
	if err := f.enter(ctx, "CreateNetworkInterface"); err != nil {
		return cloud.ENI{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.SecondaryIPs > f.limits.SecondaryPerENI() {
		return cloud.ENI{}, apiError(cloud.CodeIPLimitExceeded, "too many addresses")
	}
	f.n++
	e := &cloud.ENI{ID: fmt.Sprintf("eni-%d", f.n), MAC: fmt.Sprintf("02:00:00:00:01:%02x", f.n), SubnetID: in.SubnetID,
		Description: in.Description, Status: "available", PrimaryIP: f.newIPLocked(), Tags: in.Tags}
	for range in.SecondaryIPs {
		e.Secondary = append(e.Secondary, f.newIPLocked())
	}
	f.enis[e.ID] = e
	return f.copyLocked(e), nil
}

func (f *fakeEC2) AttachENI(ctx context.Context, instanceID, eniID string, idx int) (string, error) {
	if err := f.enter(ctx, "AttachNetworkInterface"); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.enis[eniID]
	if !ok {
		return "", apiError(cloud.CodeENINotFound, "The networkInterface ID '%s' does not exist", eniID)
	}
	n := 0
	for _, x := range f.enis {
		if x.InstanceID == instanceID {
			n++
			if x.DeviceNumber == idx {
				return "", apiError("InvalidParameterValue", "device index %d is in use", idx)
			}
		}
	}
	if n >= f.limits.ENIs {
		return "", apiError(cloud.CodeAttachmentLimit, "Interface count %d exceeds the limit for the instance type", n+1)
	}
	e.InstanceID, e.DeviceNumber, e.AttachmentID, e.Status = instanceID, idx, "eni-attach-"+eniID[4:], "in-use"
	return e.AttachmentID, nil
}

func (f *fakeEC2) SetDeleteOnTermination(ctx context.Context, _, _ string) error {
	if err := f.enter(ctx, "ModifyNetworkInterfaceAttribute"); err != nil {
		return err
	}
	if f.noModify {
		return apiError(cloud.CodeInvalidAction, "The action ModifyNetworkInterfaceAttribute is not valid for this web service.")
	}
	return nil
}

func (f *fakeEC2) AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error) {
	if err := f.enter(ctx, "AssignPrivateIpAddresses"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.enis[eniID]
	if !ok {
		return nil, apiError(cloud.CodeENINotFound, "The networkInterface ID '%s' does not exist", eniID)
	}
	if len(e.Secondary)+n > f.limits.SecondaryPerENI() {
		return nil, apiError(cloud.CodeIPLimitExceeded, "Number of private addresses will exceed limit.")
	}
	var out []netip.Addr
	for range n {
		ip := f.newIPLocked()
		e.Secondary = append(e.Secondary, ip)
		out = append(out, ip)
	}
	return out, nil
}

func (f *fakeEC2) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	if err := f.enter(ctx, "UnassignPrivateIpAddresses"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.enis[eniID]
	if !ok {
		return apiError(cloud.CodeENINotFound, "The networkInterface ID '%s' does not exist", eniID)
	}
	for _, ip := range ips {
		if !slices.Contains(e.Secondary, ip) {
			return apiError("InvalidParameterValue", "%s is not assigned to %s", ip, eniID)
		}
	}
	e.Secondary = slices.DeleteFunc(e.Secondary, func(x netip.Addr) bool { return slices.Contains(ips, x) })
	return nil
}

func (f *fakeEC2) DetachENI(ctx context.Context, attachmentID string) error {
	if err := f.enter(ctx, "DetachNetworkInterface"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.enis {
		if e.AttachmentID == attachmentID {
			if e.DeviceNumber == 0 {
				return apiError("OperationNotPermitted", "The network interface at device index 0 cannot be detached.")
			}
			e.InstanceID, e.AttachmentID, e.DeviceNumber, e.Status = "", "", 0, "available"
			return nil
		}
	}
	return apiError(cloud.CodeAttachmentNotFound, "The attachment ID '%s' does not exist", attachmentID)
}

func (f *fakeEC2) DeleteENI(ctx context.Context, eniID string) error {
	if err := f.enter(ctx, "DeleteNetworkInterface"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.enis[eniID]
	if !ok {
		return apiError(cloud.CodeENINotFound, "The networkInterface ID '%s' does not exist", eniID)
	}
	if e.InstanceID != "" {
		return apiError("InvalidNetworkInterface.InUse", "Interface %s is currently in use.", eniID)
	}
	delete(f.enis, eniID)
	return nil
}

// fakeMetadata answers IMDS from the fake EC2's state.
type fakeMetadata struct{ ec2 *fakeEC2 }

func (m fakeMetadata) Instance(context.Context) (cloud.InstanceMetadata, error) {
	return cloud.InstanceMetadata{
		ID: m.ec2.instance, Type: "t3.test", Region: "us-west-2", AvailabilityZone: "us-west-2a",
		PrimaryMAC: "02:00:00:00:00:00", PrimaryIP: netip.MustParseAddr("198.18.0.11"), PrimaryENIID: "eni-primary",
		VPCID: "vpc-1", SubnetID: "subnet-1", SubnetCIDR: m.ec2.subnet, SecurityGroupIDs: []string{"sg-1"},
		VPCCIDRs: []netip.Prefix{m.ec2.subnet},
	}, nil
}

func (m fakeMetadata) ENIs(context.Context) ([]cloud.MetadataENI, error) {
	var out []cloud.MetadataENI
	for _, e := range m.ec2.attached() {
		out = append(out, cloud.MetadataENI{MAC: e.MAC, ID: e.ID, DeviceNumber: e.DeviceNumber, IPs: append([]netip.Addr{e.PrimaryIP}, e.Secondary...), SubnetCIDR: m.ec2.subnet})
	}
	return out, nil
}

// fakeHost records which ENIs are set up.
type fakeHost struct {
	mu    sync.Mutex
	setup map[string]datastore.ENI
	fail  error
}

func (h *fakeHost) SetupENI(_ context.Context, e datastore.ENI) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return h.fail
	}
	if h.setup == nil {
		h.setup = map[string]datastore.ENI{}
	}
	h.setup[e.ID] = e
	return nil
}

func (h *fakeHost) TeardownENI(_ context.Context, e datastore.ENI) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.setup, e.ID)
	return nil
}

func (h *fakeHost) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id := range h.setup {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
