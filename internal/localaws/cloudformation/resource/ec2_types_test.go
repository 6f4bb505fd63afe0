package resource

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	localec2 "github.com/nodejoin/nodejoin/internal/localaws/ec2"
)

// describeSG returns a group as DescribeSecurityGroups shows it.
func describeSG(t *testing.T, cl Clients, id string) ec2types.SecurityGroup {
	t.Helper()
	out, err := cl.EC2.DescribeSecurityGroups(t.Context(), &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Fatalf("DescribeSecurityGroups(%s) = %+v, %v", id, out, err)
	}
	return out.SecurityGroups[0]
}

// permissionKeys are a direction's permissions as protocol:from-to:peer strings.
func permissionKeys(perms []ec2types.IpPermission) []string {
	var out []string
	for _, p := range perms {
		head := aws.ToString(p.IpProtocol) + ":" + itoa32(p.FromPort) + "-" + itoa32(p.ToPort) + ":"
		for _, r := range p.IpRanges {
			out = append(out, head+aws.ToString(r.CidrIp))
		}
		for _, g := range p.UserIdGroupPairs {
			out = append(out, head+aws.ToString(g.GroupId))
		}
	}
	slices.Sort(out)
	return out
}

func itoa32(p *int32) string {
	if p == nil {
		return "*"
	}
	return strconv.Itoa(int(*p))
}

// A node group's security group with inline rules, a stand-alone ingress rule naming
// it, updates of its rules and tags in place, and deletion that waits while an
// interface uses the group.
func TestEC2TypesMakeWhatEC2Shows(t *testing.T) {
	cloud := newSvcCloud(t)
	types := Provisioners(cloud.cl)
	ctx := t.Context()
	sgProps := map[string]any{"GroupDescription": "nodes", "VpcId": localec2.DefaultVPCID,
		"SecurityGroupIngress": []any{map[string]any{"IpProtocol": "tcp", "FromPort": "443", "ToPort": "443", "CidrIp": "10.0.0.0/16"}},
		"Tags":                 []any{map[string]any{"Key": "Name", "Value": "nodes"}}}
	group, err := types["AWS::EC2::SecurityGroup"].Create(ctx, svcCall("AWS::EC2::SecurityGroup", "NodeSecurityGroup", sgProps))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(group.PhysicalID, "sg-") || group.Attributes["GroupId"] != group.PhysicalID || group.Attributes["VpcId"] != localec2.DefaultVPCID {
		t.Fatalf("group = %+v", group)
	}
	g := describeSG(t, cloud.cl, group.PhysicalID)
	if !strings.HasPrefix(aws.ToString(g.GroupName), "demo-NodeSecurityGroup-") || len(g.Tags) != 4 {
		t.Errorf("group = %+v (want a generated name and Name, team and CloudFormation's tags)", g)
	}
	if got := permissionKeys(g.IpPermissions); !slices.Equal(got, []string{"tcp:443-443:10.0.0.0/16"}) {
		t.Errorf("ingress = %v", got)
	}
	if got := permissionKeys(g.IpPermissionsEgress); !slices.Equal(got, []string{"-1:*-*:0.0.0.0/0"}) {
		t.Errorf("egress = %v (want the default rule)", got)
	}

	ruleProps := map[string]any{"GroupId": group.PhysicalID, "IpProtocol": "-1", "SourceSecurityGroupId": localec2.DefaultSecurityGroupID, "Description": "cluster"}
	rule, err := types["AWS::EC2::SecurityGroupIngress"].Create(ctx, svcCall("AWS::EC2::SecurityGroupIngress", "FromCluster", ruleProps))
	if err != nil || !strings.HasPrefix(rule.PhysicalID, "sgr-") {
		t.Fatalf("rule = %+v, %v", rule, err)
	}
	if _, err := types["AWS::EC2::SecurityGroupIngress"].Create(ctx, svcCall("AWS::EC2::SecurityGroupIngress", "Again", ruleProps)); err == nil ||
		!strings.Contains(err.Error(), "already exists (Service: Ec2, Status Code: 400, Error Code: InvalidPermission.Duplicate)") {
		t.Errorf("a duplicate rule: %v", err)
	}

	// In place: ingress 443 → 10250, egress limited to the VPC, a tag gone.
	newProps := map[string]any{"GroupDescription": "nodes", "VpcId": localec2.DefaultVPCID,
		"SecurityGroupIngress": []any{map[string]any{"IpProtocol": "6", "FromPort": "10250", "ToPort": "10250", "CidrIp": "10.0.0.0/16"}},
		"SecurityGroupEgress":  []any{map[string]any{"IpProtocol": "-1", "CidrIp": "10.0.0.0/8"}}}
	if _, err := types["AWS::EC2::SecurityGroup"].Update(ctx, svcCall("AWS::EC2::SecurityGroup", "NodeSecurityGroup", newProps), group, sgProps); err != nil {
		t.Fatal(err)
	}
	g = describeSG(t, cloud.cl, group.PhysicalID)
	if got := permissionKeys(g.IpPermissions); !slices.Equal(got, []string{"-1:*-*:" + localec2.DefaultSecurityGroupID, "tcp:10250-10250:10.0.0.0/16"}) {
		t.Errorf("ingress after update = %v", got)
	}
	if got := permissionKeys(g.IpPermissionsEgress); !slices.Equal(got, []string{"-1:*-*:10.0.0.0/8"}) {
		t.Errorf("egress after update = %v", got)
	}
	if len(g.Tags) != 3 {
		t.Errorf("tags after update = %+v", g.Tags)
	}
	moved := map[string]any{"GroupDescription": "nodes", "VpcId": "vpc-0000000000000000f"}
	if _, err := types["AWS::EC2::SecurityGroup"].Update(ctx, svcCall("AWS::EC2::SecurityGroup", "NodeSecurityGroup", moved), group, newProps); !errors.Is(err, ErrReplace) {
		t.Errorf("a new VPC: %v, want ErrReplace", err)
	}

	// Deletion waits while an interface is in the group, and tolerates what is gone.
	eni, err := cloud.cl.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(localec2.DefaultSubnetID), Groups: []string{group.PhysicalID}})
	if err != nil {
		t.Fatal(err)
	}
	wait, every := sgDeleteWait, sgDeleteEvery
	t.Cleanup(func() { sgDeleteWait, sgDeleteEvery = wait, every })
	sgDeleteWait, sgDeleteEvery = 50*time.Millisecond, 10*time.Millisecond
	err = types["AWS::EC2::SecurityGroup"].Delete(ctx, svcCall("AWS::EC2::SecurityGroup", "NodeSecurityGroup", newProps), group)
	if err == nil || !strings.Contains(err.Error(), "DependencyViolation") {
		t.Fatalf("deleting a group in use: %v", err)
	}
	sgDeleteWait = 5 * time.Second
	go func() {
		time.Sleep(30 * time.Millisecond)
		_, _ = cloud.cl.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterface.NetworkInterfaceId})
	}()
	for _, step := range []struct {
		typ   string
		props map[string]any
		r     Result
	}{{"AWS::EC2::SecurityGroupIngress", ruleProps, rule}, {"AWS::EC2::SecurityGroup", newProps, group}} {
		for range 2 {
			if err := types[step.typ].Delete(ctx, svcCall(step.typ, "X", step.props), step.r); err != nil {
				t.Fatalf("delete %s: %v", step.typ, err)
			}
		}
	}
	out, err := cloud.cl.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Errorf("groups left = %+v, %v", out, err)
	}
}

func TestEC2TypesRefuse(t *testing.T) {
	cloud := newSvcCloud(t)
	types := Provisioners(cloud.cl)
	for _, tt := range []struct {
		name, typ string
		props     map[string]any
		want      string
	}{
		{"unknown VPC", "AWS::EC2::SecurityGroup", map[string]any{"GroupDescription": "d", "VpcId": "vpc-0000000000000000f"}, "The vpc ID 'vpc-0000000000000000f' does not exist"},
		{"no description", "AWS::EC2::SecurityGroup", map[string]any{"VpcId": localec2.DefaultVPCID}, "required key [GroupDescription] not found"},
		{"rule without peer", "AWS::EC2::SecurityGroup", map[string]any{"GroupDescription": "d", "VpcId": localec2.DefaultVPCID,
			"SecurityGroupIngress": []any{map[string]any{"IpProtocol": "tcp", "FromPort": "1", "ToPort": "2"}}}, "#/SecurityGroupIngress/0: a rule names exactly one"},
		{"rule with an unknown property", "AWS::EC2::SecurityGroup", map[string]any{"GroupDescription": "d", "VpcId": localec2.DefaultVPCID,
			"SecurityGroupEgress": []any{map[string]any{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "SourceSecurityGroupId": "sg-1"}}}, "Encountered unsupported property SourceSecurityGroupId"},
		{"bad port", "AWS::EC2::SecurityGroupIngress", map[string]any{"GroupId": localec2.DefaultSecurityGroupID, "IpProtocol": "tcp", "FromPort": "x", "ToPort": "2", "CidrIp": "10.0.0.0/8"}, "expected type: Integer"},
		{"rule of an unknown group", "AWS::EC2::SecurityGroupEgress", map[string]any{"GroupId": "sg-0000000000000000f", "IpProtocol": "-1", "CidrIp": "10.0.0.0/8"}, "The security group 'sg-0000000000000000f' does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := types[tt.typ].Create(t.Context(), svcCall(tt.typ, "R", tt.props))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
