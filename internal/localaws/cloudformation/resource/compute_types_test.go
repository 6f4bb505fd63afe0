package resource

import (
	"context"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

var nodeUserData = base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh demo\n"))

// ltData is a node group's LaunchTemplateData as a template resolves it.
func ltData(image string) map[string]any {
	return map[string]any{
		"ImageId": image, "InstanceType": "m5.large", "UserData": nodeUserData,
		"IamInstanceProfile": map[string]any{"Arn": "arn:aws:iam::111122223333:instance-profile/nodes"},
		"MetadataOptions":    map[string]any{"HttpTokens": "required", "HttpPutResponseHopLimit": "2"},
		"NetworkInterfaces":  []any{map[string]any{"DeviceIndex": "0", "Groups": []any{"sg-0123456789abcdef0"}, "AssociatePublicIpAddress": "false"}},
		"BlockDeviceMappings": []any{map[string]any{"DeviceName": "/dev/xvda",
			"Ebs": map[string]any{"VolumeSize": "20", "VolumeType": "gp3", "DeleteOnTermination": "true"}}},
		"TagSpecifications": []any{map[string]any{"ResourceType": "instance",
			"Tags": []any{map[string]any{"Key": "Name", "Value": "nodes-NodeGroup-Node"}}}},
	}
}

func TestLaunchTemplateLifecycle(t *testing.T) {
	e := newResEnv(t)
	ctx := context.Background()
	p := e.provisioner("AWS::EC2::LaunchTemplate")
	props := map[string]any{"LaunchTemplateData": ltData("ami-0123456789abcdef0")}
	c, _ := e.call("AWS::EC2::LaunchTemplate", "NodeLaunchTemplate", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	name := res.Attributes["LaunchTemplateName"]
	if !regexp.MustCompile(`^NodeLaunchTemplate_[A-Z0-9]{12}$`).MatchString(name) {
		t.Errorf("generated name %q, want NodeLaunchTemplate_ and 12 characters", name)
	}
	if res.PhysicalID != res.Attributes["LaunchTemplateId"] || !strings.HasPrefix(res.PhysicalID, "lt-") {
		t.Errorf("Ref %q, LaunchTemplateId %q: want the template's ID", res.PhysicalID, res.Attributes["LaunchTemplateId"])
	}
	if res.Attributes["LatestVersionNumber"] != "1" || res.Attributes["DefaultVersionNumber"] != "1" {
		t.Errorf("attributes %v, want versions 1", res.Attributes)
	}
	v := describeVersion(t, e, res.PhysicalID, "1")
	d := v.LaunchTemplateData
	if aws.ToString(d.ImageId) != "ami-0123456789abcdef0" || d.InstanceType != "m5.large" || aws.ToString(d.UserData) != nodeUserData ||
		aws.ToString(d.IamInstanceProfile.Arn) != "arn:aws:iam::111122223333:instance-profile/nodes" ||
		d.MetadataOptions.HttpTokens != "required" || aws.ToInt32(d.MetadataOptions.HttpPutResponseHopLimit) != 2 ||
		len(d.NetworkInterfaces) != 1 || d.NetworkInterfaces[0].Groups[0] != "sg-0123456789abcdef0" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || aws.ToString(d.TagSpecifications[0].Tags[0].Value) != "nodes-NodeGroup-Node" {
		t.Errorf("version 1's data is not the template's: %+v", d)
	}
	lts, err := e.cl.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{res.PhysicalID}})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for _, tag := range lts.LaunchTemplates[0].Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if tags["aws:cloudformation:stack-name"] != "nodes" || tags["aws:cloudformation:logical-id"] != "NodeLaunchTemplate" || tags["team"] != "infra" {
		t.Errorf("template tags %v, want the stack's", tags)
	}

	// A new image: version 2, made the default.
	c2, _ := e.call("AWS::EC2::LaunchTemplate", "NodeLaunchTemplate", map[string]any{"LaunchTemplateData": ltData("ami-0fedcba9876543210")})
	res2, err := p.Update(ctx, c2, res, props)
	if err != nil {
		t.Fatal(err)
	}
	if res2.PhysicalID != res.PhysicalID || res2.Attributes["LatestVersionNumber"] != "2" || res2.Attributes["DefaultVersionNumber"] != "2" {
		t.Errorf("after update: %+v, want the same template at version 2, the default", res2)
	}
	if got := aws.ToString(describeVersion(t, e, res.PhysicalID, "$Default").LaunchTemplateData.ImageId); got != "ami-0fedcba9876543210" {
		t.Errorf("default version's image %s, want the new one", got)
	}
	// The same data again: no new version.
	if res3, err := p.Update(ctx, c2, res2, c2.Properties); err != nil || res3.Attributes["LatestVersionNumber"] != "2" {
		t.Errorf("unchanged update: %+v, %v; want version 2 still", res3, err)
	}
	// Another name needs another template.
	c3, _ := e.call("AWS::EC2::LaunchTemplate", "NodeLaunchTemplate", map[string]any{"LaunchTemplateName": "nodes", "LaunchTemplateData": ltData("ami-0fedcba9876543210")})
	if _, err := p.Update(ctx, c3, res2, c2.Properties); !errors.Is(err, ErrReplace) {
		t.Errorf("renaming: %v, want ErrReplace", err)
	}

	if err := p.Delete(ctx, c, res2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{res.PhysicalID}}); err == nil {
		t.Error("the template is still described after Delete")
	}
	if err := p.Delete(ctx, c, res2); err != nil {
		t.Errorf("deleting it again: %v, want no error (already gone)", err)
	}
	// A resource whose creation failed has no ID: nothing to delete.
	for _, typ := range []string{"AWS::EC2::LaunchTemplate", "AWS::AutoScaling::AutoScalingGroup", "AWS::EKS::Nodegroup", "AWS::EKS::AccessEntry"} {
		if err := e.provisioner(typ).Delete(ctx, c, Result{}); err != nil {
			t.Errorf("%s: deleting a resource never made: %v", typ, err)
		}
	}
}

func describeVersion(t *testing.T, e *resEnv, id, version string) ec2types.LaunchTemplateVersion {
	t.Helper()
	out, err := e.cl.EC2.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{version}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.LaunchTemplateVersions) != 1 {
		t.Fatalf("version %s of %s: %d versions", version, id, len(out.LaunchTemplateVersions))
	}
	return out.LaunchTemplateVersions[0]
}

func TestLaunchTemplateRefusesBadProperties(t *testing.T) {
	e := newResEnv(t)
	with := func(edit func(d map[string]any)) map[string]any {
		d := ltData("ami-0123456789abcdef0")
		edit(d)
		return map[string]any{"LaunchTemplateData": d}
	}
	for _, tc := range []struct {
		name  string
		props map[string]any
		want  string
	}{
		{"no data", map[string]any{"LaunchTemplateName": "nodes"}, "#: required key [LaunchTemplateData] not found"},
		{"unknown property", map[string]any{"LaunchTemplateData": ltData("ami-1"), "Colour": "blue"}, "#: extraneous key [Colour] is not permitted"},
		{"unsupported data field", with(func(d map[string]any) { d["Placement"] = map[string]any{"GroupName": "pg"} }),
			"#/LaunchTemplateData: extraneous key [Placement] is not permitted"},
		{"hop limit not a number", with(func(d map[string]any) {
			d["MetadataOptions"] = map[string]any{"HttpPutResponseHopLimit": "two"}
		}), `#/LaunchTemplateData/MetadataOptions/HttpPutResponseHopLimit: expected type: Integer, found: "two"`},
		{"network interfaces not a list", with(func(d map[string]any) { d["NetworkInterfaces"] = map[string]any{} }),
			"#/LaunchTemplateData/NetworkInterfaces: expected type: JSONArray, found: JSONObject"},
		{"template tags of instances", map[string]any{"LaunchTemplateData": ltData("ami-1"), "TagSpecifications": []any{
			map[string]any{"ResourceType": "instance", "Tags": []any{}}}}, "#/TagSpecifications/0/ResourceType"},
		{"EC2 refuses", with(func(d map[string]any) { d["UserData"] = "not base64!" }), "Invalid BASE64 encoding of user data."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := e.call("AWS::EC2::LaunchTemplate", "NodeLaunchTemplate", tc.props)
			_, err := e.provisioner("AWS::EC2::LaunchTemplate").Create(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("error %q names the endpoint", err)
			}
		})
	}
}
