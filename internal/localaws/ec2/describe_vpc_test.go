package ec2

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// wantAPIError checks that err is the EC2 error code whose message contains msg.
func wantAPIError(t *testing.T, err error, code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got, _ := awstest.APICode(t, err); got != code || !strings.Contains(err.Error(), msg) {
		t.Errorf("got %s (%v), want %s containing %q", got, err, code, msg)
	}
}

// localVPC is the sandbox's network: the node range as the default VPC's one subnet,
// and an instance in it.
func localVPC(t *testing.T) *EC2 {
	t.Helper()
	e := New(awstest.Account)
	if err := e.AddSubnet(Subnet{ID: DefaultSubnetID, VPCID: DefaultVPCID, AvailabilityZone: "us-west-2a",
		CIDR: netip.MustParsePrefix("198.18.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	inst := Instance{ID: "i-00000000000000001", PrivateIPv4: "198.18.0.10", SubnetID: DefaultSubnetID, VPCID: DefaultVPCID,
		VPCIPv4CIDRs: []string{"198.18.0.0/16"}}
	if err := e.Launch(inst); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDescribeAvailabilityZonesWithTheAWSClient(t *testing.T) {
	e := New(awstest.Account)
	e.Region = "eu-west-1"
	client := newEC2Client(t, e)
	tests := []struct {
		name string
		in   ec2.DescribeAvailabilityZonesInput
		want []string
	}{
		{"all", ec2.DescribeAvailabilityZonesInput{}, []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
		{"by name", ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"eu-west-1c", "eu-west-1a"}}, []string{"eu-west-1a", "eu-west-1c"}},
		{"by ID", ec2.DescribeAvailabilityZonesInput{ZoneIds: []string{"euw1-az2"}}, []string{"eu-west-1b"}},
		{"zone-name glob", ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{filter("zone-name", "*[ab]", "*-1?")}}, []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
		{"zone-name", ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{filter("zone-name", "eu-west-1b")}}, []string{"eu-west-1b"}},
		{"state available", ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{filter("state", "available")}}, []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
		{"state impaired", ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{filter("state", "impaired")}}, nil},
		{"all zones flag", ec2.DescribeAvailabilityZonesInput{AllAvailabilityZones: aws.Bool(true), Filters: []ec2types.Filter{filter("region-name", "eu-west-1")}}, []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeAvailabilityZones(t.Context(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, z := range out.AvailabilityZones {
				got = append(got, aws.ToString(z.ZoneName))
				if z.State != ec2types.AvailabilityZoneStateAvailable || aws.ToString(z.RegionName) != "eu-west-1" ||
					aws.ToString(z.ZoneId) == "" || z.OptInStatus != ec2types.AvailabilityZoneOptInStatusOptInNotRequired {
					t.Errorf("zone %+v", z)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	_, err := client.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"eu-west-1z"}})
	wantAPIError(t, err, "InvalidParameterValue", "eu-west-1z")
	_, err = client.DescribeAvailabilityZones(t.Context(), &ec2.DescribeAvailabilityZonesInput{Filters: []ec2types.Filter{filter("colour", "red")}})
	wantAPIError(t, err, "InvalidParameterValue", "colour")
}

func TestDescribeVpcsWithTheAWSClient(t *testing.T) {
	e := localVPC(t)
	if err := e.AddSubnet(Subnet{ID: "subnet-00000000000000002", VPCID: "vpc-00000000000000002", CIDR: netip.MustParsePrefix("10.1.2.0/24")}); err != nil {
		t.Fatal(err)
	}
	if err := e.AddSubnet(Subnet{ID: "subnet-00000000000000003", VPCID: "vpc-00000000000000002", CIDR: netip.MustParsePrefix("10.1.3.0/24")}); err != nil {
		t.Fatal(err)
	}
	client := newEC2Client(t, e)
	out, err := client.DescribeVpcs(t.Context(), &ec2.DescribeVpcsInput{VpcIds: []string{DefaultVPCID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Vpcs) != 1 {
		t.Fatalf("vpcs = %+v", out.Vpcs)
	}
	v := out.Vpcs[0]
	if aws.ToString(v.VpcId) != DefaultVPCID || aws.ToString(v.CidrBlock) != "198.18.0.0/16" || v.State != ec2types.VpcStateAvailable ||
		aws.ToString(v.OwnerId) != awstest.Account || aws.ToString(v.DhcpOptionsId) != "default" || v.InstanceTenancy != ec2types.TenancyDefault ||
		len(v.CidrBlockAssociationSet) != 2 || aws.ToString(v.CidrBlockAssociationSet[0].CidrBlock) != "198.18.0.0/16" ||
		v.CidrBlockAssociationSet[0].CidrBlockState.State != ec2types.VpcCidrBlockStateCodeAssociated ||
		aws.ToString(v.CidrBlockAssociationSet[1].CidrBlock) != ZoneRange.String() {
		t.Errorf("vpc = %+v", v)
	}
	tests := []struct {
		name    string
		filters []ec2types.Filter
		want    []string
	}{
		{"all", nil, []string{DefaultVPCID, "vpc-00000000000000002"}},
		{"vpc-id", []ec2types.Filter{filter("vpc-id", "vpc-00000000000000002")}, []string{"vpc-00000000000000002"}},
		{"cidr covers the subnets", []ec2types.Filter{filter("cidr", "10.1.2.0/23")}, []string{"vpc-00000000000000002"}},
		{"cidr glob", []ec2types.Filter{filter("cidr", "198.18.*")}, []string{DefaultVPCID}},
		{"secondary block", []ec2types.Filter{filter("cidr-block-association.cidr-block", "100.64.0.0/16")}, []string{DefaultVPCID}},
		{"tag of none", []ec2types.Filter{filter("tag:Name", "*")}, nil},
		{"tag-key of none", []ec2types.Filter{filter("tag-key", "Name")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeVpcs(t.Context(), &ec2.DescribeVpcsInput{Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range out.Vpcs {
				got = append(got, aws.ToString(v.VpcId))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	var paged []string
	for p := ec2.NewDescribeVpcsPaginator(client, &ec2.DescribeVpcsInput{MaxResults: aws.Int32(5)}); p.HasMorePages(); {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Vpcs {
			paged = append(paged, aws.ToString(v.VpcId))
		}
	}
	if len(paged) != 2 {
		t.Errorf("paged = %q", paged)
	}
	_, err = client.DescribeVpcs(t.Context(), &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0000000000000000f"}})
	wantAPIError(t, err, "InvalidVpcID.NotFound", "vpc-0000000000000000f")
	_, err = client.DescribeVpcs(t.Context(), &ec2.DescribeVpcsInput{MaxResults: aws.Int32(2)})
	wantAPIError(t, err, "InvalidParameterValue", "between 5 and 1000")
}

func TestDescribeSecurityGroupsWithTheAWSClient(t *testing.T) {
	client := newEC2Client(t, localVPC(t))
	out, err := client.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SecurityGroups) != 1 {
		t.Fatalf("groups = %+v", out.SecurityGroups)
	}
	g := out.SecurityGroups[0]
	if aws.ToString(g.GroupId) != DefaultSecurityGroupID || aws.ToString(g.GroupName) != "default" || aws.ToString(g.VpcId) != DefaultVPCID ||
		aws.ToString(g.OwnerId) != awstest.Account || !strings.HasSuffix(aws.ToString(g.SecurityGroupArn), ":security-group/"+DefaultSecurityGroupID) {
		t.Errorf("group = %+v", g)
	}
	if len(g.IpPermissions) != 1 || aws.ToString(g.IpPermissions[0].IpProtocol) != "-1" || len(g.IpPermissions[0].UserIdGroupPairs) != 1 ||
		aws.ToString(g.IpPermissions[0].UserIdGroupPairs[0].GroupId) != DefaultSecurityGroupID {
		t.Errorf("ingress = %+v", g.IpPermissions)
	}
	if len(g.IpPermissionsEgress) != 1 || len(g.IpPermissionsEgress[0].IpRanges) != 1 || aws.ToString(g.IpPermissionsEgress[0].IpRanges[0].CidrIp) != "0.0.0.0/0" {
		t.Errorf("egress = %+v", g.IpPermissionsEgress)
	}
	tests := []struct {
		name string
		in   ec2.DescribeSecurityGroupsInput
		want int
	}{
		{"group-id", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("group-id", DefaultSecurityGroupID)}}, 1},
		{"group-name", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("group-name", "def*")}}, 1},
		{"other group-name", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("group-name", "nodes")}}, 0},
		{"vpc-id", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("vpc-id", DefaultVPCID)}}, 1},
		{"other vpc-id", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("vpc-id", "vpc-1")}}, 0},
		{"by ID", ec2.DescribeSecurityGroupsInput{GroupIds: []string{DefaultSecurityGroupID}}, 1},
		{"by name", ec2.DescribeSecurityGroupsInput{GroupNames: []string{"default"}}, 1},
		{"paged", ec2.DescribeSecurityGroupsInput{MaxResults: aws.Int32(5)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeSecurityGroups(t.Context(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.SecurityGroups) != tt.want || out.NextToken != nil {
				t.Errorf("got %d groups (next %v), want %d", len(out.SecurityGroups), out.NextToken, tt.want)
			}
		})
	}
	_, err = client.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-0000000000000000f"}})
	wantAPIError(t, err, "InvalidGroup.NotFound", "sg-0000000000000000f")
	_, err = client.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{GroupNames: []string{"nodes"}})
	wantAPIError(t, err, "InvalidGroup.NotFound", "'nodes'")
	_, err = client.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("colour", "red")}})
	wantAPIError(t, err, "InvalidParameterValue", "colour")
}

// Zone IDs shorten the region as AWS does.
func TestZoneID(t *testing.T) {
	for zone, want := range map[string]string{"us-west-2a": "usw2-az1", "us-east-1c": "use1-az3", "eu-central-1b": "euc1-az2",
		"ap-southeast-1a": "apse1-az1", "us-gov-west-1a": "usgw1-az1"} {
		if got := zoneID(zone); got != want {
			t.Errorf("zoneID(%q) = %q, want %q", zone, got, want)
		}
	}
}

// The local VPC has a subnet in each zone, as eksctl requires of a VPC it did not
// create (two at least, in two zones), beside the node range's; they are Auto
// Scaling's default subnets.
func TestDescribeSubnetsListsTheZoneSubnets(t *testing.T) {
	client := newEC2Client(t, localVPC(t))
	out, err := client.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{filter("vpc-id", DefaultVPCID)}})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	var ids []string
	for _, s := range out.Subnets {
		zones[aws.ToString(s.AvailabilityZone)] = true
		ids = append(ids, aws.ToString(s.SubnetId))
		if aws.ToString(s.VpcId) != DefaultVPCID || aws.ToInt32(s.AvailableIpAddressCount) == 0 {
			t.Errorf("subnet %+v", s)
		}
	}
	want := []string{DefaultSubnetID}
	for _, s := range ZoneSubnets("us-west-2") {
		want = append(want, s.ID)
	}
	if !slices.Equal(ids, slices.Sorted(slices.Values(want))) || len(zones) != 3 {
		t.Errorf("subnets %q in zones %v, want %q", ids, zones, want)
	}
	zb := ZoneSubnets("us-west-2")[1]
	one, err := client.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: []string{zb.ID}})
	if err != nil || len(one.Subnets) != 1 || aws.ToString(one.Subnets[0].CidrBlock) != "100.64.64.0/18" || aws.ToString(one.Subnets[0].AvailabilityZone) != "us-west-2b" {
		t.Errorf("zone b's subnet: %+v %v", one, err)
	}
	// Another VPC has no zone subnets.
	none, err := newEC2Client(t, New(awstest.Account)).DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{})
	if err != nil || len(none.Subnets) != 0 {
		t.Errorf("an empty inventory lists %+v %v", none, err)
	}
}
