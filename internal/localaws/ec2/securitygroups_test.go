package ec2

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func tcp(port int32, cidrs ...string) ec2types.IpPermission {
	p := ec2types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(port), ToPort: aws.Int32(port)}
	for _, c := range cidrs {
		p.IpRanges = append(p.IpRanges, ec2types.IpRange{CidrIp: aws.String(c)})
	}
	return p
}

// A created group has the default egress rule, takes rules in and out, shows them in
// DescribeSecurityGroups (grouped) and DescribeSecurityGroupRules (one per peer), and
// cannot be deleted while an interface is in it.
func TestSecurityGroupsWithTheAWSClient(t *testing.T) {
	e := localVPC(t)
	c := newEC2Client(t, e)
	ctx := t.Context()
	created, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes"), Description: aws.String("node group"),
		VpcId: aws.String(DefaultVPCID), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
			Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(created.GroupId)
	in, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{
		tcp(443, "10.0.0.0/16", "192.168.0.0/24"),
		{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String(DefaultSecurityGroupID), Description: aws.String("cluster")}}},
		{IpProtocol: aws.String("udp"), FromPort: aws.Int32(53), ToPort: aws.Int32(53), PrefixListIds: []ec2types.PrefixListId{{PrefixListId: aws.String("pl-12345678")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.SecurityGroupRules) != 4 {
		t.Fatalf("authorized rules = %+v", in.SecurityGroupRules)
	}
	_, err = c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{tcp(443, "10.0.0.0/16")}})
	wantAPIError(t, err, "InvalidPermission.Duplicate", "10.0.0.0/16")
	if _, err := c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(id),
		IpPermissions: []ec2types.IpPermission{{IpProtocol: aws.String("-1"), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("0.0.0.0/0")}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{tcp(10250, "10.0.0.0/16")}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{tcp(22, "0.0.0.0/0")}})
	wantAPIError(t, err, "InvalidPermission.NotFound", "0.0.0.0/0")

	got, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("tag:kubernetes.io/cluster/demo", "owned")}})
	if err != nil || len(got.SecurityGroups) != 1 {
		t.Fatalf("by tag: %+v, %v", got, err)
	}
	g := got.SecurityGroups[0]
	if aws.ToString(g.GroupName) != "nodes" || aws.ToString(g.VpcId) != DefaultVPCID || len(g.IpPermissions) != 3 || len(g.IpPermissionsEgress) != 1 {
		t.Fatalf("group = %+v", g)
	}
	https := g.IpPermissions[0]
	if aws.ToInt32(https.FromPort) != 443 || len(https.IpRanges) != 2 || aws.ToString(g.IpPermissions[1].UserIdGroupPairs[0].Description) != "cluster" ||
		aws.ToString(g.IpPermissions[2].PrefixListIds[0].PrefixListId) != "pl-12345678" || aws.ToInt32(g.IpPermissionsEgress[0].ToPort) != 10250 {
		t.Errorf("permissions = %+v / %+v", g.IpPermissions, g.IpPermissionsEgress)
	}
	for _, tt := range []struct {
		name string
		in   ec2.DescribeSecurityGroupsInput
		want int
	}{
		{"all", ec2.DescribeSecurityGroupsInput{}, 2},
		{"by name", ec2.DescribeSecurityGroupsInput{GroupNames: []string{"nodes"}}, 1},
		{"by vpc", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("vpc-id", DefaultVPCID)}}, 2},
		{"by group-name", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("group-name", "no*")}}, 1},
		{"by ingress cidr", ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{filter("ip-permission.cidr", "192.168.0.0/24")}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeSecurityGroups(ctx, &tt.in)
			if err != nil || len(out.SecurityGroups) != tt.want {
				t.Errorf("%+v, %v, want %d groups", out, err, tt.want)
			}
		})
	}
	rules, err := c.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{filter("group-id", id)}})
	if err != nil || len(rules.SecurityGroupRules) != 5 {
		t.Fatalf("rules = %+v, %v", rules, err)
	}
	if _, err := c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id),
		SecurityGroupRuleIds: []string{aws.ToString(in.SecurityGroupRules[0].SecurityGroupRuleId)}}); err != nil {
		t.Fatal(err)
	}

	eni, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetID), Groups: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	wantAPIError(t, err, "DependencyViolation", id)
	if _, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterface.NetworkInterfaceId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/demo")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	wantAPIError(t, err, "InvalidGroup.NotFound", id)
	_, err = c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(DefaultSecurityGroupID)})
	wantAPIError(t, err, "CannotDelete", DefaultSecurityGroupID)
	left, err := c.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{})
	if err != nil || len(left.SecurityGroupRules) != 2 {
		t.Errorf("rules left = %+v, %v", left, err)
	}
}

func TestSecurityGroupsRefuseBadInput(t *testing.T) {
	e := localVPC(t)
	c := newEC2Client(t, e)
	ctx := t.Context()
	for _, tt := range []struct {
		name, group, desc, vpc, code string
	}{
		{"no VPC", "g", "d", "", "VPCIdNotSpecified"},
		{"unknown VPC", "g", "d", "vpc-0000000000000000f", "InvalidVpcID.NotFound"},
		{"sg- name", "sg-1", "d", DefaultVPCID, "InvalidParameterValue"},
		{"reserved name", "default", "d", DefaultVPCID, "InvalidParameterValue"},
		{"no description", "g", "", DefaultVPCID, "MissingParameter"},
		{"bad characters", "g\u00e9", "d", DefaultVPCID, "InvalidParameterValue"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := &ec2.CreateSecurityGroupInput{GroupName: aws.String(tt.group), Description: aws.String(tt.desc)}
			if tt.vpc != "" {
				in.VpcId = aws.String(tt.vpc)
			}
			_, err := c.CreateSecurityGroup(ctx, in)
			wantAPIError(t, err, tt.code, "")
		})
	}
	if _, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("g"), Description: aws.String("d"), VpcId: aws.String(DefaultVPCID)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("g"), Description: aws.String("d"), VpcId: aws.String(DefaultVPCID)})
	wantAPIError(t, err, "InvalidGroup.Duplicate", "'g'")
	for _, tt := range []struct {
		name string
		perm ec2types.IpPermission
		code string
	}{
		{"tcp without ports", ec2types.IpPermission{IpProtocol: aws.String("tcp"), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}}, "InvalidParameterValue"},
		{"bad CIDR", tcp(22, "10.0.0.0/33"), "InvalidParameterValue"},
		{"bad protocol", ec2types.IpPermission{IpProtocol: aws.String("tcpx"), IpRanges: []ec2types.IpRange{{CidrIp: aws.String("10.0.0.0/8")}}}, "InvalidParameterValue"},
		{"no peer", tcp(22), "InvalidParameterValue"},
		{"unknown group", ec2types.IpPermission{IpProtocol: aws.String("-1"), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String("sg-0000000000000000f")}}}, "InvalidGroup.NotFound"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupName: aws.String("g"), IpPermissions: []ec2types.IpPermission{tt.perm}})
			wantAPIError(t, err, tt.code, "")
		})
	}
	_, err = c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String("sg-0000000000000000f"), IpPermissions: []ec2types.IpPermission{tcp(22, "10.0.0.0/8")}})
	wantAPIError(t, err, "InvalidGroup.NotFound", "sg-0000000000000000f")
}

// GetConsoleOutput answers the console source's output, base64, its last 64 KiB; empty
// before there is any; an unknown instance is refused.
func TestGetConsoleOutputWithTheAWSClient(t *testing.T) {
	e := localVPC(t)
	c := newEC2Client(t, e)
	const id = "i-00000000000000001"
	get := func(instance string) (*ec2.GetConsoleOutputOutput, error) {
		return c.GetConsoleOutput(t.Context(), &ec2.GetConsoleOutputInput{InstanceId: aws.String(instance), Latest: aws.Bool(true)})
	}
	out, err := get(id)
	if err != nil || out.Output != nil || aws.ToString(out.InstanceId) != id || out.Timestamp == nil {
		t.Fatalf("without a source: %+v, %v", out, err)
	}
	big := append(bytes.Repeat([]byte("a"), 10), bytes.Repeat([]byte("b"), maxConsoleOutput)...)
	e.SetConsoleSource(func(instance string) ([]byte, bool) {
		if instance != id {
			return nil, false
		}
		return big, true
	})
	out, err = get(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil || !bytes.Equal(raw, big[10:]) {
		t.Errorf("output is not the last 64 KiB (%d bytes, %v)", len(raw), err)
	}
	_, err = get("i-0000000000000000f")
	wantAPIError(t, err, "InvalidInstanceID.NotFound", "i-0000000000000000f")
}

// An instance launched in a created group keeps it from being deleted until it is
// terminated.
func TestSecurityGroupOfAnInstance(t *testing.T) {
	e := localVPC(t)
	c := newEC2Client(t, e)
	out, err := c.CreateSecurityGroup(t.Context(), &ec2.CreateSecurityGroupInput{GroupName: aws.String("n"), Description: aws.String("d"), VpcId: aws.String(DefaultVPCID)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.GroupId)
	inst := Instance{ID: "i-00000000000000002", PrivateIPv4: "198.18.0.11", SubnetID: DefaultSubnetID, VPCID: DefaultVPCID}
	if err := e.Launch(inst, WithSecurityGroups("sg-0000000000000000f")); err == nil {
		t.Fatal("launched into a group that does not exist")
	}
	if err := e.Launch(inst, WithSecurityGroups(id)); err != nil {
		t.Fatal(err)
	}
	enis, err := c.DescribeNetworkInterfaces(t.Context(), &ec2.DescribeNetworkInterfacesInput{Filters: []ec2types.Filter{filter("group-id", id)}})
	if err != nil || len(enis.NetworkInterfaces) != 1 {
		t.Fatalf("interfaces in the group: %+v, %v", enis, err)
	}
	_, err = c.DeleteSecurityGroup(t.Context(), &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
	wantAPIError(t, err, "DependencyViolation", "i-00000000000000002")
	if err := e.SetState(inst.ID, "terminated"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSecurityGroup(t.Context(), &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
}
