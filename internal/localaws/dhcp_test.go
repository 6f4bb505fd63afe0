package localaws

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

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
			e, c, _ := eniFleet(t, "198.18.0.0/24")
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
			md := imds.New(imds.Options{Endpoint: srv.URL})
			get := func(path string) string {
				t.Helper()
				out, err := md.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
				if err != nil {
					t.Fatalf("GetMetadata(%s): %v", path, err)
				}
				defer func() { _ = out.Content.Close() }()
				b, _ := io.ReadAll(out.Content)
				return string(b)
			}
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

// Other VPCs keep their own options; restoring the default drops the domain.
func TestSetDHCPDomainName(t *testing.T) {
	e := NewEC2(testAccount)
	if err := e.SetDHCPDomainName("vpc-1", "corp.example"); err != nil {
		t.Fatal(err)
	}
	if got := e.DHCPDomainName("vpc-1"); got != "corp.example" {
		t.Errorf("vpc-1 domain = %q", got)
	}
	if got := e.DHCPDomainName("vpc-2"); got != "" {
		t.Errorf("vpc-2 domain = %q, want the default options", got)
	}
	if err := e.SetDHCPDomainName("vpc-1", ""); err != nil {
		t.Fatal(err)
	}
	if got := e.DHCPDomainName("vpc-1"); got != "" {
		t.Errorf("vpc-1 domain after reset = %q", got)
	}
	if err := e.SetDHCPDomainName("vpc-1", "Corp_Example."); err == nil {
		t.Error("an invalid domain was accepted")
	}
}

func TestValidateDHCPDomainName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"corp.example", true},
		{"foo", true},
		{"eu-west-1.compute.internal", true},
		{"a-b.c-d.example", true},
		{"", false},
		{"corp.example.", false},
		{"Corp.Example", false},
		{"corp_example.com", false},
		{"corp.example other.example", false},
		{"-corp.example", false},
		{"corp..example", false},
	}
	for _, tt := range tests {
		err := ValidateDHCPDomainName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateDHCPDomainName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// DescribeDhcpOptions, through the real SDK, shows each VPC's custom options set; IDs,
// filters and errors behave as EC2's.
func TestDescribeDhcpOptionsWithTheAWSClient(t *testing.T) {
	ctx := t.Context()
	e := NewEC2(testAccount)
	c := newEC2Client(t, e)
	out, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DhcpOptions) != 0 {
		t.Fatalf("options sets without a custom domain = %+v", out.DhcpOptions)
	}
	if err := e.SetDHCPDomainName("vpc-1", "corp.example"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetDHCPDomainName("vpc-2", "other.example"); err != nil {
		t.Fatal(err)
	}
	out, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{Filters: []ec2types.Filter{
		{Name: aws.String("key"), Values: []string{"domain-name"}}, {Name: aws.String("value"), Values: []string{"corp.*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DhcpOptions) != 1 {
		t.Fatalf("options sets = %+v, want vpc-1's", out.DhcpOptions)
	}
	o := out.DhcpOptions[0]
	id := aws.ToString(o.DhcpOptionsId)
	if !strings.HasPrefix(id, "dopt-") || len(id) != 22 || aws.ToString(o.OwnerId) != testAccount {
		t.Errorf("options set %s owned by %s", id, aws.ToString(o.OwnerId))
	}
	got := map[string]string{}
	for _, cfg := range o.DhcpConfigurations {
		for _, v := range cfg.Values {
			got[aws.ToString(cfg.Key)] += aws.ToString(v.Value)
		}
	}
	if got["domain-name"] != "corp.example" || got["domain-name-servers"] != "AmazonProvidedDNS" || len(got) != 2 {
		t.Errorf("configurations = %v", got)
	}
	byID, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{id}})
	if err != nil || len(byID.DhcpOptions) != 1 || aws.ToString(byID.DhcpOptions[0].DhcpOptionsId) != id {
		t.Errorf("by ID %s: %+v, %v", id, byID, err)
	}
	all, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{})
	if err != nil || len(all.DhcpOptions) != 2 {
		t.Errorf("all options sets: %+v, %v", all, err)
	}
	_, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{"dopt-00000000000000000"}})
	if code, status := apiCode(t, err); code != "InvalidDhcpOptionID.NotFound" || status != 400 {
		t.Errorf("unknown ID: %s %d", code, status)
	}
	_, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-1"}}}})
	if code, _ := apiCode(t, err); code != "InvalidParameterValue" {
		t.Errorf("unknown filter: %s", code)
	}
}
