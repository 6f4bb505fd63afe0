package ec2

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// templatedFleet is taggedFleet with a tagged launch template whose image
// (awstest.NodeTemplateData's) no instance runs.
func templatedFleet(t *testing.T) (*ec2.Client, string) {
	t.Helper()
	e := taggedFleet(t)
	client := newLTClient(t, NewLaunchTemplates(awstest.Account), e)
	out, err := client.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("ng1"), LaunchTemplateData: awstest.NodeTemplateData("#!/bin/bash\n"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: aws.String("eks:cluster-name"), Value: aws.String("demo")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, aws.ToString(out.LaunchTemplate.LaunchTemplateId)
}

func TestDescribeImagesWithTheAWSClient(t *testing.T) {
	client, _ := templatedFleet(t)
	const instanceAMI, templateAMI = "ami-00000000000000000", "ami-0123456789abcdef0"
	out, err := client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{templateAMI}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Images) != 1 {
		t.Fatalf("images = %+v", out.Images)
	}
	im := out.Images[0]
	if aws.ToString(im.ImageId) != templateAMI || aws.ToString(im.Name) != templateAMI || im.State != ec2types.ImageStateAvailable ||
		aws.ToString(im.OwnerId) != awstest.Account || im.Architecture != ec2types.ArchitectureValuesX8664 ||
		im.RootDeviceType != ec2types.DeviceTypeEbs || im.VirtualizationType != ec2types.VirtualizationTypeHvm || aws.ToBool(im.Public) {
		t.Errorf("image = %+v", im)
	}
	tests := []struct {
		name string
		in   ec2.DescribeImagesInput
		want []string
	}{
		{"all of self", ec2.DescribeImagesInput{Owners: []string{"self"}}, []string{instanceAMI, templateAMI}},
		{"owner self", ec2.DescribeImagesInput{Owners: []string{"self"}}, []string{instanceAMI, templateAMI}},
		{"owner account", ec2.DescribeImagesInput{Owners: []string{awstest.Account}}, []string{instanceAMI, templateAMI}},
		{"owner amazon by ID", ec2.DescribeImagesInput{ImageIds: []string{templateAMI}, Owners: []string{"amazon"}}, nil},
		{"image-id", ec2.DescribeImagesInput{Filters: []ec2types.Filter{filter("image-id", instanceAMI)}}, []string{instanceAMI}},
		{"name glob", ec2.DescribeImagesInput{Filters: []ec2types.Filter{filter("name", "ami-0123*")}}, []string{templateAMI}},
		{"executable by and flags", ec2.DescribeImagesInput{Owners: []string{"self"}, ExecutableUsers: []string{"self"}, IncludeDeprecated: aws.Bool(true)}, []string{instanceAMI, templateAMI}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeImages(t.Context(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, im := range out.Images {
				got = append(got, aws.ToString(im.ImageId))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	var paged []string
	for p := ec2.NewDescribeImagesPaginator(client, &ec2.DescribeImagesInput{Owners: []string{"self"}, MaxResults: aws.Int32(6)}); p.HasMorePages(); {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range page.Images {
			paged = append(paged, aws.ToString(im.ImageId))
		}
	}
	if !slices.Equal(paged, []string{instanceAMI, templateAMI}) {
		t.Errorf("paged = %q", paged)
	}
	_, err = client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"ami-0000000000000000f"}})
	wantAPIError(t, err, "InvalidAMIID.NotFound", "ami-0000000000000000f")
	_, err = client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{"image-1"}})
	wantAPIError(t, err, "InvalidAMIID.Malformed", "image-1")
	_, err = client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{MaxResults: aws.Int32(5)})
	wantAPIError(t, err, "InvalidParameterValue", "between 6 and 1000")
}

func TestDescribeTagsWithTheAWSClient(t *testing.T) {
	client, ltID := templatedFleet(t)
	id1, id2 := ec2Instance(1, "").ID, ec2Instance(2, "").ID
	type row struct{ id, kind, key, value string }
	all := []row{
		{id1, "instance", "Name", "ng-1-node"}, {id1, "instance", "eks:nodegroup-name", "ng-1"},
		{id1, "instance", "kubernetes.io/cluster/demo", "owned"},
		{id2, "instance", "Name", "ng-2-node"}, {id2, "instance", "eks:nodegroup-name", "ng-2"},
		{ltID, "launch-template", "eks:cluster-name", "demo"},
	}
	tests := []struct {
		name    string
		filters []ec2types.Filter
		want    []row
	}{
		{"all", nil, all},
		{"resource-id", []ec2types.Filter{filter("resource-id", id2)}, all[3:5]},
		{"resource-type", []ec2types.Filter{filter("resource-type", "launch-template")}, all[5:]},
		{"key", []ec2types.Filter{filter("key", "eks:*")}, []row{all[1], all[4], all[5]}},
		{"value", []ec2types.Filter{filter("value", "ng-1", "owned")}, []row{all[1], all[2]}},
		{"key and value", []ec2types.Filter{filter("key", "Name"), filter("value", "ng-2*")}, []row{all[3]}},
		{"tag:KEY picks resources", []ec2types.Filter{filter("tag:eks:nodegroup-name", "ng-2")}, all[3:5]},
		{"none", []ec2types.Filter{filter("resource-type", "subnet")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeTags(t.Context(), &ec2.DescribeTagsInput{Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for _, d := range out.Tags {
				got = append(got, row{aws.ToString(d.ResourceId), string(d.ResourceType), aws.ToString(d.Key), aws.ToString(d.Value)})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	var pages, n int
	for p := ec2.NewDescribeTagsPaginator(client, &ec2.DescribeTagsInput{MaxResults: aws.Int32(5)}); p.HasMorePages(); pages++ {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Tags)
	}
	if pages != 2 || n != len(all) {
		t.Errorf("%d tags in %d pages, want %d in 2", n, pages, len(all))
	}
	_, err := client.DescribeTags(t.Context(), &ec2.DescribeTagsInput{Filters: []ec2types.Filter{filter("colour", "red")}})
	wantAPIError(t, err, "InvalidParameterValue", "colour")
	_, err = client.DescribeTags(t.Context(), &ec2.DescribeTagsInput{NextToken: aws.String("!!")})
	wantAPIError(t, err, "InvalidParameterValue", "nextToken")
}

// The new actions refuse a parameter they do not read, and a MaxResults an action that
// does not page would not take.
func TestDescribeActionsRefuseUnknownParameters(t *testing.T) {
	e := localVPC(t)
	for _, form := range []string{
		"Action=DescribeInstanceAttribute&Version=2016-11-15&InstanceId=i-00000000000000001&Attribute=userData&Colour=red",
		"Action=DescribeAvailabilityZones&Version=2016-11-15&MaxResults=5",
		"Action=DescribeVpcs&Version=2016-11-15&Colour=red",
		"Action=DescribeSecurityGroups&Version=2016-11-15&Colour=red",
		"Action=DescribeImages&Version=2016-11-15&Colour=red",
		"Action=DescribeTags&Version=2016-11-15&ResourceId.1=i-00000000000000001",
	} {
		status, body := awstest.Post(t, e, form, true)
		if status != 400 || !strings.Contains(body, "<Code>UnknownParameter</Code>") {
			t.Errorf("%s: got %d %s", form, status, body)
		}
	}
}

// DescribeInstanceTypeOfferings, as eksctl asks it: a type in the region's zones.
func TestDescribeInstanceTypeOfferings(t *testing.T) {
	e := New("111122223333")
	e.Region = "us-west-2"
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	c := ec2.NewFromConfig(awstest.SDKConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	out, err := c.DescribeInstanceTypeOfferings(t.Context(), &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out.InstanceTypeOfferings {
		got = append(got, string(o.InstanceType)+"@"+aws.ToString(o.Location))
	}
	if want := []string{"m5.large@us-west-2a", "m5.large@us-west-2b", "m5.large@us-west-2c"}; !slices.Equal(got, want) {
		t.Errorf("offerings %v, want %v", got, want)
	}
	if _, err := c.DescribeInstanceTypeOfferings(t.Context(), &ec2.DescribeInstanceTypeOfferingsInput{LocationType: "moon"}); err == nil {
		t.Error("a location type that does not exist was taken")
	}
}
