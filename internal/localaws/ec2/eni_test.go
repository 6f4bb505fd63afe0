package ec2

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

const testSubnet = "subnet-00000000000000001"

// recordingHooks notes every hook call, and fails the ones named in failOn.
type recordingHooks struct {
	mu     sync.Mutex
	calls  []string
	failOn string
}

func (h *recordingHooks) note(kind string, nic NetworkInterface, addrs []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	call := fmt.Sprintf("%s %s dev%d %s", kind, nic.ID, nic.Attachment.DeviceIndex, strings.Join(addrs, ","))
	h.calls = append(h.calls, call)
	if h.failOn == kind {
		return errors.New("injected hook failure")
	}
	return nil
}

func (h *recordingHooks) InterfaceAttached(_ context.Context, nic NetworkInterface) error {
	return h.note("attached", nic, nic.PrivateIPv4s)
}

func (h *recordingHooks) InterfaceDetached(_ context.Context, nic NetworkInterface) error {
	return h.note("detached", nic, nic.PrivateIPv4s)
}

func (h *recordingHooks) AddressesAssigned(_ context.Context, nic NetworkInterface, addrs []string) error {
	return h.note("assigned", nic, addrs)
}

func (h *recordingHooks) AddressesUnassigned(_ context.Context, nic NetworkInterface, addrs []string) error {
	return h.note("unassigned", nic, addrs)
}

func (h *recordingHooks) taken() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.calls
	h.calls = nil
	return out
}

// eniFleet is a VPC with one /16 subnet and two m5.large instances at .0.11 and .0.12.
func eniFleet(t *testing.T, cidr string) (*EC2, *ec2.Client, *recordingHooks) {
	t.Helper()
	e := New(awstest.Account)
	if err := e.AddSubnet(Subnet{ID: testSubnet, VPCID: "vpc-1", AvailabilityZone: "us-west-2b", CIDR: netip.MustParsePrefix(cidr)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{11, 12} {
		inst := ec2Instance(n, "nodes")
		inst.SubnetID = testSubnet
		a := netip.MustParsePrefix(cidr).Addr()
		for range n {
			a = a.Next()
		}
		inst.PrivateIPv4 = a.String()
		if err := e.Launch(inst); err != nil {
			t.Fatal(err)
		}
	}
	h := &recordingHooks{}
	e.SetNetworkHooks(h, nil)
	return e, newEC2Client(t, e), h
}

func mustENIs(t *testing.T, c *ec2.Client, in *ec2.DescribeNetworkInterfacesInput) []ec2types.NetworkInterface {
	t.Helper()
	out, err := c.DescribeNetworkInterfaces(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out.NetworkInterfaces
}

func addrsOf(n ec2types.NetworkInterface) []string {
	var out []string
	for _, a := range n.PrivateIpAddresses {
		out = append(out, aws.ToString(a.PrivateIpAddress))
	}
	return out
}

func byInstance(id string) *ec2.DescribeNetworkInterfacesInput {
	return &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{id}}}}
}

// An instance has its primary interface from launch; ipamd's sequence (create, attach,
// mark delete-on-termination, assign, unassign, detach, delete) works through the SDK,
// and m5.large's limits (3 interfaces of 10 addresses) hold.
func TestENILifecycleWithTheAWSClient(t *testing.T) {
	e, c, hooks := eniFleet(t, "198.18.0.0/16")
	ctx := t.Context()
	inst := ec2Instance(11, "").ID

	primary := mustENIs(t, c, byInstance(inst))
	if len(primary) != 1 {
		t.Fatalf("want the primary interface, got %d", len(primary))
	}
	p := primary[0]
	if aws.ToString(p.NetworkInterfaceId) != "eni-0000000000000000b" ||
		aws.ToString(p.MacAddress) != "0e:00:c6:12:00:0b" || aws.ToString(p.PrivateIpAddress) != "198.18.0.11" ||
		aws.ToInt32(p.Attachment.DeviceIndex) != 0 || !aws.ToBool(p.Attachment.DeleteOnTermination) ||
		p.Status != ec2types.NetworkInterfaceStatusInUse || aws.ToString(p.SubnetId) != testSubnet ||
		len(p.Groups) != 1 || aws.ToString(p.Groups[0].GroupId) != DefaultSecurityGroupID {
		t.Fatalf("primary interface: %+v", p)
	}

	// Fill the primary interface: 9 secondary addresses, then no more.
	as, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: p.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(9)})
	if err != nil {
		t.Fatal(err)
	}
	if len(as.AssignedPrivateIpAddresses) != 9 || aws.ToString(as.NetworkInterfaceId) != aws.ToString(p.NetworkInterfaceId) {
		t.Fatalf("assigned %+v", as)
	}
	for _, a := range as.AssignedPrivateIpAddresses {
		addr := netip.MustParseAddr(aws.ToString(a.PrivateIpAddress))
		if !netip.MustParsePrefix("198.18.1.0/24").Contains(addr) {
			t.Errorf("secondary address %s is not taken past the instances' first /24", addr)
		}
	}
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: p.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if code, status := awstest.APICode(t, err); code != "PrivateIpAddressLimitExceeded" || status != 400 {
		t.Fatalf("11th address on m5.large: %v", err)
	}
	if got := hooks.taken(); len(got) != 1 || !strings.HasPrefix(got[0], "assigned "+aws.ToString(p.NetworkInterfaceId)+" dev0 ") {
		t.Errorf("hooks: %q", got)
	}

	// Two more interfaces, created the way ipamd does.
	var attachments []string
	for dev := 1; dev <= 2; dev++ {
		cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId: aws.String(testSubnet), Description: aws.String("aws-K8S-" + inst), Groups: []string{DefaultSecurityGroupID},
			SecondaryPrivateIpAddressCount: aws.Int32(9),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: []ec2types.Tag{
				{Key: aws.String("node.k8s.amazonaws.com/instance_id"), Value: aws.String(inst)}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		n := cr.NetworkInterface
		if n.Status != ec2types.NetworkInterfaceStatusAvailable || len(n.PrivateIpAddresses) != 10 || !aws.ToBool(n.PrivateIpAddresses[0].Primary) ||
			len(n.TagSet) != 1 || aws.ToString(n.Description) != "aws-K8S-"+inst || n.Attachment != nil || aws.ToString(cr.ClientToken) == "" {
			t.Fatalf("created %+v", n)
		}
		at, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst), NetworkInterfaceId: n.NetworkInterfaceId, DeviceIndex: aws.Int32(int32(dev))})
		if err != nil {
			t.Fatal(err)
		}
		attachments = append(attachments, aws.ToString(at.AttachmentId))
		if _, err := c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: n.NetworkInterfaceId,
			Attachment: &ec2types.NetworkInterfaceAttachmentChanges{AttachmentId: at.AttachmentId, DeleteOnTermination: aws.Bool(true)}}); err != nil {
			t.Fatal(err)
		}
		got := hooks.taken()
		if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("attached %s dev%d ", aws.ToString(n.NetworkInterfaceId), dev)) || strings.Count(got[0], ",") != 9 {
			t.Errorf("hooks: %q", got)
		}
	}
	all := mustENIs(t, c, byInstance(inst))
	slices.SortFunc(all, func(a, b ec2types.NetworkInterface) int {
		return int(aws.ToInt32(a.Attachment.DeviceIndex) - aws.ToInt32(b.Attachment.DeviceIndex))
	})
	if len(all) != 3 {
		t.Fatalf("want 3 interfaces, got %d", len(all))
	}
	di, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	nics := di.Reservations[0].Instances[0].NetworkInterfaces
	if len(nics) != 3 {
		t.Fatalf("DescribeInstances shows %d interfaces", len(nics))
	}
	for i, n := range nics {
		if aws.ToInt32(n.Attachment.DeviceIndex) != int32(i) || len(n.PrivateIpAddresses) != 10 {
			t.Errorf("interface %d: %+v", i, n)
		}
	}

	// A fourth interface exceeds m5.large's three.
	cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet)})
	if err != nil {
		t.Fatal(err)
	}
	fourth := cr.NetworkInterface.NetworkInterfaceId
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst), NetworkInterfaceId: fourth, DeviceIndex: aws.Int32(3)})
	if code, _ := awstest.APICode(t, err); code != "AttachmentLimitExceeded" || !strings.Contains(err.Error(), "m5.large") {
		t.Fatalf("4th interface: %v", err)
	}
	// It can go to the other instance, at a device index in use there.
	other := ec2Instance(12, "").ID
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(other), NetworkInterfaceId: fourth, DeviceIndex: aws.Int32(0)})
	if code, _ := awstest.APICode(t, err); code != "InvalidParameterValue" {
		t.Fatalf("device index 0 in use: %v", err)
	}

	// Unassign, and the address is free (and counted) again.
	sec := all[1]
	freed := addrsOf(sec)[9]
	subnetsBefore, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{testSubnet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: sec.NetworkInterfaceId, PrivateIpAddresses: []string{freed}}); err != nil {
		t.Fatal(err)
	}
	subnetsAfter, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{testSubnet}})
	if err != nil {
		t.Fatal(err)
	}
	if d := aws.ToInt32(subnetsAfter.Subnets[0].AvailableIpAddressCount) - aws.ToInt32(subnetsBefore.Subnets[0].AvailableIpAddressCount); d != 1 {
		t.Errorf("available addresses changed by %d, want 1", d)
	}
	got := mustENIs(t, c, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{aws.ToString(sec.NetworkInterfaceId)}})
	if slices.Contains(addrsOf(got[0]), freed) || len(addrsOf(got[0])) != 9 {
		t.Errorf("after unassign: %v", addrsOf(got[0]))
	}
	// Explicitly, it can be assigned back.
	if _, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: sec.NetworkInterfaceId, PrivateIpAddresses: []string{freed}}); err != nil {
		t.Fatal(err)
	}
	if got := hooks.taken(); !slices.Equal(got, []string{
		fmt.Sprintf("unassigned %s dev1 %s", aws.ToString(sec.NetworkInterfaceId), freed),
		fmt.Sprintf("assigned %s dev1 %s", aws.ToString(sec.NetworkInterfaceId), freed),
	}) {
		t.Errorf("hooks: %q", got)
	}

	// Detach and delete, as ipamd frees an interface.
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: sec.NetworkInterfaceId}); err == nil {
		t.Fatal("deleted an attached interface")
	} else if code, _ := awstest.APICode(t, err); code != "InvalidNetworkInterface.InUse" {
		t.Fatal(err)
	}
	if _, err := c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachments[0])}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: sec.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	if got := hooks.taken(); len(got) != 1 || !strings.HasPrefix(got[0], "detached "+aws.ToString(sec.NetworkInterfaceId)+" dev1 ") {
		t.Errorf("hooks: %q", got)
	}

	// Terminating the instance deletes its delete-on-termination interfaces.
	if err := e.SetState(inst, "terminated"); err != nil {
		t.Fatal(err)
	}
	if got := hooks.taken(); len(got) != 2 || !strings.Contains(got[0], " dev0 ") || !strings.Contains(got[1], " dev2 ") {
		t.Errorf("hooks on terminate: %q", got)
	}
	left := e.NetworkInterfaces()
	if len(left) != 2 { // the other instance's primary and the unattached fourth
		t.Errorf("interfaces left: %+v", left)
	}
}

func TestENIErrors(t *testing.T) {
	_, c, _ := eniFleet(t, "198.18.0.0/16")
	ctx := t.Context()
	inst := ec2Instance(11, "").ID
	primary := mustENIs(t, c, byInstance(inst))[0]
	tests := []struct {
		name   string
		call   func() error
		code   string
		status int
		msg    string
	}{
		{"unknown interface", func() error {
			_, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-00000088"}})
			return err
		}, "InvalidNetworkInterfaceID.NotFound", 400, "The networkInterface ID 'eni-00000088' does not exist"},
		{"malformed interface ID", func() error {
			_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("nic-1")})
			return err
		}, "InvalidNetworkInterfaceId.Malformed", 400, "nic-1"},
		{"max results with IDs", func() error {
			_, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-00000088"}, MaxResults: aws.Int32(5)})
			return err
		}, "InvalidParameterCombination", 400, "MaxResults"},
		{"unknown filter", func() error {
			_, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}})
			return err
		}, "InvalidParameterValue", 400, "'colour'"},
		{"detach the primary interface", func() error {
			_, err := c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: primary.Attachment.AttachmentId})
			return err
		}, "OperationNotPermitted", 400, "device index 0"},
		{"unknown attachment", func() error {
			_, err := c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String("eni-attach-00000001")})
			return err
		}, "InvalidAttachmentID.NotFound", 400, "eni-attach-00000001"},
		{"count and addresses", func() error {
			_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId,
				SecondaryPrivateIpAddressCount: aws.Int32(1), PrivateIpAddresses: []string{"198.18.9.9"}})
			return err
		}, "InvalidParameterCombination", 400, "cannot be used together"},
		{"neither count nor addresses", func() error {
			_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId})
			return err
		}, "MissingParameter", 400, ""},
		{"address of another instance", func() error {
			_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId, PrivateIpAddresses: []string{"198.18.0.12"}})
			return err
		}, "InvalidIPAddress.InUse", 400, "198.18.0.12"},
		{"reserved address", func() error {
			_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId, PrivateIpAddresses: []string{"198.18.0.1"}})
			return err
		}, "InvalidParameterValue", 400, "range"},
		{"unassign the primary address", func() error {
			_, err := c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId, PrivateIpAddresses: []string{"198.18.0.11"}})
			return err
		}, "InvalidParameterValue", 400, "primary"},
		{"unassign an address not held", func() error {
			_, err := c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId, PrivateIpAddresses: []string{"198.18.7.7"}})
			return err
		}, "InvalidParameterValue", 400, "not assigned"},
		{"unknown subnet", func() error {
			_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0000000f")})
			return err
		}, "InvalidSubnetID.NotFound", 400, "subnet-0000000f"},
		{"unknown security group", func() error {
			_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), Groups: []string{"sg-0000000f"}})
			return err
		}, "InvalidSecurityGroupID.NotFound", 400, "sg-0000000f"},
		{"attach to an unknown instance", func() error {
			_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String("i-0000000f"), NetworkInterfaceId: primary.NetworkInterfaceId, DeviceIndex: aws.Int32(1)})
			return err
		}, "InvalidInstanceID.NotFound", 400, "i-0000000f"},
		{"attach an attached interface", func() error {
			_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(ec2Instance(12, "").ID), NetworkInterfaceId: primary.NetworkInterfaceId, DeviceIndex: aws.Int32(1)})
			return err
		}, "InvalidNetworkInterface.InUse", 400, "in use"},
		{"unknown instance type", func() error {
			_, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.huge"}})
			return err
		}, "InvalidInstanceType", 400, "m5.huge"},
		{"dry run", func() error {
			_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), DryRun: aws.Bool(true)})
			return err
		}, "DryRunOperation", 412, ""},
		{"unknown subnet described", func() error {
			_, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0000000f"}})
			return err
		}, "InvalidSubnetID.NotFound", 400, "subnet-0000000f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			code, status := awstest.APICode(t, err)
			if code != tt.code || status != tt.status || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %s %d (%v), want %s %d containing %q", code, status, err, tt.code, tt.status, tt.msg)
			}
		})
	}
}

// A small subnet runs out of addresses with AWS's error.
func TestENISubnetExhaustion(t *testing.T) {
	_, c, _ := eniFleet(t, "198.18.0.0/27") // 32 addresses: 5 reserved, 2 instances, 25 free
	ctx := t.Context()
	cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), SecondaryPrivateIpAddressCount: aws.Int32(20)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrsOf(*cr.NetworkInterface) {
		if a == "198.18.0.11" || a == "198.18.0.12" || a < "198.18.0.4" && len(a) == len("198.18.0.4") {
			t.Errorf("address %s given out twice or reserved", a)
		}
	}
	sn, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-1"}},
		{Name: aws.String("availability-zone"), Values: []string{"us-west-2b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sn.Subnets) != 1 || aws.ToInt32(sn.Subnets[0].AvailableIpAddressCount) != 4 || aws.ToString(sn.Subnets[0].CidrBlock) != "198.18.0.0/27" {
		t.Fatalf("subnets: %+v", sn.Subnets)
	}
	_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: cr.NetworkInterface.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(5)})
	if code, _ := awstest.APICode(t, err); code != "InsufficientFreeAddressesInSubnet" {
		t.Fatalf("want InsufficientFreeAddressesInSubnet, got %v", err)
	}
}

// A failing router undoes the change and fails the call with a retryable error.
func TestENIHookFailureUndoes(t *testing.T) {
	e, c, hooks := eniFleet(t, "198.18.0.0/16")
	ctx := t.Context()
	inst := ec2Instance(11, "").ID
	primary := mustENIs(t, c, byInstance(inst))[0]
	hooks.failOn = "assigned"
	_, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: primary.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if code, status := awstest.APICode(t, err); code != "InternalError" || status != 500 {
		t.Fatalf("got %v", err)
	}
	if n := e.InstanceNetworkInterfaces(inst)[0]; len(n.PrivateIPv4s) != 1 {
		t.Errorf("addresses kept after a failed hook: %v", n.PrivateIPv4s)
	}
	hooks.failOn = "attached"
	cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst), NetworkInterfaceId: cr.NetworkInterface.NetworkInterfaceId, DeviceIndex: aws.Int32(1)})
	if code, _ := awstest.APICode(t, err); code != "InternalError" {
		t.Fatalf("got %v", err)
	}
	if len(e.InstanceNetworkInterfaces(inst)) != 1 {
		t.Error("interface left attached after a failed hook")
	}
}

func TestENIClientTokenAndPagination(t *testing.T) {
	_, c, _ := eniFleet(t, "198.18.0.0/16")
	ctx := t.Context()
	in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), ClientToken: aws.String("tok-1")}
	a, err := c.CreateNetworkInterface(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateNetworkInterface(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(a.NetworkInterface.NetworkInterfaceId) != aws.ToString(b.NetworkInterface.NetworkInterfaceId) {
		t.Error("the same client token created two interfaces")
	}
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), ClientToken: aws.String("tok-1"), Description: aws.String("x")})
	if code, _ := awstest.APICode(t, err); code != "IdempotentParameterMismatch" {
		t.Fatalf("got %v", err)
	}
	for range 9 {
		if _, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet)}); err != nil {
			t.Fatal(err)
		}
	}
	pages := ec2.NewDescribeNetworkInterfacesPaginator(c, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5),
		Filters: []ec2types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}})
	var ids []string
	n := 0
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, x := range out.NetworkInterfaces {
			ids = append(ids, aws.ToString(x.NetworkInterfaceId))
		}
	}
	if len(ids) != 10 || n != 2 || !slices.IsSorted(ids) {
		t.Errorf("%d pages of %v", n, ids)
	}
}

func TestDescribeInstanceTypesWithTheAWSClient(t *testing.T) {
	_, c, _ := eniFleet(t, "198.18.0.0/16")
	ctx := t.Context()
	tests := []struct {
		typ       string
		enis, ips int32
	}{{"m5.large", 3, 10}, {"t3.small", 3, 4}, {"m5.24xlarge", 15, 50}}
	for _, tt := range tests {
		out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(tt.typ)}})
		if err != nil {
			t.Fatal(err)
		}
		ni := out.InstanceTypes[0].NetworkInfo
		if len(out.InstanceTypes) != 1 || aws.ToInt32(ni.MaximumNetworkInterfaces) != tt.enis || aws.ToInt32(ni.Ipv4AddressesPerInterface) != tt.ips ||
			aws.ToInt32(ni.MaximumNetworkCards) != 1 || aws.ToInt32(ni.NetworkCards[0].MaximumNetworkInterfaces) != tt.enis ||
			out.InstanceTypes[0].Hypervisor != ec2types.InstanceTypeHypervisorNitro {
			t.Errorf("%s: %+v", tt.typ, ni)
		}
	}
	total := 0
	pages := ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += len(out.InstanceTypes)
	}
	if total != instancetypes.Len() {
		t.Errorf("listed %d instance types, the table has %d", total, instancetypes.Len())
	}
}
