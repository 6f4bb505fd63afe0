package ec2

// This file holds a launch template version's data: the fields that matter to a node
// (image, type, user data, instance profile, security groups, network interfaces,
// metadata options, tags, volumes), read from EC2's request keys
// (LaunchTemplateData.*) and written as the elements aws-sdk-go-v2 reads back.

import (
	"encoding/base64"
	"net/http"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// LaunchTemplateData is what one launch template version says about the instances
// launched from it. XML tags are EC2's response elements.
type LaunchTemplateData struct {
	BlockDeviceMappings []LTBlockDeviceMapping `xml:"blockDeviceMappingSet>item,omitempty"`
	EbsOptimized        *bool                  `xml:"ebsOptimized,omitempty"`
	IAMInstanceProfile  *LTIAMInstanceProfile  `xml:"iamInstanceProfile,omitempty"`
	ImageID             string                 `xml:"imageId,omitempty"`
	InstanceType        string                 `xml:"instanceType,omitempty"`
	KeyName             string                 `xml:"keyName,omitempty"`
	MetadataOptions     *LTMetadataOptions     `xml:"metadataOptions,omitempty"`
	Monitoring          *struct {
		Enabled *bool `xml:"enabled,omitempty"`
	} `xml:"monitoring,omitempty"`
	NetworkInterfaces []LTNetworkInterface `xml:"networkInterfaceSet>item,omitempty"`
	SecurityGroupIDs  []string             `xml:"securityGroupIdSet>item,omitempty"`
	SecurityGroups    []string             `xml:"securityGroupSet>item,omitempty"`
	TagSpecifications []LTTagSpecification `xml:"tagSpecificationSet>item,omitempty"`
	UserData          string               `xml:"userData,omitempty"` // base64, as sent
}

// LTIAMInstanceProfile names an instance profile by name or ARN.
type LTIAMInstanceProfile struct {
	ARN  string `xml:"arn,omitempty"`
	Name string `xml:"name,omitempty"`
}

// LTMetadataOptions are the instance metadata options.
type LTMetadataOptions struct {
	HTTPEndpoint            string `xml:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6,omitempty"`
	HTTPPutResponseHopLimit *int64 `xml:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              string `xml:"httpTokens,omitempty"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags,omitempty"`
	State                   string `xml:"state,omitempty"`
}

// LTNetworkInterface is one network interface of the launched instances.
type LTNetworkInterface struct {
	AssociatePublicIPAddress       *bool    `xml:"associatePublicIpAddress,omitempty"`
	DeleteOnTermination            *bool    `xml:"deleteOnTermination,omitempty"`
	Description                    string   `xml:"description,omitempty"`
	DeviceIndex                    *int64   `xml:"deviceIndex,omitempty"`
	Groups                         []string `xml:"groupSet>groupId,omitempty"`
	InterfaceType                  string   `xml:"interfaceType,omitempty"`
	IPv4PrefixCount                *int64   `xml:"ipv4PrefixCount,omitempty"`
	NetworkCardIndex               *int64   `xml:"networkCardIndex,omitempty"`
	PrivateIPAddress               string   `xml:"privateIpAddress,omitempty"`
	SecondaryPrivateIPAddressCount *int64   `xml:"secondaryPrivateIpAddressCount,omitempty"`
	SubnetID                       string   `xml:"subnetId,omitempty"`
}

// LTTagSpecification tags a kind of resource the launch creates.
type LTTagSpecification struct {
	ResourceType string `xml:"resourceType,omitempty"`
	Tags         []Tag  `xml:"tagSet>item,omitempty"`
}

// Tag is one EC2 tag.
type Tag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

// LTBlockDeviceMapping is one volume of the launched instances.
type LTBlockDeviceMapping struct {
	DeviceName string `xml:"deviceName,omitempty"`
	EBS        *struct {
		DeleteOnTermination *bool  `xml:"deleteOnTermination,omitempty"`
		Encrypted           *bool  `xml:"encrypted,omitempty"`
		IOPS                *int64 `xml:"iops,omitempty"`
		Throughput          *int64 `xml:"throughput,omitempty"`
		VolumeSize          *int64 `xml:"volumeSize,omitempty"`
		VolumeType          string `xml:"volumeType,omitempty"`
	} `xml:"ebs,omitempty"`
}

// maxUserData is EC2's limit on user data, before base64.
const maxUserData = 16 << 10

// DecodedUserData is the user data as the instance sees it.
func (d *LaunchTemplateData) DecodedUserData() ([]byte, error) {
	if d.UserData == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(d.UserData)
}

// InstanceTags are the tags the template puts on instances.
func (d *LaunchTemplateData) InstanceTags() map[string]string {
	out := map[string]string{}
	for _, ts := range d.TagSpecifications {
		if ts.ResourceType == "instance" {
			for _, t := range ts.Tags {
				out[t.Key] = t.Value
			}
		}
	}
	return out
}

// parseLaunchTemplateData reads LaunchTemplateData.* (n may be nil: no data).
//
//nolint:gocyclo // one independent read per LaunchTemplateData field.
func parseLaunchTemplateData(n *protocol.Params) (LaunchTemplateData, *protocol.Error) {
	var d LaunchTemplateData
	if n == nil {
		return d, nil
	}
	var err *protocol.Error
	d.ImageID, _ = n.Str("ImageId")
	d.InstanceType, _ = n.Str("InstanceType")
	d.KeyName, _ = n.Str("KeyName")
	if ud, ok := n.Str("UserData"); ok {
		raw, derr := base64.StdEncoding.DecodeString(ud)
		if derr != nil {
			return d, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidUserData.Malformed", Message: "Invalid BASE64 encoding of user data."}
		}
		if len(raw) > maxUserData {
			return d, protocol.InvalidParameter("User data is limited to %d bytes", maxUserData)
		}
		d.UserData = ud
	}
	if p := n.Child("IamInstanceProfile"); p != nil {
		d.IAMInstanceProfile = &LTIAMInstanceProfile{}
		d.IAMInstanceProfile.ARN, _ = p.Str("Arn")
		d.IAMInstanceProfile.Name, _ = p.Str("Name")
	}
	d.SecurityGroupIDs = n.StrList("SecurityGroupId")
	d.SecurityGroups = n.StrList("SecurityGroup")
	if d.EbsOptimized, err = n.Bool("EbsOptimized"); err != nil {
		return d, err
	}
	if m := n.Child("Monitoring"); m != nil {
		d.Monitoring = &struct {
			Enabled *bool `xml:"enabled,omitempty"`
		}{}
		if d.Monitoring.Enabled, err = m.Bool("Enabled"); err != nil {
			return d, err
		}
	}
	if m := n.Child("MetadataOptions"); m != nil {
		o := &LTMetadataOptions{State: "applied"}
		o.HTTPEndpoint, _ = m.Str("HttpEndpoint")
		o.HTTPProtocolIPv6, _ = m.Str("HttpProtocolIpv6")
		o.HTTPTokens, _ = m.Str("HttpTokens")
		o.InstanceMetadataTags, _ = m.Str("InstanceMetadataTags")
		if o.HTTPPutResponseHopLimit, err = m.Int("HttpPutResponseHopLimit"); err != nil {
			return d, err
		}
		if o.HTTPTokens != "" && o.HTTPTokens != "optional" && o.HTTPTokens != "required" {
			return d, protocol.InvalidParameter("Value (%s) for parameter LaunchTemplateData.MetadataOptions.HttpTokens is invalid. Valid values: optional, required.", o.HTTPTokens)
		}
		if h := o.HTTPPutResponseHopLimit; h != nil && (*h < 1 || *h > 64) {
			return d, protocol.InvalidParameter("Value (%d) for parameter LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit is invalid. Valid values: 1 to 64.", *h)
		}
		d.MetadataOptions = o
	}
	for _, ni := range n.List("NetworkInterface") {
		var x LTNetworkInterface
		if x.AssociatePublicIPAddress, err = ni.Bool("AssociatePublicIpAddress"); err != nil {
			return d, err
		}
		if x.DeleteOnTermination, err = ni.Bool("DeleteOnTermination"); err != nil {
			return d, err
		}
		x.Description, _ = ni.Str("Description")
		x.InterfaceType, _ = ni.Str("InterfaceType")
		x.PrivateIPAddress, _ = ni.Str("PrivateIpAddress")
		x.SubnetID, _ = ni.Str("SubnetId")
		x.Groups = ni.StrList("SecurityGroupId")
		for name, dst := range map[string]**int64{"DeviceIndex": &x.DeviceIndex, "Ipv4PrefixCount": &x.IPv4PrefixCount,
			"NetworkCardIndex": &x.NetworkCardIndex, "SecondaryPrivateIpAddressCount": &x.SecondaryPrivateIPAddressCount} {
			if *dst, err = ni.Int(name); err != nil {
				return d, err
			}
		}
		d.NetworkInterfaces = append(d.NetworkInterfaces, x)
	}
	for _, ts := range n.List("TagSpecification") {
		var x LTTagSpecification
		x.ResourceType, _ = ts.Str("ResourceType")
		tags, terr := parseTags(ts)
		if terr != nil {
			return d, terr
		}
		x.Tags = tags
		d.TagSpecifications = append(d.TagSpecifications, x)
	}
	for _, bd := range n.List("BlockDeviceMapping") {
		var x LTBlockDeviceMapping
		x.DeviceName, _ = bd.Str("DeviceName")
		if e := bd.Child("Ebs"); e != nil {
			x.EBS = &struct {
				DeleteOnTermination *bool  `xml:"deleteOnTermination,omitempty"`
				Encrypted           *bool  `xml:"encrypted,omitempty"`
				IOPS                *int64 `xml:"iops,omitempty"`
				Throughput          *int64 `xml:"throughput,omitempty"`
				VolumeSize          *int64 `xml:"volumeSize,omitempty"`
				VolumeType          string `xml:"volumeType,omitempty"`
			}{}
			x.EBS.VolumeType, _ = e.Str("VolumeType")
			if x.EBS.DeleteOnTermination, err = e.Bool("DeleteOnTermination"); err != nil {
				return d, err
			}
			if x.EBS.Encrypted, err = e.Bool("Encrypted"); err != nil {
				return d, err
			}
			for name, dst := range map[string]**int64{"Iops": &x.EBS.IOPS, "Throughput": &x.EBS.Throughput, "VolumeSize": &x.EBS.VolumeSize} {
				if *dst, err = e.Int(name); err != nil {
					return d, err
				}
			}
		}
		d.BlockDeviceMappings = append(d.BlockDeviceMappings, x)
	}
	if u := n.Unknown(); u != "" {
		return d, protocol.InvalidParameter("The parameter %s is not supported by the local cloud's launch templates (supported: ImageId, InstanceType, KeyName, UserData, IamInstanceProfile, SecurityGroupId, SecurityGroup, NetworkInterface, MetadataOptions, TagSpecification, BlockDeviceMapping, EbsOptimized, Monitoring)", u)
	}
	return d, nil
}

// parseTags reads Tag.N.Key and Tag.N.Value.
func parseTags(n *protocol.Params) ([]Tag, *protocol.Error) {
	var out []Tag
	for _, t := range n.List("Tag") {
		k, ok := t.Str("Key")
		if !ok || k == "" {
			return nil, protocol.InvalidParameter("Tag key must be given: %s.Key", t.Path())
		}
		v, _ := t.Str("Value")
		out = append(out, Tag{k, v})
	}
	return out, nil
}

// overlay returns src with every field that d sets replacing src's: the data of a new
// version made from SourceVersion.
func (d LaunchTemplateData) overlay(src LaunchTemplateData) LaunchTemplateData {
	out := src
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&out.ImageID, d.ImageID)
	set(&out.InstanceType, d.InstanceType)
	set(&out.KeyName, d.KeyName)
	set(&out.UserData, d.UserData)
	if d.IAMInstanceProfile != nil {
		out.IAMInstanceProfile = d.IAMInstanceProfile
	}
	if d.EbsOptimized != nil {
		out.EbsOptimized = d.EbsOptimized
	}
	if d.Monitoring != nil {
		out.Monitoring = d.Monitoring
	}
	if d.MetadataOptions != nil {
		out.MetadataOptions = d.MetadataOptions
	}
	if d.SecurityGroupIDs != nil {
		out.SecurityGroupIDs = d.SecurityGroupIDs
	}
	if d.SecurityGroups != nil {
		out.SecurityGroups = d.SecurityGroups
	}
	if d.NetworkInterfaces != nil {
		out.NetworkInterfaces = d.NetworkInterfaces
	}
	if d.TagSpecifications != nil {
		out.TagSpecifications = d.TagSpecifications
	}
	if d.BlockDeviceMappings != nil {
		out.BlockDeviceMappings = d.BlockDeviceMappings
	}
	return out
}
