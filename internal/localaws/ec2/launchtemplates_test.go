package ec2

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// newLTClient serves launch templates on an EC2 endpoint (with e for the rest) and
// returns the real SDK client for it.
func newLTClient(t *testing.T, lt *LaunchTemplates, e *EC2) *ec2.Client {
	t.Helper()
	srv := httptest.NewServer(e.WithLaunchTemplates(lt))
	t.Cleanup(srv.Close)
	return ec2.NewFromConfig(awstest.SDKConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// Every launch template operation round-trips through the real SDK: versions number
// from 1, SourceVersion inherits, $Latest and $Default resolve, the data comes back
// as it was sent.
func TestLaunchTemplatesWithTheAWSClient(t *testing.T) {
	ctx := context.Background()
	lt := NewLaunchTemplates(awstest.Account)
	c := newLTClient(t, lt, New(awstest.Account))
	created, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("ng1"),
		LaunchTemplateData: awstest.NodeTemplateData("#!/bin/bash\necho v1\n"),
		VersionDescription: aws.String("first"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: aws.String("eks:cluster-name"), Value: aws.String("c1")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := created.LaunchTemplate
	if tmpl == nil || !ltIDRE.MatchString(aws.ToString(tmpl.LaunchTemplateId)) || aws.ToString(tmpl.LaunchTemplateName) != "ng1" ||
		aws.ToInt64(tmpl.DefaultVersionNumber) != 1 || aws.ToInt64(tmpl.LatestVersionNumber) != 1 || tmpl.CreateTime == nil ||
		len(tmpl.Tags) != 1 || aws.ToString(tmpl.Tags[0].Key) != "eks:cluster-name" {
		t.Fatalf("CreateLaunchTemplate gave %+v", tmpl)
	}
	id := aws.ToString(tmpl.LaunchTemplateId)

	// Version 2 from version 1, changing only the user data.
	v2, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateId: aws.String(id), SourceVersion: aws.String("1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String(base64.StdEncoding.EncodeToString([]byte("v2")))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := v2.LaunchTemplateVersion; aws.ToInt64(v.VersionNumber) != 2 || aws.ToBool(v.DefaultVersion) ||
		aws.ToString(v.LaunchTemplateData.ImageId) != "ami-0123456789abcdef0" || v.LaunchTemplateData.InstanceType != ec2types.InstanceTypeM5Large {
		t.Fatalf("version 2 = %+v, data %+v", v, v.LaunchTemplateData)
	}
	// Version 3 without a source holds only what it is given.
	if _, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateName: aws.String("ng1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeT3Small},
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		versions []string
		want     []int64
	}{
		{nil, []int64{3, 2, 1}},
		{[]string{"$Latest"}, []int64{3}},
		{[]string{"$Default"}, []int64{1}},
		{[]string{"2", "$Latest", "3"}, []int64{3, 2}},
	} {
		out, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: tc.versions})
		if err != nil {
			t.Fatalf("versions %v: %v", tc.versions, err)
		}
		var got []int64
		for _, v := range out.LaunchTemplateVersions {
			got = append(got, aws.ToInt64(v.VersionNumber))
		}
		if !slicesEqual(got, tc.want) {
			t.Errorf("versions %v: got %v, want %v", tc.versions, got, tc.want)
		}
	}

	// Version 1's data, every field the node needs.
	out, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("ng1"), Versions: []string{"1"}})
	if err != nil {
		t.Fatal(err)
	}
	v1 := out.LaunchTemplateVersions[0]
	d := v1.LaunchTemplateData
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	switch {
	case !aws.ToBool(v1.DefaultVersion), aws.ToString(v1.VersionDescription) != "first":
		t.Errorf("version 1 = %+v", v1)
	case string(ud) != "#!/bin/bash\necho v1\n":
		t.Errorf("user data = %q", ud)
	case d.IamInstanceProfile == nil || aws.ToString(d.IamInstanceProfile.Name) != "nodes":
		t.Errorf("instance profile = %+v", d.IamInstanceProfile)
	case d.MetadataOptions == nil || d.MetadataOptions.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired || aws.ToInt32(d.MetadataOptions.HttpPutResponseHopLimit) != 2:
		t.Errorf("metadata options = %+v", d.MetadataOptions)
	case len(d.NetworkInterfaces) != 1 || aws.ToInt32(d.NetworkInterfaces[0].DeviceIndex) != 0 || !slicesEqual(d.NetworkInterfaces[0].Groups, []string{"sg-1", "sg-2"}):
		t.Errorf("network interfaces = %+v", d.NetworkInterfaces)
	case len(d.TagSpecifications) != 1 || d.TagSpecifications[0].ResourceType != ec2types.ResourceTypeInstance || aws.ToString(d.TagSpecifications[0].Tags[0].Value) != "ng1":
		t.Errorf("tag specifications = %+v", d.TagSpecifications)
	case len(d.BlockDeviceMappings) != 1 || aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || d.BlockDeviceMappings[0].Ebs.VolumeType != ec2types.VolumeTypeGp3:
		t.Errorf("block devices = %+v", d.BlockDeviceMappings)
	}

	// The default version moves; Resolve (what Auto Scaling launches) follows.
	if _, err := c.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String(id), DefaultVersion: aws.String("2")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		want    int64
	}{{"", 2}, {"$Default", 2}, {"$Latest", 3}, {"1", 1}} {
		r, err := lt.Resolve("", "ng1", tc.version)
		if err != nil || r.Version != tc.want || r.ID != id {
			t.Errorf("Resolve(%q) = %+v, %v; want version %d", tc.version, r, err, tc.want)
		}
	}
	r, _ := lt.Resolve(id, "", "2")
	if ud, _ := r.Data.DecodedUserData(); string(ud) != "v2" || r.Data.InstanceTags()["eks:nodegroup-name"] != "ng1" {
		t.Errorf("version 2 resolves to user data %q, tags %v", ud, r.Data.InstanceTags())
	}

	list, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:eks:cluster-name"), Values: []string{"c1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.LaunchTemplates) != 1 || aws.ToInt64(list.LaunchTemplates[0].DefaultVersionNumber) != 2 || aws.ToInt64(list.LaunchTemplates[0].LatestVersionNumber) != 3 {
		t.Errorf("DescribeLaunchTemplates = %+v", list.LaunchTemplates)
	}
	if _, err := c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("ng1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{id}}); err == nil {
		t.Error("a deleted template is still described")
	} else if code, _ := awstest.APICode(t, err); code != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("describing a deleted template: %v", err)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The SDK's ClientToken makes creation idempotent: the same token and parameters give
// the same template, other parameters an error.
func TestLaunchTemplateClientToken(t *testing.T) {
	ctx := context.Background()
	c := newLTClient(t, NewLaunchTemplates(awstest.Account), New(awstest.Account))
	in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng1"), ClientToken: aws.String("tok-1"), LaunchTemplateData: awstest.NodeTemplateData("x")}
	a, err := c.CreateLaunchTemplate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateLaunchTemplate(ctx, in)
	if err != nil || aws.ToString(a.LaunchTemplate.LaunchTemplateId) != aws.ToString(b.LaunchTemplate.LaunchTemplateId) {
		t.Fatalf("retry with the same token: %v, %+v", err, b)
	}
	in.LaunchTemplateData = awstest.NodeTemplateData("y")
	_, err = c.CreateLaunchTemplate(ctx, in)
	if code, _ := awstest.APICode(t, err); code != "IdempotentParameterMismatch" {
		t.Errorf("same token, other parameters: %v", err)
	}
	vin := &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: aws.String("ng1"), ClientToken: aws.String("tok-2"), LaunchTemplateData: awstest.NodeTemplateData("z")}
	v1, err := c.CreateLaunchTemplateVersion(ctx, vin)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.CreateLaunchTemplateVersion(ctx, vin)
	if err != nil || aws.ToInt64(v1.LaunchTemplateVersion.VersionNumber) != 2 || aws.ToInt64(v2.LaunchTemplateVersion.VersionNumber) != 2 {
		t.Fatalf("version retry: %v, %+v, %+v", err, v1.LaunchTemplateVersion, v2)
	}
}

func TestLaunchTemplateErrors(t *testing.T) {
	ctx := context.Background()
	c := newLTClient(t, NewLaunchTemplates(awstest.Account), New(awstest.Account))
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng1"), LaunchTemplateData: awstest.NodeTemplateData("x")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		code   string
		status int
	}{
		{"duplicate name", func() error {
			_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng1"), LaunchTemplateData: awstest.NodeTemplateData("x")})
			return err
		}, "InvalidLaunchTemplateName.AlreadyExistsException", http.StatusBadRequest},
		{"malformed name", func() error {
			_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("a b"), LaunchTemplateData: awstest.NodeTemplateData("x")})
			return err
		}, "InvalidLaunchTemplateName.MalformedException", http.StatusBadRequest},
		{"user data not base64", func() error {
			_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng2"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String("#!/bin/bash")}})
			return err
		}, "InvalidUserData.Malformed", http.StatusBadRequest},
		{"unsupported data", func() error {
			_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng2"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{KernelId: aws.String("aki-1")}})
			return err
		}, "InvalidParameterValue", http.StatusBadRequest},
		{"unknown ID", func() error {
			_, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String("lt-0123456789abcdef0"), LaunchTemplateData: awstest.NodeTemplateData("x")})
			return err
		}, "InvalidLaunchTemplateId.NotFound", http.StatusBadRequest},
		{"malformed ID", func() error {
			_, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-1")})
			return err
		}, "InvalidLaunchTemplateId.Malformed", http.StatusBadRequest},
		{"unknown name", func() error {
			_, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("nope")})
			return err
		}, "InvalidLaunchTemplateName.NotFoundException", http.StatusBadRequest},
		{"unknown version", func() error {
			_, err := c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("ng1"), Versions: []string{"7"}})
			return err
		}, "InvalidLaunchTemplateId.VersionNotFound", http.StatusBadRequest},
		{"unknown source version", func() error {
			_, err := c.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: aws.String("ng1"), SourceVersion: aws.String("9"), LaunchTemplateData: awstest.NodeTemplateData("x")})
			return err
		}, "InvalidLaunchTemplateId.VersionNotFound", http.StatusBadRequest},
		{"both ID and name", func() error {
			_, err := c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("ng1"), LaunchTemplateId: aws.String("lt-0123456789abcdef0")})
			return err
		}, "InvalidParameterCombination", http.StatusBadRequest},
		{"dry run", func() error {
			_, err := c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{DryRun: aws.Bool(true)})
			return err
		}, "DryRunOperation", http.StatusPreconditionFailed},
	} {
		err := tc.call()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if code, status := awstest.APICode(t, err); code != tc.code || status != tc.status {
			t.Errorf("%s: got %s/%d (%v), want %s/%d", tc.name, code, status, err, tc.code, tc.status)
		}
	}
	// Other EC2 actions still reach the instance inventory.
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("DescribeInstances beside launch templates: %v", err)
	}
}

// DescribeLaunchTemplates pages with MaxResults and NextToken, never repeating a token.
func TestLaunchTemplatePagination(t *testing.T) {
	ctx := context.Background()
	c := newLTClient(t, NewLaunchTemplates(awstest.Account), New(awstest.Account))
	for _, n := range []string{"aaa", "bbb", "ccc", "ddd", "eee"} {
		if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(n), LaunchTemplateData: awstest.NodeTemplateData(n)}); err != nil {
			t.Fatal(err)
		}
	}
	p := ec2.NewDescribeLaunchTemplatesPaginator(c, &ec2.DescribeLaunchTemplatesInput{MaxResults: aws.Int32(2)})
	seen := map[string]bool{}
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, lt := range out.LaunchTemplates {
			seen[aws.ToString(lt.LaunchTemplateName)] = true
		}
	}
	if pages != 3 || len(seen) != 5 {
		t.Errorf("%d pages, templates %v", pages, seen)
	}
}
