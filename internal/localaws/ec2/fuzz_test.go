package ec2

import (
	"net/url"
	"slices"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// Arbitrary request bodies never panic the launch template actions and always get one
// well-formed EC2 answer.
func FuzzLaunchTemplateRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateLaunchTemplate&Version=2016-11-15&LaunchTemplateName=ng1&LaunchTemplateData.UserData=eA%3D%3D&LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1=sg-1",
		"Action=CreateLaunchTemplateVersion&LaunchTemplateName=ng1&SourceVersion=%24Latest&LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit=70",
		"Action=DescribeLaunchTemplateVersions&LaunchTemplateVersion.1=%24Default&LaunchTemplateVersion.02=1",
		"Action=DescribeLaunchTemplates&Filter.1.Name=tag%3Ak&Filter.1.Value.1=*&MaxResults=1&NextToken=b2Zmc2V0OjE",
		"Action=ModifyLaunchTemplate&LaunchTemplateId=lt-0123456789abcdef0&SetDefaultVersion=2",
		"Action=DeleteLaunchTemplate&LaunchTemplateName=ng1&LaunchTemplateData..=x",
	} {
		f.Add([]byte(seed))
	}
	lt := NewLaunchTemplates(awstest.Account)
	e := New(awstest.Account).WithLaunchTemplates(lt)
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || lt.actions()[form.Get("Action")] == nil {
			return
		}
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), e, body), form.Get("Action")+"Response", "Response")
	})
}

// Arbitrary requests to the Describe actions of the VPC, its subnets and security group
// rules, images, tags and instance attributes never panic and always get one well-formed EC2 answer.
func FuzzDescribeVPCRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=DescribeInstanceAttribute&Version=2016-11-15&InstanceId=i-00000000000000001&Attribute=userData",
		"Action=DescribeAvailabilityZones&ZoneName.1=us-west-2a&ZoneId.1=usw2-az2&Filter.1.Name=state&Filter.1.Value.1=avail*",
		"Action=DescribeVpcs&VpcId.1=vpc-00000000000000000&Filter.1.Name=cidr&Filter.1.Value.1=198.18.*&MaxResults=5",
		"Action=DescribeSecurityGroups&GroupName.1=default&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-*",
		"Action=DescribeImages&Owner.1=self&ExecutableBy.1=all&ImageId.1=ami-00000000000000000&MaxResults=6",
		"Action=DescribeTags&Filter.1.Name=tag-key&Filter.1.Value.1=*&MaxResults=5&NextToken=b2Zmc2V0OjE",
		"Action=DescribeImages&Owner.1=amazon&Filter.1.Name=name&Filter.1.Value.1=amazon-eks-node-*&Filter.2.Name=owner-alias&Filter.2.Value.1=amazon",
		"Action=DescribeSecurityGroupRules&Filter.1.Name=group-id&Filter.1.Value.1=sg-00000000000000000&SecurityGroupRuleId.1=sgr-0&MaxResults=5",
		"Action=DescribeSubnets&Filter.1.Name=availability-zone&Filter.1.Value.1=us-west-2b",
	} {
		f.Add([]byte(seed))
	}
	lt := NewLaunchTemplates(awstest.Account)
	e := New(awstest.Account).WithLaunchTemplates(lt)
	inst := ec2Instance(1, "nodes")
	inst.UserData = []byte("#!/bin/bash\n")
	if err := e.Launch(inst, WithTags(map[string]string{"Name": "n1"})); err != nil {
		f.Fatal(err)
	}
	actions := []string{"DescribeInstanceAttribute", "DescribeAvailabilityZones", "DescribeVpcs", "DescribeSecurityGroups", "DescribeImages", "DescribeTags",
		"DescribeSecurityGroupRules", "DescribeSubnets"}
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || !slices.Contains(actions, form.Get("Action")) {
			return
		}
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), e, body), form.Get("Action")+"Response", "Response")
	})
}

// Arbitrary requests to the security group actions (the rule decoder above all) never
// panic and always get one well-formed EC2 answer; whatever they did, every rule left
// belongs to a group that exists.
func FuzzSecurityGroupRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateSecurityGroup&GroupName=g&GroupDescription=d&VpcId=vpc-1&TagSpecification.1.ResourceType=security-group&TagSpecification.1.Tag.1.Key=k",
		"Action=AuthorizeSecurityGroupIngress&GroupName=g&IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=1&IpPermissions.1.ToPort=2&IpPermissions.1.IpRanges.1.CidrIp=10.0.0.0%2F8",
		"Action=AuthorizeSecurityGroupEgress&GroupId=sg-00000000000000000&IpPermissions.1.IpProtocol=-1&IpPermissions.1.Groups.1.GroupName=g",
		"Action=RevokeSecurityGroupIngress&GroupId=sg-00000000000000000&SecurityGroupRuleId.1=sgr-0",
		"Action=AuthorizeSecurityGroupIngress&GroupName=default&CidrIp=1.2.3.4%2F32&IpProtocol=icmp&FromPort=-1",
		"Action=DeleteSecurityGroup&GroupName=g",
		"Action=DeleteTags&ResourceId.1=sg-00000000000000000&Tag.1.Key=k",
		"Action=GetConsoleOutput&InstanceId=i-00000000000000001&Latest=true",
	} {
		f.Add([]byte(seed))
	}
	e := New(awstest.Account)
	if err := e.Launch(ec2Instance(1, "nodes")); err != nil {
		f.Fatal(err)
	}
	actions := []string{"CreateSecurityGroup", "DeleteSecurityGroup", "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress",
		"RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress", "DeleteTags", "GetConsoleOutput"}
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || !slices.Contains(actions, form.Get("Action")) {
			return
		}
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), e, body), form.Get("Action")+"Response", "Response")
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, r := range e.rules {
			if e.groups[r.groupID] == nil || r.peer() == "" {
				t.Fatalf("rule %+v of no group or no peer", r)
			}
		}
	})
}
