package nodegroup

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// fakeCloud is an in-memory EC2 (launch templates) and Auto Scaling. Instances launch
// when converge is called, InService at once; terminated instances go at the next
// converge. ops records launches and terminations in order.
type fakeCloud struct {
	mu        sync.Mutex
	templates map[string]*fakeTemplate
	groups    map[string]*fakeGroup
	nextID    int
	ops       []string
	// failLaunch, when set, makes launches fail with this status message.
	failLaunch string
	now        func() time.Time
}

type fakeTemplate struct {
	id, name string
	versions []fakeVersion
}

type fakeVersion struct {
	number      int64
	description string
	data        *ec2types.RequestLaunchTemplateData
}

type fakeGroup struct {
	name                  string
	min, max, desired     int32
	ltID, version         string
	azs                   []string
	instances             []*fakeInstance
	activities            []astypes.Activity
	mixed                 bool
	tags                  map[string]string
	createdWithSubnetList string
}

type fakeInstance struct {
	id, az, version, state string
}

func newFakeCloud(now func() time.Time) *fakeCloud {
	return &fakeCloud{templates: map[string]*fakeTemplate{}, groups: map[string]*fakeGroup{}, now: now}
}

func apiErr(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }

func (c *fakeCloud) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := aws.ToString(in.LaunchTemplateName)
	if _, ok := c.templates[name]; ok {
		return nil, apiErr("InvalidLaunchTemplateName.AlreadyExistsException", name)
	}
	c.nextID++
	t := &fakeTemplate{id: fmt.Sprintf("lt-%017x", c.nextID), name: name, versions: []fakeVersion{{1, aws.ToString(in.VersionDescription), in.LaunchTemplateData}}}
	c.templates[name] = t
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: aws.String(t.id), LaunchTemplateName: aws.String(name),
		LatestVersionNumber: aws.Int64(1), DefaultVersionNumber: aws.Int64(1)}}, nil
}

func (c *fakeCloud) template(id, name string) *fakeTemplate {
	if name != "" {
		return c.templates[name]
	}
	for _, t := range c.templates {
		if t.id == id {
			return t
		}
	}
	return nil
}

func (c *fakeCloud) CreateLaunchTemplateVersion(_ context.Context, in *ec2.CreateLaunchTemplateVersionInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateVersionOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.template(aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName))
	if t == nil {
		return nil, apiErr("InvalidLaunchTemplateId.NotFound", "no such template")
	}
	v := fakeVersion{int64(len(t.versions) + 1), aws.ToString(in.VersionDescription), in.LaunchTemplateData}
	t.versions = append(t.versions, v)
	return &ec2.CreateLaunchTemplateVersionOutput{LaunchTemplateVersion: &ec2types.LaunchTemplateVersion{LaunchTemplateId: aws.String(t.id), VersionNumber: aws.Int64(v.number)}}, nil
}

func (c *fakeCloud) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.template(aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName))
	if t == nil {
		return nil, apiErr("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
	}
	if len(in.Versions) != 1 {
		return nil, apiErr("Unsupported", "the fake describes one version")
	}
	var v fakeVersion
	switch n, err := strconv.ParseInt(in.Versions[0], 10, 64); {
	case in.Versions[0] == "$Latest":
		v = t.versions[len(t.versions)-1]
	case in.Versions[0] == "$Default":
		v = t.versions[0]
	case err == nil && n >= 1 && int(n) <= len(t.versions):
		v = t.versions[n-1]
	default:
		return nil, apiErr("InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version "+in.Versions[0])
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{
		LaunchTemplateId: aws.String(t.id), LaunchTemplateName: aws.String(t.name), VersionNumber: aws.Int64(v.number),
		VersionDescription: aws.String(v.description), LaunchTemplateData: responseData(v.data),
	}}}, nil
}

// responseData is what DescribeLaunchTemplateVersions answers for the data a version
// was created with (the fields the controller reads).
func responseData(d *ec2types.RequestLaunchTemplateData) *ec2types.ResponseLaunchTemplateData {
	r := &ec2types.ResponseLaunchTemplateData{
		UserData: d.UserData, ImageId: d.ImageId, InstanceType: d.InstanceType, KeyName: d.KeyName, SecurityGroupIds: d.SecurityGroupIds,
	}
	if p := d.IamInstanceProfile; p != nil {
		r.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecification{Arn: p.Arn, Name: p.Name}
	}
	if m := d.MetadataOptions; m != nil {
		r.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptions{HttpEndpoint: m.HttpEndpoint, HttpTokens: m.HttpTokens,
			HttpPutResponseHopLimit: m.HttpPutResponseHopLimit, HttpProtocolIpv6: m.HttpProtocolIpv6, InstanceMetadataTags: m.InstanceMetadataTags}
	}
	for _, b := range d.BlockDeviceMappings {
		m := ec2types.LaunchTemplateBlockDeviceMapping{DeviceName: b.DeviceName, NoDevice: b.NoDevice, VirtualName: b.VirtualName}
		if e := b.Ebs; e != nil {
			m.Ebs = &ec2types.LaunchTemplateEbsBlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, Iops: e.Iops,
				KmsKeyId: e.KmsKeyId, SnapshotId: e.SnapshotId, Throughput: e.Throughput, VolumeSize: e.VolumeSize, VolumeType: e.VolumeType}
		}
		r.BlockDeviceMappings = append(r.BlockDeviceMappings, m)
	}
	for _, ts := range d.TagSpecifications {
		r.TagSpecifications = append(r.TagSpecifications, ec2types.LaunchTemplateTagSpecification{ResourceType: ts.ResourceType, Tags: ts.Tags})
	}
	return r
}

func (c *fakeCloud) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := aws.ToString(in.LaunchTemplateName)
	if _, ok := c.templates[name]; !ok {
		return nil, apiErr("InvalidLaunchTemplateName.NotFoundException", name)
	}
	delete(c.templates, name)
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

func launchSpec(lt *astypes.LaunchTemplateSpecification, mixed *astypes.MixedInstancesPolicy) (id, version string, isMixed bool) {
	if mixed != nil {
		lt, isMixed = mixed.LaunchTemplate.LaunchTemplateSpecification, true
	}
	return aws.ToString(lt.LaunchTemplateId), aws.ToString(lt.Version), isMixed
}

func (c *fakeCloud) CreateAutoScalingGroup(_ context.Context, in *autoscaling.CreateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.CreateAutoScalingGroupOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := aws.ToString(in.AutoScalingGroupName)
	if _, ok := c.groups[name]; ok {
		return nil, apiErr("AlreadyExists", "AutoScalingGroup by this name already exists")
	}
	g := &fakeGroup{name: name, min: aws.ToInt32(in.MinSize), max: aws.ToInt32(in.MaxSize), desired: aws.ToInt32(in.DesiredCapacity),
		azs: in.AvailabilityZones, tags: map[string]string{}, createdWithSubnetList: aws.ToString(in.VPCZoneIdentifier)}
	if len(g.azs) == 0 {
		g.azs = []string{"us-west-2a", "us-west-2b"}
	}
	g.ltID, g.version, g.mixed = launchSpec(in.LaunchTemplate, in.MixedInstancesPolicy)
	if g.version == "$Latest" || g.version == "" {
		return nil, apiErr("ValidationError", "the fake wants a version number")
	}
	for _, t := range in.Tags {
		g.tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	c.groups[name] = g
	return &autoscaling.CreateAutoScalingGroupOutput{}, nil
}

func (c *fakeCloud) UpdateAutoScalingGroup(_ context.Context, in *autoscaling.UpdateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[aws.ToString(in.AutoScalingGroupName)]
	if g == nil {
		return nil, apiErr("ValidationError", "AutoScalingGroup name not found")
	}
	mn, mx, d := aws.ToInt32(in.MinSize), aws.ToInt32(in.MaxSize), aws.ToInt32(in.DesiredCapacity)
	if mn > d || d > mx {
		return nil, apiErr("ValidationError", fmt.Sprintf("Desired capacity:%d must be between the specified min size:%d and max size:%d", d, mn, mx))
	}
	g.min, g.max, g.desired = mn, mx, d
	if in.LaunchTemplate != nil || in.MixedInstancesPolicy != nil {
		g.ltID, g.version, g.mixed = launchSpec(in.LaunchTemplate, in.MixedInstancesPolicy)
	}
	return &autoscaling.UpdateAutoScalingGroupOutput{}, nil
}

func (c *fakeCloud) SetDesiredCapacity(_ context.Context, in *autoscaling.SetDesiredCapacityInput, _ ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[aws.ToString(in.AutoScalingGroupName)]
	if g == nil {
		return nil, apiErr("ValidationError", "AutoScalingGroup name not found")
	}
	g.desired = aws.ToInt32(in.DesiredCapacity)
	return &autoscaling.SetDesiredCapacityOutput{}, nil
}

func (c *fakeCloud) DescribeAutoScalingGroups(_ context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	for _, name := range in.AutoScalingGroupNames {
		g := c.groups[name]
		if g == nil {
			continue
		}
		ag := astypes.AutoScalingGroup{AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(g.min), MaxSize: aws.Int32(g.max),
			DesiredCapacity: aws.Int32(g.desired), AvailabilityZones: g.azs}
		spec := &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(g.ltID), Version: aws.String(g.version)}
		if g.mixed {
			ag.MixedInstancesPolicy = &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{LaunchTemplateSpecification: spec}}
		} else {
			ag.LaunchTemplate = spec
		}
		for _, i := range g.instances {
			ag.Instances = append(ag.Instances, astypes.Instance{InstanceId: aws.String(i.id), AvailabilityZone: aws.String(i.az),
				LifecycleState: astypes.LifecycleState(i.state), HealthStatus: aws.String("Healthy"),
				LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(g.ltID), Version: aws.String(i.version)}})
		}
		out.AutoScalingGroups = append(out.AutoScalingGroups, ag)
	}
	return out, nil
}

func (c *fakeCloud) TerminateInstanceInAutoScalingGroup(_ context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := aws.ToString(in.InstanceId)
	for _, g := range c.groups {
		for _, i := range g.instances {
			if i.id != id || strings.HasPrefix(i.state, "Terminat") {
				continue
			}
			i.state = "Terminating"
			c.ops = append(c.ops, "terminate "+id+" v"+i.version)
			if aws.ToBool(in.ShouldDecrementDesiredCapacity) {
				g.desired--
			}
			return &autoscaling.TerminateInstanceInAutoScalingGroupOutput{}, nil
		}
	}
	return nil, apiErr("ValidationError", "Instance Id not found - No managed instance found for instance ID: "+id)
}

func (c *fakeCloud) DeleteAutoScalingGroup(_ context.Context, in *autoscaling.DeleteAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteAutoScalingGroupOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := aws.ToString(in.AutoScalingGroupName)
	if _, ok := c.groups[name]; !ok {
		return nil, apiErr("ValidationError", "AutoScalingGroup name not found")
	}
	delete(c.groups, name)
	c.ops = append(c.ops, "delete "+name)
	return &autoscaling.DeleteAutoScalingGroupOutput{}, nil
}

func (c *fakeCloud) DescribeScalingActivities(_ context.Context, in *autoscaling.DescribeScalingActivitiesInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[aws.ToString(in.AutoScalingGroupName)]
	if g == nil {
		return &autoscaling.DescribeScalingActivitiesOutput{}, nil
	}
	acts := slices.Clone(g.activities)
	slices.Reverse(acts)
	if n := int(aws.ToInt32(in.MaxRecords)); n > 0 && len(acts) > n {
		acts = acts[:n]
	}
	return &autoscaling.DescribeScalingActivitiesOutput{Activities: acts}, nil
}

// converge does what Auto Scaling does between two looks: terminated instances go,
// and the group launches or terminates to its desired capacity (terminating instances
// on the oldest launch template version first, as the default policy does).
func (c *fakeCloud) converge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range sortedKeys(c.groups) {
		g := c.groups[name]
		g.instances = slices.DeleteFunc(g.instances, func(i *fakeInstance) bool { return i.state == "Terminating" })
		live := int32(len(g.instances)) //nolint:gosec // G115: a test group's handful of instances.
		for ; live > g.desired; live-- {
			victim := slices.MinFunc(g.instances, func(a, b *fakeInstance) int {
				va, _ := strconv.Atoi(a.version)
				vb, _ := strconv.Atoi(b.version)
				if va != vb {
					return va - vb
				}
				return strings.Compare(a.id, b.id)
			})
			victim.state = "Terminating"
			c.ops = append(c.ops, "scale-in "+victim.id+" v"+victim.version)
		}
		for ; live < g.desired; live++ {
			if c.failLaunch != "" {
				g.activities = append(g.activities, astypes.Activity{ActivityId: aws.String(fmt.Sprint(len(g.activities))), AutoScalingGroupName: aws.String(name),
					Description: aws.String("Launching a new EC2 instance.  Status Reason: " + c.failLaunch), StatusCode: astypes.ScalingActivityStatusCodeFailed,
					StatusMessage: aws.String(c.failLaunch), StartTime: aws.Time(c.now())})
				break
			}
			c.nextID++
			az := g.azs[c.nextID%len(g.azs)]
			i := &fakeInstance{id: fmt.Sprintf("i-%017x", c.nextID), az: az, version: g.version, state: "InService"}
			g.instances = append(g.instances, i)
			g.activities = append(g.activities, astypes.Activity{ActivityId: aws.String(fmt.Sprint(len(g.activities))), AutoScalingGroupName: aws.String(name),
				Description: aws.String("Launching a new EC2 instance: " + i.id), StatusCode: astypes.ScalingActivityStatusCodeSuccessful, StartTime: aws.Time(c.now())})
			c.ops = append(c.ops, "launch "+i.id+" v"+i.version)
		}
	}
}

func (c *fakeCloud) group() *fakeGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		return g
	}
	return nil
}

func (c *fakeCloud) opsSince(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ops[n:])
}
