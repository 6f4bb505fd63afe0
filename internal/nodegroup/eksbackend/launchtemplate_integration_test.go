package eksbackend_test

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
)

// userTemplates is an EC2 with the users' launch templates, by name.
type userTemplates map[string]struct {
	id       string
	versions []ec2types.ResponseLaunchTemplateData
}

func (u userTemplates) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	for name, lt := range u {
		if name != aws.ToString(in.LaunchTemplateName) && lt.id != aws.ToString(in.LaunchTemplateId) {
			continue
		}
		n := len(lt.versions)
		switch v := in.Versions[0]; v {
		case "$Latest":
		case "$Default":
			n = 1
		default:
			if n, _ = strconv.Atoi(v); n < 1 || n > len(lt.versions) {
				return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateId.VersionNotFound", Message: "no version " + v}
			}
		}
		return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{
			LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(name), VersionNumber: aws.Int64(int64(n)), LaunchTemplateData: &lt.versions[n-1],
		}}}, nil
	}
	return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "At least one of the launch templates specified in the request does not exist."}
}

// A managed node group with the user's launch template, as eksctl creates one, through
// the SDK against a real API server: what EKS refuses is refused naming the template,
// the group keeps the reference, DescribeNodegroup reports it, and a new version of
// the template is an UpdateNodegroupVersion.
func TestLaunchTemplateNodegroups(t *testing.T) {
	ec2 := userTemplates{
		"eksctl-demo-nodegroup-mng": {id: "lt-0000000000000000a", versions: []ec2types.ResponseLaunchTemplateData{
			{MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptions{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired}},
			{ImageId: aws.String("ami-0fedcba9876543210"), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\nnodeadm init\n")))},
		}},
		"with-profile": {id: "lt-0000000000000000b", versions: []ec2types.ResponseLaunchTemplateData{
			{IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecification{Name: aws.String("p")}},
		}},
		"with-type": {id: "lt-0000000000000000c", versions: []ec2types.ResponseLaunchTemplateData{{InstanceType: ec2types.InstanceTypeT3Medium}}},
	}
	c, kc := setup(t, func(b *eksbackend.Backend) { b.WithLaunchTemplates(ec2) })
	ctx := t.Context()
	input := func(name string, lt ekstypes.LaunchTemplateSpecification) *awseks.CreateNodegroupInput {
		return &awseks.CreateNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String(name), NodeRole: aws.String("arn:aws:iam::000000000000:role/demo-node"),
			Subnets: []string{}, LaunchTemplate: &lt}
	}
	for _, tc := range []struct {
		name   string
		in     *awseks.CreateNodegroupInput
		reason string
	}{
		{"unknown", input("r1", ekstypes.LaunchTemplateSpecification{Name: aws.String("nope")}), `launchTemplate: launch template "nope" version $Default`},
		{"unknown version", input("r2", ekstypes.LaunchTemplateSpecification{Id: aws.String("lt-0000000000000000a"), Version: aws.String("9")}), "launch template lt-0000000000000000a version 9"},
		{"instance profile", input("r3", ekstypes.LaunchTemplateSpecification{Name: aws.String("with-profile")}), "Launch template should not specify an instance profile"},
		{"instance type twice", func() *awseks.CreateNodegroupInput {
			in := input("r4", ekstypes.LaunchTemplateSpecification{Name: aws.String("with-type")})
			in.InstanceTypes = []string{"m5.large"}
			return in
		}(), "instance type t3.medium is in launch template"},
		{"custom AMI with an amiType", func() *awseks.CreateNodegroupInput {
			in := input("r5", ekstypes.LaunchTemplateSpecification{Name: aws.String("eksctl-demo-nodegroup-mng"), Version: aws.String("2")})
			in.AmiType = ekstypes.AMITypesAl2023X8664Standard
			return in
		}(), "leave amiType out, or give CUSTOM"},
		{"CUSTOM without an AMI", func() *awseks.CreateNodegroupInput {
			in := input("r6", ekstypes.LaunchTemplateSpecification{Name: aws.String("eksctl-demo-nodegroup-mng"), Version: aws.String("1")})
			in.AmiType = ekstypes.AMITypesCustom
			return in
		}(), "CUSTOM needs a launch template that names an ImageId"},
	} {
		_, err := c.CreateNodegroup(ctx, tc.in)
		if apiCode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: CreateNodegroup = %v, want InvalidParameterException saying %q", tc.name, err, tc.reason)
		}
	}
	var list v1alpha1.NodeGroupList
	if err := kc.List(ctx, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("refused requests made NodeGroups: %d, %v", len(list.Items), err)
	}

	// eksctl's managed group: its own template by ID, version 1, no instance types.
	out, err := c.CreateNodegroup(ctx, input("mng", ekstypes.LaunchTemplateSpecification{Id: aws.String("lt-0000000000000000a"), Version: aws.String("1")}))
	if err != nil {
		t.Fatal(err)
	}
	if lt := out.Nodegroup.LaunchTemplate; lt == nil || aws.ToString(lt.Id) != "lt-0000000000000000a" || aws.ToString(lt.Version) != "1" ||
		out.Nodegroup.AmiType != ekstypes.AMITypesAl2023X8664Standard || out.Nodegroup.DiskSize != nil {
		t.Errorf("CreateNodegroup = %+v (launch template %+v)", out.Nodegroup, out.Nodegroup.LaunchTemplate)
	}
	var ng v1alpha1.NodeGroup
	if err := kc.Get(ctx, client.ObjectKey{Name: "mng"}, &ng); err != nil {
		t.Fatal(err)
	}
	if ref := ng.Spec.Template.LaunchTemplate; ref == nil || ref.ID != "lt-0000000000000000a" || ref.Version != "1" || len(ng.Spec.Template.InstanceTypes) != 0 {
		t.Errorf("spec.template = %+v", ng.Spec.Template)
	}
	// The controller reads the template: DescribeNodegroup names it and its type.
	ng.Status.SourceLaunchTemplate = &v1alpha1.SourceLaunchTemplateStatus{Name: "eksctl-demo-nodegroup-mng", ID: "lt-0000000000000000a", Version: "1"}
	ng.Status.InstanceType = "m5.large"
	if err := kc.Status().Update(ctx, &ng); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeNodegroup(ctx, &awseks.DescribeNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("mng")})
	if err != nil {
		t.Fatal(err)
	}
	if lt := d.Nodegroup.LaunchTemplate; lt == nil || aws.ToString(lt.Name) != "eksctl-demo-nodegroup-mng" || aws.ToString(lt.Version) != "1" || d.Nodegroup.InstanceTypes[0] != "m5.large" {
		t.Errorf("DescribeNodegroup = launch template %+v instance types %v", d.Nodegroup.LaunchTemplate, d.Nodegroup.InstanceTypes)
	}

	// A new version of the template is a version update; another template is refused.
	_, err = c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("mng"),
		LaunchTemplate: &ekstypes.LaunchTemplateSpecification{Id: aws.String("lt-0000000000000000c"), Version: aws.String("1")}})
	if apiCode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), "not another template") {
		t.Errorf("UpdateNodegroupVersion to another template = %v", err)
	}
	up, err := c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("mng"),
		LaunchTemplate: &ekstypes.LaunchTemplateSpecification{Name: aws.String("eksctl-demo-nodegroup-mng"), Version: aws.String("2")}})
	if err != nil {
		t.Fatal(err)
	}
	var params []string
	for _, p := range up.Update.Params {
		params = append(params, string(p.Type)+"="+aws.ToString(p.Value))
	}
	if up.Update.Type != ekstypes.UpdateTypeVersionUpdate || strings.Join(params, ",") != "LaunchTemplateName=eksctl-demo-nodegroup-mng,LaunchTemplateVersion=2,Force=false" {
		t.Errorf("UpdateNodegroupVersion = %s %v", up.Update.Type, params)
	}
	if err := kc.Get(ctx, client.ObjectKey{Name: "mng"}, &ng); err != nil || ng.Spec.Template.LaunchTemplate.Version != "2" {
		t.Errorf("spec.template.launchTemplate = %+v, %v", ng.Spec.Template.LaunchTemplate, err)
	}

	// A custom AMI in the template makes the group CUSTOM, with no release.
	out, err = c.CreateNodegroup(ctx, input("custom", ekstypes.LaunchTemplateSpecification{Name: aws.String("eksctl-demo-nodegroup-mng"), Version: aws.String("2")}))
	if err != nil {
		t.Fatal(err)
	}
	if out.Nodegroup.AmiType != ekstypes.AMITypesCustom || aws.ToString(out.Nodegroup.ReleaseVersion) != "" {
		t.Errorf("CreateNodegroup of a custom AMI = amiType %s release %q", out.Nodegroup.AmiType, aws.ToString(out.Nodegroup.ReleaseVersion))
	}
	_, err = c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("custom")})
	if apiCode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), "custom AMI") {
		t.Errorf("UpdateNodegroupVersion of a custom AMI to a release = %v", err)
	}
}
