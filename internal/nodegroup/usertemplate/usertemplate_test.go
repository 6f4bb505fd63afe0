package usertemplate

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// oneVersion is an EC2 with one template, lt-0000000000000000a named "mine", whose
// every version holds data; it records the versions asked for.
type oneVersion struct {
	data  ec2types.ResponseLaunchTemplateData
	asked []string
	err   error
}

func (o *oneVersion) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	o.asked = append(o.asked, in.Versions...)
	if o.err != nil {
		return nil, o.err
	}
	if aws.ToString(in.LaunchTemplateName) != "mine" && aws.ToString(in.LaunchTemplateId) != "lt-0000000000000000a" {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "not found"}
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{
		LaunchTemplateId: aws.String("lt-0000000000000000a"), LaunchTemplateName: aws.String("mine"), VersionNumber: aws.Int64(3), LaunchTemplateData: &o.data,
	}}}, nil
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	ud := "MIME-Version: 1.0\r\n"
	c := &oneVersion{data: ec2types.ResponseLaunchTemplateData{
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))), InstanceType: ec2types.InstanceTypeT3Large, KeyName: aws.String("k"),
		SecurityGroupIds: []string{"sg-1"},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"),
			Ebs: &ec2types.LaunchTemplateEbsBlockDevice{VolumeSize: aws.Int32(80), VolumeType: ec2types.VolumeTypeGp3}}},
		MetadataOptions:   &ec2types.LaunchTemplateInstanceMetadataOptions{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, State: "applied"},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecification{{ResourceType: ec2types.ResourceTypeVolume, Tags: []ec2types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}},
	}}
	got, err := Read(ctx, c, Ref{Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "lt-0000000000000000a" || got.Name != "mine" || got.Version != "3" || got.UserData != ud || got.InstanceType != "t3.large" || got.KeyName != "k" ||
		got.SecurityGroupIDs[0] != "sg-1" || aws.ToInt32(got.BlockDevices[0].Ebs.VolumeSize) != 80 || got.MetadataOptions.HttpTokens != "required" ||
		got.TagSpecifications[0].ResourceType != "volume" || got.HasInstanceProfile {
		t.Errorf("Read = %+v", got)
	}
	if c.asked[0] != "$Default" {
		t.Errorf("an unset version read %q, want $Default", c.asked[0])
	}
	for _, tc := range []struct {
		name string
		ref  Ref
		c    *oneVersion
		is   error
		want string
	}{
		{"unknown", Ref{Name: "other", Version: "$Latest"}, &oneVersion{}, ErrNotFound, `launch template "other" version $Latest`},
		{"bad base64", Ref{ID: "lt-0000000000000000a", Version: "2"}, &oneVersion{data: ec2types.ResponseLaunchTemplateData{UserData: aws.String("%%%")}}, ErrInvalid, "launch template lt-0000000000000000a version 2: its UserData is not base64"},
		{"EC2 down", Ref{Name: "mine"}, &oneVersion{err: errors.New("connection refused")}, nil, "reading launch template \"mine\" version $Default: connection refused"},
	} {
		_, err := Read(ctx, tc.c, tc.ref)
		if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Read = %v, want %v saying %q", tc.name, err, tc.is, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name       string
		t          Template
		groupTypes bool
		want       string
	}{
		{"plain", Template{}, true, ""},
		{"type in the template", Template{InstanceType: "t3.large"}, false, ""},
		{"type in both", Template{InstanceType: "t3.large"}, true, "instance type t3.large is in launch template"},
		{"instance profile", Template{HasInstanceProfile: true}, false, "Launch template should not specify an instance profile"},
		{"custom AMI", Template{ImageID: "ami-1", UserData: "#!/bin/bash"}, false, ""},
		{"custom AMI without user data", Template{ImageID: "ami-1"}, false, "must bootstrap the node itself"},
	} {
		err := tc.t.Check(tc.groupTypes)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Check = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzRead: whatever user data EC2 answers, Read never panics, fails exactly when the
// data is not base64 (ErrInvalid, without echoing the data, which may hold secrets),
// and otherwise keeps every decoded byte.
func FuzzRead(f *testing.F) {
	f.Add("IyEvYmluL2Jhc2gK")
	f.Add("%%%secret")
	f.Add("")
	f.Fuzz(func(t *testing.T, ud string) {
		c := &oneVersion{data: ec2types.ResponseLaunchTemplateData{UserData: aws.String(ud)}}
		got, err := Read(context.Background(), c, Ref{Name: "mine"})
		want, derr := base64.StdEncoding.DecodeString(ud)
		switch {
		case (err != nil) != (derr != nil):
			t.Fatalf("Read(%q) = %v, base64 says %v", ud, err, derr)
		case err != nil && (!errors.Is(err, ErrInvalid) || len(ud) > 3 && strings.Contains(err.Error(), ud)):
			t.Fatalf("Read(%q) = %v", ud, err)
		case err == nil && got.UserData != string(want):
			t.Fatalf("user data %q read as %q", ud, got.UserData)
		}
	})
}
