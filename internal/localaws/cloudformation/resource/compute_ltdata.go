package resource

// This file turns AWS::EC2::LaunchTemplate's LaunchTemplateData property into EC2's
// RequestLaunchTemplateData: the fields the local EC2's launch templates hold. A field
// it does not hold is refused by name rather than dropped, so a template never makes
// instances other than it says.

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

var ltDataKeys = []string{"BlockDeviceMappings", "EbsOptimized", "IamInstanceProfile", "ImageId", "InstanceType", "KeyName",
	"MetadataOptions", "Monitoring", "NetworkInterfaces", "SecurityGroupIds", "SecurityGroups", "TagSpecifications", "UserData"}

// launchTemplateData reads LaunchTemplateData (m, at path).
func (p *propReader) launchTemplateData(m map[string]any, path string) *ec2types.RequestLaunchTemplateData {
	p.known(m, path, ltDataKeys...)
	d := &ec2types.RequestLaunchTemplateData{
		ImageId:          p.strPtr(m, path, "ImageId"),
		InstanceType:     ec2types.InstanceType(p.str(m, path, "InstanceType")),
		KeyName:          p.strPtr(m, path, "KeyName"),
		UserData:         p.strPtr(m, path, "UserData"),
		EbsOptimized:     p.boolPtr(m, path, "EbsOptimized"),
		SecurityGroupIds: p.strList(m, path, "SecurityGroupIds"),
		SecurityGroups:   p.strList(m, path, "SecurityGroups"),
	}
	if o := p.obj(m, path, "IamInstanceProfile"); o != nil {
		at := path + "/IamInstanceProfile"
		p.known(o, at, "Arn", "Name")
		d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: p.strPtr(o, at, "Arn"), Name: p.strPtr(o, at, "Name")}
	}
	if o := p.obj(m, path, "Monitoring"); o != nil {
		p.known(o, path+"/Monitoring", "Enabled")
		d.Monitoring = &ec2types.LaunchTemplatesMonitoringRequest{Enabled: p.boolPtr(o, path+"/Monitoring", "Enabled")}
	}
	if o := p.obj(m, path, "MetadataOptions"); o != nil {
		at := path + "/MetadataOptions"
		p.known(o, at, "HttpEndpoint", "HttpProtocolIpv6", "HttpPutResponseHopLimit", "HttpTokens", "InstanceMetadataTags")
		d.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(p.str(o, at, "HttpEndpoint")),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(p.str(o, at, "HttpProtocolIpv6")),
			HttpPutResponseHopLimit: p.int32Ptr(o, at, "HttpPutResponseHopLimit"),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(p.str(o, at, "HttpTokens")),
			InstanceMetadataTags:    ec2types.LaunchTemplateInstanceMetadataTagsState(p.str(o, at, "InstanceMetadataTags")),
		}
	}
	for i, ni := range p.objList(m, path, "NetworkInterfaces") {
		at := fmt.Sprintf("%s/NetworkInterfaces/%d", path, i)
		p.known(ni, at, "AssociatePublicIpAddress", "DeleteOnTermination", "Description", "DeviceIndex", "Groups", "InterfaceType",
			"Ipv4PrefixCount", "NetworkCardIndex", "PrivateIpAddress", "SecondaryPrivateIpAddressCount", "SubnetId")
		d.NetworkInterfaces = append(d.NetworkInterfaces, ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			AssociatePublicIpAddress:       p.boolPtr(ni, at, "AssociatePublicIpAddress"),
			DeleteOnTermination:            p.boolPtr(ni, at, "DeleteOnTermination"),
			Description:                    p.strPtr(ni, at, "Description"),
			DeviceIndex:                    p.int32Ptr(ni, at, "DeviceIndex"),
			Groups:                         p.strList(ni, at, "Groups"),
			InterfaceType:                  p.strPtr(ni, at, "InterfaceType"),
			Ipv4PrefixCount:                p.int32Ptr(ni, at, "Ipv4PrefixCount"),
			NetworkCardIndex:               p.int32Ptr(ni, at, "NetworkCardIndex"),
			PrivateIpAddress:               p.strPtr(ni, at, "PrivateIpAddress"),
			SecondaryPrivateIpAddressCount: p.int32Ptr(ni, at, "SecondaryPrivateIpAddressCount"),
			SubnetId:                       p.strPtr(ni, at, "SubnetId"),
		})
	}
	for i, bd := range p.objList(m, path, "BlockDeviceMappings") {
		at := fmt.Sprintf("%s/BlockDeviceMappings/%d", path, i)
		p.known(bd, at, "DeviceName", "Ebs")
		x := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: p.strPtr(bd, at, "DeviceName")}
		if e := p.obj(bd, at, "Ebs"); e != nil {
			at := at + "/Ebs"
			p.known(e, at, "DeleteOnTermination", "Encrypted", "Iops", "Throughput", "VolumeSize", "VolumeType")
			x.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: p.boolPtr(e, at, "DeleteOnTermination"),
				Encrypted:           p.boolPtr(e, at, "Encrypted"),
				Iops:                p.int32Ptr(e, at, "Iops"),
				Throughput:          p.int32Ptr(e, at, "Throughput"),
				VolumeSize:          p.int32Ptr(e, at, "VolumeSize"),
				VolumeType:          ec2types.VolumeType(p.str(e, at, "VolumeType")),
			}
		}
		d.BlockDeviceMappings = append(d.BlockDeviceMappings, x)
	}
	for i, ts := range p.objList(m, path, "TagSpecifications") {
		at := fmt.Sprintf("%s/TagSpecifications/%d", path, i)
		p.known(ts, at, "ResourceType", "Tags")
		d.TagSpecifications = append(d.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{
			ResourceType: ec2types.ResourceType(p.str(ts, at, "ResourceType")), Tags: p.ec2Tags(ts, at, "Tags")})
	}
	return d
}

// ec2Tags reads a list of {Key, Value}.
func (p *propReader) ec2Tags(m map[string]any, path, key string) []ec2types.Tag {
	var out []ec2types.Tag
	for i, t := range p.objList(m, path, key) {
		at := fmt.Sprintf("%s/%s/%d", path, key, i)
		p.known(t, at, "Key", "Value")
		p.required(t, at, "Key", "Value")
		out = append(out, ec2types.Tag{Key: aws.String(p.str(t, at, "Key")), Value: aws.String(p.str(t, at, "Value"))})
	}
	return out
}
