package localaws

// The tests of this file cross services: what one shows of another's state.

import (
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

const testSubnet = "subnet-00000000000000001"

func ec2Instance(n int, role string) Instance {
	return Instance{
		ID: fmt.Sprintf("i-%017x", n), Type: "m5.large", AvailabilityZone: "us-west-2b",
		PrivateIPv4: fmt.Sprintf("198.18.0.%d", n), Role: role, SubnetID: "subnet-1", VPCID: "vpc-1",
	}
}

// vpc is a VPC with one subnet of cidr and two m5.large instances of role nodes at
// offsets 11 and 12, and an EC2 client of it.
func vpc(t *testing.T, cidr string) (*EC2, *ec2.Client) {
	t.Helper()
	e := NewEC2(awstest.Account)
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
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, ec2.NewFromConfig(awstest.SDKConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// metadata reads instance metadata paths through the SDK's IMDS client.
func metadata(t *testing.T, url string) func(path string) string {
	md := imds.New(imds.Options{Endpoint: url})
	return func(path string) string {
		t.Helper()
		out, err := md.GetMetadata(t.Context(), &imds.GetMetadataInput{Path: path})
		if err != nil {
			t.Fatalf("GetMetadata(%s): %v", path, err)
		}
		defer func() { _ = out.Content.Close() }()
		b, _ := io.ReadAll(out.Content)
		return string(b)
	}
}

func addrsOf(n ec2types.NetworkInterface) []string {
	var out []string
	for _, a := range n.PrivateIpAddresses {
		out = append(out, aws.ToString(a.PrivateIpAddress))
	}
	return out
}

func TestIAMGetInstanceProfileWithTheAWSClient(t *testing.T) {
	e, c := vpc(t, "198.18.0.0/16")
	i := NewIAM(awstest.Account, e)
	if err := i.AddInstanceProfile("spare", "spare-role"); err != nil {
		t.Fatal(err)
	}
	if err := i.AddInstanceProfile("empty", ""); err != nil {
		t.Fatal(err)
	}
	if err := i.AddInstanceProfile("bad/name", ""); err == nil {
		t.Error("added a profile with an invalid name")
	}
	srv := httptest.NewServer(i)
	t.Cleanup(srv.Close)
	client := iam.NewFromConfig(awstest.SDKConfig(), func(o *iam.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	out, err := client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("nodes")})
	if err != nil {
		t.Fatal(err)
	}
	p := out.InstanceProfile
	if aws.ToString(p.InstanceProfileName) != "nodes" || aws.ToString(p.Arn) != "arn:aws:iam::111122223333:instance-profile/nodes" ||
		aws.ToString(p.Path) != "/" || p.CreateDate == nil || p.CreateDate.Year() != 2026 {
		t.Errorf("profile = %+v", p)
	}
	// The profile ID is the one DescribeInstances reports.
	desc, err := c.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{ec2Instance(11, "").ID}})
	if err != nil {
		t.Fatal(err)
	}
	if want := aws.ToString(desc.Reservations[0].Instances[0].IamInstanceProfile.Id); aws.ToString(p.InstanceProfileId) != want {
		t.Errorf("profile ID = %q, DescribeInstances says %q", aws.ToString(p.InstanceProfileId), want)
	}
	if len(p.Roles) != 1 {
		t.Fatalf("roles = %+v", p.Roles)
	}
	r := p.Roles[0]
	nodesID, _ := i.RoleID("nodes")
	if aws.ToString(r.RoleName) != "nodes" || aws.ToString(r.RoleId) != nodesID || !strings.HasPrefix(nodesID, "AROA") || aws.ToString(r.Arn) != "arn:aws:iam::111122223333:role/nodes" ||
		aws.ToString(r.Path) != "/" || !strings.Contains(aws.ToString(r.AssumeRolePolicyDocument), "ec2.amazonaws.com") || r.CreateDate == nil {
		t.Errorf("role = %+v", r)
	}
	spare, err := client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("spare")})
	if err != nil || len(spare.InstanceProfile.Roles) != 1 || aws.ToString(spare.InstanceProfile.Roles[0].RoleName) != "spare-role" {
		t.Errorf("explicit profile: %+v, %v", spare, err)
	}
	empty, err := client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("empty")})
	if err != nil || len(empty.InstanceProfile.Roles) != 0 {
		t.Errorf("profile without a role: %+v, %v", empty, err)
	}
	_, err = client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("ghosts")})
	var nse *iamtypes.NoSuchEntityException
	if code, status := awstest.APICode(t, err); !errors.As(err, &nse) || code != "NoSuchEntity" || status != 404 || !strings.Contains(err.Error(), "Instance Profile ghosts cannot be found.") {
		t.Errorf("unknown profile: %s %d %v", code, status, err)
	}
	_, err = client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("bad name!")})
	if code, status := awstest.APICode(t, err); code != "ValidationError" || status != 400 {
		t.Errorf("invalid name: %s %d %v", code, status, err)
	}
	if n := i.Calls(); n != 5 {
		t.Errorf("calls = %d, want 5", n)
	}
}

// The instance's metadata shows its interfaces as EC2 holds them, at once.
func TestIMDSShowsLiveInterfaces(t *testing.T) {
	e, c := vpc(t, "198.18.0.0/16")
	ctx := t.Context()
	inst := ec2Instance(11, "nodes")
	inst.SubnetID, inst.PrivateIPv4, inst.VPCIPv4CIDRs = testSubnet, "198.18.0.11", []string{"198.18.0.0/16"}
	if err := InstanceDefaults(&inst); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewIMDS(inst, nil).WithEC2(e))
	defer srv.Close()
	get := metadata(t, srv.URL)
	if got := get("network/interfaces/macs"); got != "0e:00:c6:12:00:0b/" {
		t.Fatalf("macs = %q", got)
	}
	cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	n := cr.NetworkInterface
	if _, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst.ID), NetworkInterfaceId: n.NetworkInterfaceId, DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	mac := aws.ToString(n.MacAddress)
	prefix := "network/interfaces/macs/" + mac + "/"
	checks := map[string]string{
		"network/interfaces/macs":         "0e:00:c6:12:00:0b/\n" + mac + "/",
		"mac":                             "0e:00:c6:12:00:0b",
		prefix + "device-number":          "1",
		prefix + "interface-id":           aws.ToString(n.NetworkInterfaceId),
		prefix + "local-ipv4s":            strings.Join(addrsOf(*n), "\n"),
		prefix + "subnet-id":              testSubnet,
		prefix + "subnet-ipv4-cidr-block": "198.18.0.0/16",
		prefix + "vpc-ipv4-cidr-blocks":   "198.18.0.0/16",
		prefix + "security-group-ids":     DefaultSecurityGroupID,
		"network/interfaces/macs/0e:00:c6:12:00:0b/local-ipv4s": "198.18.0.11",
	}
	for path, want := range checks {
		if got := get(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	as, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: n.NetworkInterfaceId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := get(prefix+"local-ipv4s"), strings.Join(append(addrsOf(*n), aws.ToString(as.AssignedPrivateIpAddresses[0].PrivateIpAddress)), "\n"); got != want {
		t.Errorf("after assign: %q, want %q", got, want)
	}
}

// A VPC's DHCP options domain-name renames instances in their metadata only: IMDS
// local-hostname (and hostname, and each interface's local-hostname) is in the custom
// domain, while EC2 DescribeInstances keeps the private DNS name it had, through the real
// SDK clients nodeadm uses.
func TestDHCPDomainNameRenamesMetadataNotEC2(t *testing.T) {
	tests := []struct {
		name, domain  string
		wantHostname  string // IMDS local-hostname and hostname
		wantSecondary string // local-hostname of a second interface at 198.18.0.50
	}{
		{"default options", "", "ip-198-18-0-11.us-west-2.compute.internal", "ip-198-18-0-50.us-west-2.compute.internal"},
		{"custom domain", "corp.example", "ip-198-18-0-11.corp.example", "ip-198-18-0-50.corp.example"},
		{"single-label domain", "foo", "ip-198-18-0-11.foo", "ip-198-18-0-50.foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			e, c := vpc(t, "198.18.0.0/24")
			if err := e.SetDHCPDomainName("vpc-1", tt.domain); err != nil {
				t.Fatal(err)
			}
			inst := ec2Instance(11, "nodes")
			inst.SubnetID, inst.PrivateIPv4 = testSubnet, "198.18.0.11"
			if err := InstanceDefaults(&inst); err != nil {
				t.Fatal(err)
			}
			// A second interface, so that its own local-hostname shows too.
			cr, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(testSubnet), PrivateIpAddress: aws.String("198.18.0.50")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{InstanceId: aws.String(inst.ID),
				NetworkInterfaceId: cr.NetworkInterface.NetworkInterfaceId, DeviceIndex: aws.Int32(1)}); err != nil {
				t.Fatal(err)
			}

			srv := httptest.NewServer(NewIMDS(inst, nil).WithEC2(e))
			defer srv.Close()
			get := metadata(t, srv.URL)
			primary := "network/interfaces/macs/" + inst.MAC + "/local-hostname"
			secondary := "network/interfaces/macs/" + aws.ToString(cr.NetworkInterface.MacAddress) + "/local-hostname"
			for path, want := range map[string]string{"local-hostname": tt.wantHostname, "hostname": tt.wantHostname,
				primary: tt.wantHostname, secondary: tt.wantSecondary} {
				if got := get(path); got != want {
					t.Errorf("IMDS %s = %q, want %q", path, got, want)
				}
			}

			out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst.ID}})
			if err != nil {
				t.Fatal(err)
			}
			got := out.Reservations[0].Instances[0]
			if name := aws.ToString(got.PrivateDnsName); name != "ip-198-18-0-11.us-west-2.compute.internal" {
				t.Errorf("EC2 PrivateDnsName = %q, want the region's ip-198-18-0-11.us-west-2.compute.internal", name)
			}
			for _, n := range got.NetworkInterfaces {
				for _, a := range n.PrivateIpAddresses {
					if dns := aws.ToString(a.PrivateDnsName); dns != "ip-"+strings.ReplaceAll(aws.ToString(a.PrivateIpAddress), ".", "-")+".us-west-2.compute.internal" {
						t.Errorf("EC2 interface %s: PrivateDnsName %q of %s", aws.ToString(n.NetworkInterfaceId), dns, aws.ToString(a.PrivateIpAddress))
					}
				}
			}
		})
	}
}
