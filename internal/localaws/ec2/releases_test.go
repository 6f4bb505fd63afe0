package ec2

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// The catalog's families are the API group's, spelled the same.
func TestReleaseFamiliesAreTheAPIs(t *testing.T) {
	var api []string
	for _, f := range v1alpha1.AMIFamilies {
		api = append(api, string(f))
	}
	if !slices.Equal(api, Families) {
		t.Errorf("families %q, API %q", Families, api)
	}
}

func TestReleaseCatalog(t *testing.T) {
	c := NewReleaseCatalog("1.36", "1.37", "bad", "1.37")
	if got := c.KubernetesVersions(); !slices.Equal(got, []string{"1.36", "1.37"}) {
		t.Errorf("versions %q", got)
	}
	rs := c.Releases("1.37")
	if len(rs) != 2*len(Families) {
		t.Fatalf("releases %+v", rs)
	}
	idRE := regexp.MustCompile(`^ami-[0-9a-f]{17}$`)
	seen := map[string]bool{}
	for _, r := range rs {
		if !idRE.MatchString(r.ImageID) || seen[r.ImageID] || r.KubernetesVersion != "1.37" || r.Architecture != "x86_64" || r.CreationDate.IsZero() {
			t.Errorf("release %+v", r)
		}
		seen[r.ImageID] = true
		if got, ok := c.ByImageID(r.ImageID); !ok || got != r {
			t.Errorf("ByImageID(%s) = %+v %v", r.ImageID, got, ok)
		}
		if got, ok := c.ByReleaseVersion("1.37", r.Family, r.ReleaseVersion); !ok || got != r {
			t.Errorf("ByReleaseVersion(%s, %s) = %+v %v", r.Family, r.ReleaseVersion, got, ok)
		}
	}
	tests := []struct {
		family, name, release string
	}{
		{FamilyAmazonLinux2, "amazon-eks-node-1.37-v20261015", "1.37.1-20261015"},
		{FamilyAmazonLinux2023, "amazon-eks-node-al2023-x86_64-standard-1.37-v20261015", "1.37.1-20261015"},
		{FamilyBottlerocket, "bottlerocket-aws-k8s-1.37-x86_64-v1.50.0-" + commitOf("1.50.0"), "1.50.0-" + commitOf("1.50.0")},
		{FamilyWindows, "Windows_Server-2022-English-Core-EKS_Optimized-1.37-2026.10.15", "1.37.1-20261015"},
	}
	for _, tt := range tests {
		r, ok := c.Latest("1.37", tt.family)
		if !ok || r.Name != tt.name || r.ReleaseVersion != tt.release || r.Family != tt.family {
			t.Errorf("Latest(%s) = %+v %v, want %s %s", tt.family, r, ok, tt.name, tt.release)
		}
		if again := NewReleaseCatalog("1.37"); !slices.Contains(again.Releases("1.37"), r) {
			t.Errorf("%s: another catalog has other images", tt.family)
		}
	}
	// A Bottlerocket release version names no Kubernetes version: "" takes the newest.
	br, _ := c.Latest("1.37", FamilyBottlerocket)
	if got, ok := c.ByReleaseVersion("", FamilyBottlerocket, br.ReleaseVersion); !ok || got.KubernetesVersion != "1.37" {
		t.Errorf("ByReleaseVersion of Bottlerocket = %+v", got)
	}
	if _, ok := c.Latest("1.30", FamilyAmazonLinux2); ok {
		t.Error("a version the catalog lacks has a release")
	}
	if _, ok := c.Latest("1.37", "Ubuntu"); ok {
		t.Error("an unknown family has a release")
	}
	if _, ok := c.ByReleaseVersion("1.37", FamilyAmazonLinux2, "1.37.9-20200101"); ok {
		t.Error("an unknown release version is found")
	}
	if len(c.All()) != 2*len(rs) {
		t.Errorf("All has %d", len(c.All()))
	}
}

// DescribeImages lists the catalog's images as Amazon's, beside the account's own, as
// eksctl and the AWS CLI look them up.
func TestDescribeImagesOfTheCatalog(t *testing.T) {
	cat := NewReleaseCatalog("1.37")
	e := taggedFleet(t).WithReleases(cat)
	client := newLTClient(t, NewLaunchTemplates(awstest.Account), e)
	al2023, _ := cat.Latest("1.37", FamilyAmazonLinux2023)
	win, _ := cat.Latest("1.37", FamilyWindows)
	const instanceAMI = "ami-00000000000000000"
	var all []string
	for _, r := range cat.All() {
		all = append(all, r.ImageID)
	}
	ids := func(out *ec2.DescribeImagesOutput) []string {
		var got []string
		for _, im := range out.Images {
			got = append(got, aws.ToString(im.ImageId))
		}
		return got
	}
	tests := []struct {
		name string
		in   ec2.DescribeImagesInput
		want []string
	}{
		{"by ID", ec2.DescribeImagesInput{ImageIds: []string{al2023.ImageID}}, []string{al2023.ImageID}},
		{"owner amazon", ec2.DescribeImagesInput{Owners: []string{"amazon"}}, all},
		{"owner by ID", ec2.DescribeImagesInput{Owners: []string{AmazonAccountID}}, all},
		{"owner self", ec2.DescribeImagesInput{Owners: []string{"self"}}, []string{instanceAMI}},
		{"another owner's image by ID", ec2.DescribeImagesInput{Owners: []string{"self"}, ImageIds: []string{al2023.ImageID}}, nil},
		{"name glob", ec2.DescribeImagesInput{Owners: []string{"amazon"},
			Filters: []ec2types.Filter{filter("name", "amazon-eks-node-al2023-x86_64-standard-1.37-v*")}}, nil},
		{"owner-alias", ec2.DescribeImagesInput{Filters: []ec2types.Filter{filter("owner-alias", "amazon"), filter("name", win.Name)}}, []string{win.ImageID}},
		{"image-id filter", ec2.DescribeImagesInput{Filters: []ec2types.Filter{filter("image-id", al2023.ImageID, instanceAMI)}},
			slices.Sorted(slices.Values([]string{al2023.ImageID, instanceAMI}))},
	}
	var al2023s []string
	for _, r := range cat.Releases("1.37") {
		if r.Family == FamilyAmazonLinux2023 {
			al2023s = append(al2023s, r.ImageID)
		}
	}
	tests[5].want = slices.Sorted(slices.Values(al2023s))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeImages(t.Context(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(out); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	out, err := client.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{al2023.ImageID, win.ImageID}})
	if err != nil || len(out.Images) != 2 {
		t.Fatalf("%v %+v", err, out)
	}
	for _, im := range out.Images {
		r, _ := cat.ByImageID(aws.ToString(im.ImageId))
		if aws.ToString(im.Name) != r.Name || aws.ToString(im.Description) != r.Description || aws.ToString(im.OwnerId) != AmazonAccountID ||
			aws.ToString(im.ImageOwnerAlias) != "amazon" || !aws.ToBool(im.Public) || aws.ToString(im.CreationDate) != "2026-10-15T04:12:00.000Z" {
			t.Errorf("image %+v, release %+v", im, r)
		}
		// eksctl finds the root volume among the mappings by the root device's name.
		if !slices.ContainsFunc(im.BlockDeviceMappings, func(m ec2types.BlockDeviceMapping) bool {
			return aws.ToString(m.DeviceName) == aws.ToString(im.RootDeviceName) && m.Ebs != nil && aws.ToInt32(m.Ebs.VolumeSize) > 0
		}) {
			t.Errorf("%s: no root volume %s in %+v", r.Name, aws.ToString(im.RootDeviceName), im.BlockDeviceMappings)
		}
		// EC2 writes the platform in lower case, whatever the SDK's enumeration spells.
		if windows := r.Family == FamilyWindows; windows != strings.EqualFold(string(im.Platform), "windows") {
			t.Errorf("%s: platform %q", r.Name, im.Platform)
		}
	}
}
