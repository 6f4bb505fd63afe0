package nodegroup

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// eksctlUserData is the user data eksctl v0.230.0 puts in an AL2023 managed group's
// launch template when the group has preBootstrapCommands: a MIME multipart with one
// shell script part, which EKS merges before its own NodeConfig.
const eksctlUserData = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=//\r\n\r\n" +
	"--//\r\nContent-Type: text/x-shellscript\r\nContent-Type: charset=\"us-ascii\"\r\n\r\n#!/bin/bash\nset -ex\necho pre-bootstrap > /var/tmp/pre\n\r\n--//--\r\n"

// eksctlTemplate is the launch template data eksctl writes for an AL2023 managed node
// group (managed_launch_template.go): no ImageId, no instance type, IMDSv2, a gp3 root
// volume, tags for instances, volumes and network interfaces, the shared node security
// group.
func eksctlTemplate(userData string) *ec2types.RequestLaunchTemplateData {
	tags := func(rt ec2types.ResourceType) ec2types.LaunchTemplateTagSpecificationRequest {
		return ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: rt, Tags: []ec2types.Tag{
			{Key: aws.String("Name"), Value: aws.String("c1-ng1-Node")},
			{Key: aws.String("alpha.eksctl.io/nodegroup-name"), Value: aws.String("ng1")},
			{Key: aws.String("alpha.eksctl.io/nodegroup-type"), Value: aws.String("managed")},
		}}
	}
	d := &ec2types.RequestLaunchTemplateData{
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			Iops: aws.Int32(3000), Throughput: aws.Int32(125), VolumeSize: aws.Int32(80), VolumeType: ec2types.VolumeTypeGp3,
		}}},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpPutResponseHopLimit: aws.Int32(2), HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
		},
		SecurityGroupIds:  []string{"sg-0aaaaaaaaaaaaaaaa"},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{tags(ec2types.ResourceTypeInstance), tags(ec2types.ResourceTypeVolume), tags(ec2types.ResourceTypeNetworkInterface)},
	}
	if userData != "" {
		d.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(userData)))
	}
	return d
}

// putUserTemplate creates (or adds a version to) the user's launch template name.
func putUserTemplate(t *testing.T, c *fakeCloud, name string, d *ec2types.RequestLaunchTemplateData) {
	t.Helper()
	var err error
	if c.template("", name) == nil {
		_, err = c.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: d})
	} else {
		_, err = c.CreateLaunchTemplateVersion(context.Background(), &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: d})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ownTemplate is the latest data of the launch template the controller made for the
// group (the one that is not the user's).
func ownTemplate(t *testing.T, c *fakeCloud, user string) *ec2types.RequestLaunchTemplateData {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, tp := range c.templates {
		if name != user {
			return tp.versions[len(tp.versions)-1].data
		}
	}
	t.Fatal("the controller made no launch template")
	return nil
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (UPDATE_GOLDEN=1 rewrites it); got:\n%s", path, got)
	}
}

// An eksctl-shaped launch template: its user data is merged with EKS's bootstrap, its
// settings carried over, the instance type EKS's default since neither names one; a new
// version of it ($Latest) rolls the group.
func TestUserLaunchTemplateMergedAsEKS(t *testing.T) {
	const user = "eksctl-c1-nodegroup-ng1"
	ng := baseGroup(2)
	ng.Spec.Template.InstanceTypes = nil
	ng.Spec.Template.LaunchTemplate = &v1alpha1.LaunchTemplateRef{Name: user, Version: "$Latest"}
	h := newHarness(t, ng)
	putUserTemplate(t, h.cloud, user, eksctlTemplate(eksctlUserData))
	h.until("active", 40, active)

	d := ownTemplate(t, h.cloud, user)
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(d.UserData))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "usertemplate-eksctl-al2023.golden"), ud)
	// On AL2023 EKS's NodeConfig comes first and the user's parts after it, so that
	// a NodeConfig of the user's overrides EKS's (nodeadm merges in order, later wins);
	// the user's scripts run in cloud-init, whatever their place.
	if m, i := strings.Index(string(ud), "kind: NodeConfig"), strings.Index(string(ud), "pre-bootstrap"); i < 0 || m < 0 || m > i {
		t.Errorf("want EKS's NodeConfig, then the user's script:\n%s", ud)
	}
	if aws.ToString(d.ImageId) != "ami-0123456789abcdef0" || d.InstanceType != "m5.large" || !slices.Equal(d.SecurityGroupIds, []string{"sg-0aaaaaaaaaaaaaaaa"}) {
		t.Errorf("image %s type %s security groups %v", aws.ToString(d.ImageId), d.InstanceType, d.SecurityGroupIds)
	}
	if len(d.BlockDeviceMappings) != 1 || aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 80 || d.MetadataOptions.HttpEndpoint != "" {
		t.Errorf("block devices %+v metadata %+v", d.BlockDeviceMappings, d.MetadataOptions)
	}
	var rts []string
	instanceTags := map[string]string{}
	for _, ts := range d.TagSpecifications {
		rts = append(rts, string(ts.ResourceType))
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			for _, tg := range ts.Tags {
				instanceTags[*tg.Key] = *tg.Value
			}
		}
	}
	if !slices.Equal(rts, []string{"instance", "volume", "network-interface"}) || instanceTags["Name"] != "c1-ng1-Node" || instanceTags["eks:nodegroup-name"] != "ng1" {
		t.Errorf("tag specifications %v, instance tags %v", rts, instanceTags)
	}
	got := h.get()
	if s := got.Status.SourceLaunchTemplate; s == nil || s.Name != user || s.Version != "1" || got.Status.InstanceType != "m5.large" {
		t.Errorf("source %+v instance type %q", got.Status.SourceLaunchTemplate, got.Status.InstanceType)
	}

	// A new version of the user's template, with an instance type of its own, rolls
	// the nodes onto it.
	v2 := eksctlTemplate(eksctlUserData)
	v2.InstanceType = ec2types.InstanceTypeT3Large
	putUserTemplate(t, h.cloud, user, v2)
	h.until("rolled", 400, func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.SourceLaunchTemplate.Version == "2" && ng.Status.UpdatedSize == 2
	})
	if v := h.instanceVersions(); v["2"] != 2 || len(v) != 1 {
		t.Errorf("instances by version %v", v)
	}
	if d := ownTemplate(t, h.cloud, user); d.InstanceType != "t3.large" {
		t.Errorf("instance type %s", d.InstanceType)
	}
}

// A template with an ImageId is a custom AMI: its user data is the whole user data.
func TestUserLaunchTemplateCustomAMI(t *testing.T) {
	const user = "custom"
	ng := baseGroup(1)
	ng.Spec.Template.LaunchTemplate = &v1alpha1.LaunchTemplateRef{Name: user}
	h := newHarness(t, ng)
	d := eksctlTemplate("#!/bin/bash\n/etc/eks/bootstrap.sh c1\n")
	d.ImageId = aws.String("ami-0fedcba9876543210")
	putUserTemplate(t, h.cloud, user, d)
	h.until("active", 40, active)
	own := ownTemplate(t, h.cloud, user)
	ud, _ := base64.StdEncoding.DecodeString(aws.ToString(own.UserData))
	if aws.ToString(own.ImageId) != "ami-0fedcba9876543210" || string(ud) != "#!/bin/bash\n/etc/eks/bootstrap.sh c1\n" {
		t.Errorf("image %s user data %q", aws.ToString(own.ImageId), ud)
	}
}

// What EKS refuses in a launch template is reported as the group's issue, and nothing
// is launched.
func TestUserLaunchTemplateRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		ref    v1alpha1.LaunchTemplateRef
		data   func(*ec2types.RequestLaunchTemplateData)
		code   v1alpha1.IssueCode
		reason string
	}{
		{"unknown", v1alpha1.LaunchTemplateRef{Name: "nope"}, nil, v1alpha1.IssueEc2LaunchTemplateNotFound, `launch template "nope" version $Default`},
		{"unknown version", v1alpha1.LaunchTemplateRef{Name: "mine", Version: "7"}, func(*ec2types.RequestLaunchTemplateData) {}, v1alpha1.IssueEc2LaunchTemplateNotFound, "version 7"},
		{"instance profile", v1alpha1.LaunchTemplateRef{Name: "mine"}, func(d *ec2types.RequestLaunchTemplateData) {
			d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("p")}
		}, v1alpha1.IssueEc2LaunchTemplateInvalidConfig, "Launch template should not specify an instance profile"},
		{"instance type twice", v1alpha1.LaunchTemplateRef{Name: "mine"}, func(d *ec2types.RequestLaunchTemplateData) {
			d.InstanceType = ec2types.InstanceTypeT3Large
		}, v1alpha1.IssueEc2LaunchTemplateInvalidConfig, "instance type t3.large is in launch template"},
		{"custom AMI without user data", v1alpha1.LaunchTemplateRef{Name: "mine"}, func(d *ec2types.RequestLaunchTemplateData) {
			d.ImageId = aws.String("ami-0fedcba9876543210")
		}, v1alpha1.IssueEc2LaunchTemplateInvalidConfig, "must bootstrap the node itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ng := baseGroup(1) // names m5.large
			ng.Spec.Template.LaunchTemplate = &c.ref
			h := newHarness(t, ng)
			if c.data != nil {
				d := eksctlTemplate("")
				c.data(d)
				putUserTemplate(t, h.cloud, "mine", d)
			}
			h.tick()
			h.tick()
			got := h.get()
			if got.Status.Phase != v1alpha1.PhaseCreateFailed || !hasIssue(got.Status.Health.Issues, c.code) ||
				!strings.Contains(got.Status.Health.Issues[0].Message, c.reason) {
				t.Errorf("phase %s issues %+v", got.Status.Phase, got.Status.Health.Issues)
			}
			if len(h.cloud.groups) != 0 {
				t.Error("a group was created")
			}
		})
	}
}

// On AmazonLinux2 the user's parts come before EKS's bootstrap part, so that they run
// before the node joins.
func TestUserLaunchTemplateMergedAL2(t *testing.T) {
	const user = "eksctl-c1-nodegroup-al2"
	ng := baseGroup(1)
	ng.Spec.Template.AMIFamily = v1alpha1.AMIFamilyAmazonLinux2
	ng.Spec.Template.LaunchTemplate = &v1alpha1.LaunchTemplateRef{Name: user, Version: "1"}
	h := newHarness(t, ng)
	putUserTemplate(t, h.cloud, user, eksctlTemplate(eksctlUserData))
	h.until("active", 40, active)
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(ownTemplate(t, h.cloud, user).UserData))
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "usertemplate-eksctl-al2.golden"), ud)
	if i, b := strings.Index(string(ud), "pre-bootstrap"), strings.Index(string(ud), "/etc/eks/bootstrap.sh"); i < 0 || b < 0 || i > b {
		t.Errorf("want the user's script, then EKS's bootstrap:\n%s", ud)
	}
}
