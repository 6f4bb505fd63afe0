// Package usertemplate reads a user's own EC2 launch template, the one an EKS managed
// node group names (spec.template.launchTemplate of a NodeGroup, launchTemplate of
// CreateNodegroup), and checks it against EKS's rules for launch templates of managed
// node groups. The NodeGroup controller builds its instances' launch template from what
// it returns; the local EKS checks a request's template with it.
package usertemplate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// DescribeVersions is the EC2 call the package makes; *ec2.Client implements it.
type DescribeVersions interface {
	DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
}

// Ref names a launch template version: one of ID and Name; Version a number, $Latest or
// $Default ("" is $Default, as EKS defaults it).
type Ref struct {
	ID, Name, Version string
}

// String names the template as an error message should.
func (r Ref) String() string {
	v := r.Version
	if v == "" {
		v = "$Default"
	}
	if r.ID != "" {
		return fmt.Sprintf("launch template %s version %s", r.ID, v)
	}
	return fmt.Sprintf("launch template %q version %s", r.Name, v)
}

// Template is what a managed node group takes from a user's launch template version.
type Template struct {
	ID, Name string
	// Version is the version number read.
	Version string
	// ImageID is the template's AMI: a custom AMI, whose user data must bootstrap the
	// node itself (EKS merges nothing into it).
	ImageID      string
	InstanceType string
	// UserData is the template's user data, decoded from base64.
	UserData          string
	SecurityGroupIDs  []string
	KeyName           string
	MetadataOptions   *ec2types.LaunchTemplateInstanceMetadataOptionsRequest
	BlockDevices      []ec2types.LaunchTemplateBlockDeviceMappingRequest
	TagSpecifications []ec2types.LaunchTemplateTagSpecificationRequest
	// HasInstanceProfile says the template names an IAM instance profile, which EKS
	// refuses (Check).
	HasInstanceProfile bool
}

// ErrNotFound reports a template or version EC2 does not have.
var ErrNotFound = errors.New("launch template not found")

// ErrInvalid reports a template EKS would not take.
var ErrInvalid = errors.New("launch template invalid for a managed node group")

// Read reads the version ref names. An unknown template or version is ErrNotFound (its
// message names it); user data that is not base64 is ErrInvalid; other errors are EC2's.
func Read(ctx context.Context, c DescribeVersions, ref Ref) (*Template, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{ref.Version}}
	if ref.Version == "" {
		in.Versions = []string{"$Default"}
	}
	if ref.ID != "" {
		in.LaunchTemplateId = aws.String(ref.ID)
	} else {
		in.LaunchTemplateName = aws.String(ref.Name)
	}
	out, err := c.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && isNotFound(ae.ErrorCode()) {
			return nil, fmt.Errorf("%w: %s: %s", ErrNotFound, ref, ae.ErrorCode())
		}
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if len(out.LaunchTemplateVersions) == 0 {
		return nil, fmt.Errorf("%w: %s has no such version", ErrNotFound, ref)
	}
	return fromVersion(ref, &out.LaunchTemplateVersions[0])
}

func isNotFound(code string) bool {
	switch code {
	case "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFoundException",
		"InvalidLaunchTemplateId.VersionNotFound", "InvalidLaunchTemplateName.NotFound",
		"InvalidLaunchTemplateId.Malformed":
		return true
	}
	return false
}

func fromVersion(ref Ref, v *ec2types.LaunchTemplateVersion) (*Template, error) {
	t := &Template{
		ID: aws.ToString(v.LaunchTemplateId), Name: aws.ToString(v.LaunchTemplateName),
		Version: fmt.Sprint(aws.ToInt64(v.VersionNumber)),
	}
	d := v.LaunchTemplateData
	if d == nil {
		return t, nil
	}
	t.ImageID, t.InstanceType, t.KeyName = aws.ToString(d.ImageId), string(d.InstanceType), aws.ToString(d.KeyName)
	if ud := aws.ToString(d.UserData); ud != "" {
		b, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: its UserData is not base64", ErrInvalid, ref)
		}
		t.UserData = string(b)
	}
	t.SecurityGroupIDs = append(t.SecurityGroupIDs, d.SecurityGroupIds...)
	t.HasInstanceProfile = d.IamInstanceProfile != nil && (aws.ToString(d.IamInstanceProfile.Arn) != "" || aws.ToString(d.IamInstanceProfile.Name) != "")
	if m := d.MetadataOptions; m != nil {
		t.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint: m.HttpEndpoint, HttpProtocolIpv6: m.HttpProtocolIpv6, HttpPutResponseHopLimit: m.HttpPutResponseHopLimit,
			HttpTokens: m.HttpTokens, InstanceMetadataTags: m.InstanceMetadataTags,
		}
	}
	for _, b := range d.BlockDeviceMappings {
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName, NoDevice: b.NoDevice, VirtualName: b.VirtualName}
		if e := b.Ebs; e != nil {
			r.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, Iops: e.Iops, KmsKeyId: e.KmsKeyId,
				SnapshotId: e.SnapshotId, Throughput: e.Throughput, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType,
			}
		}
		t.BlockDevices = append(t.BlockDevices, r)
	}
	for _, ts := range d.TagSpecifications {
		t.TagSpecifications = append(t.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ts.ResourceType, Tags: ts.Tags})
	}
	return t, nil
}

// Check applies EKS's rules for a managed node group's launch template: no instance
// profile (EKS gives the node role's), an instance type in the template or in the
// group but not both, and a custom AMI (ImageId) with user data that bootstraps the
// node. groupTypes says the group names instance types. Errors are ErrInvalid, worded
// as EKS words them.
func (t *Template) Check(groupTypes bool) error {
	switch {
	case t.HasInstanceProfile:
		return fmt.Errorf("%w: Launch template should not specify an instance profile (launch template %s version %s): the node group's node role is its instance profile", ErrInvalid, t.ID, t.Version)
	case groupTypes && t.InstanceType != "":
		return fmt.Errorf("%w: instance type %s is in launch template %s version %s and the node group names instance types too: name them in one place", ErrInvalid, t.InstanceType, t.ID, t.Version)
	case t.ImageID != "" && t.UserData == "":
		return fmt.Errorf("%w: launch template %s version %s names a custom AMI (%s) but no user data: EKS merges nothing into a custom AMI's user data, so it must bootstrap the node itself", ErrInvalid, t.ID, t.Version, t.ImageID)
	}
	return nil
}
