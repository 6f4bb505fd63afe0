package nodegroup

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// EC2 is the part of the EC2 API the controller calls; *ec2.Client implements it.
type EC2 interface {
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	CreateLaunchTemplateVersion(context.Context, *ec2.CreateLaunchTemplateVersionInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateVersionOutput, error)
	DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// AutoScaling is the part of the Auto Scaling API the controller calls;
// *autoscaling.Client implements it.
type AutoScaling interface {
	CreateAutoScalingGroup(context.Context, *autoscaling.CreateAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.CreateAutoScalingGroupOutput, error)
	UpdateAutoScalingGroup(context.Context, *autoscaling.UpdateAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error)
	SetDesiredCapacity(context.Context, *autoscaling.SetDesiredCapacityInput, ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	TerminateInstanceInAutoScalingGroup(context.Context, *autoscaling.TerminateInstanceInAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	DeleteAutoScalingGroup(context.Context, *autoscaling.DeleteAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.DeleteAutoScalingGroupOutput, error)
	DescribeScalingActivities(context.Context, *autoscaling.DescribeScalingActivitiesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
}

// cloud is the controller's view of EC2 and Auto Scaling.
type cloud struct {
	ec2 EC2
	asg AutoScaling
}

// templateData is what one launch template version holds.
type templateData struct {
	ImageID          string
	InstanceType     string // set when the group has one type and is on demand
	UserData         []byte
	InstanceProfile  string
	SecurityGroupIDs []string
	Tags             map[string]string // instance tags
	// From the user's launch template (spec.template.launchTemplate), when it has them.
	KeyName         string                                                 `json:",omitempty"`
	MetadataOptions *ec2types.LaunchTemplateInstanceMetadataOptionsRequest `json:",omitempty"`
	BlockDevices    []ec2types.LaunchTemplateBlockDeviceMappingRequest     `json:",omitempty"`
	OtherTagSpecs   []ec2types.LaunchTemplateTagSpecificationRequest       `json:",omitempty"` // not of instances
}

// hash identifies the data: equal data, equal hash.
func (d *templateData) hash() string {
	b, _ := json.Marshal(d)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// descriptionPrefix starts the VersionDescription of the versions the controller makes;
// the rest is the data's hash.
const descriptionPrefix = "nodejoin template "

func (d *templateData) request() *ec2types.RequestLaunchTemplateData {
	r := &ec2types.RequestLaunchTemplateData{
		UserData: aws.String(base64.StdEncoding.EncodeToString(d.UserData)),
		// IMDSv2 with a hop limit of 1 (EKS's default template has 2): a pod outside the
		// host network cannot read the node's role credentials or its signed identity
		// document, and so can neither mint the node's tokens nor prove to be its
		// instance. Pods that need AWS credentials get their own (IRSA, Pod Identity).
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
			HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		},
	}
	if d.MetadataOptions != nil {
		r.MetadataOptions = d.MetadataOptions
	}
	if d.KeyName != "" {
		r.KeyName = aws.String(d.KeyName)
	}
	r.BlockDeviceMappings = d.BlockDevices
	if d.ImageID != "" {
		r.ImageId = aws.String(d.ImageID)
	}
	if d.InstanceType != "" {
		r.InstanceType = ec2types.InstanceType(d.InstanceType)
	}
	if p := d.InstanceProfile; p != "" {
		if strings.HasPrefix(p, "arn:") {
			r.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: aws.String(p)}
		} else {
			r.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(p)}
		}
	}
	if len(d.SecurityGroupIDs) > 0 {
		r.SecurityGroupIds = d.SecurityGroupIDs
	}
	if len(d.Tags) > 0 {
		var tags []ec2types.Tag
		for _, k := range sortedKeys(d.Tags) {
			tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(d.Tags[k])})
		}
		r.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}
	}
	r.TagSpecifications = append(r.TagSpecifications, d.OtherTagSpecs...)
	return r
}

// ensureTemplate makes sure the launch template name has a version with data: it
// creates the template, or a new version when its latest version holds other data. It
// returns the template's ID and the version's number.
func (c *cloud) ensureTemplate(ctx context.Context, name string, d *templateData, tags map[string]string) (id, version string, created bool, err error) {
	hash := d.hash()
	out, err := c.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: aws.String(name), Versions: []string{"$Latest"},
	})
	switch {
	case isCode(err, "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFound"):
		var lt []ec2types.Tag
		for _, k := range sortedKeys(tags) {
			lt = append(lt, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
		}
		cr, err := c.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name), LaunchTemplateData: d.request(),
			VersionDescription: aws.String(descriptionPrefix + hash),
			TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: lt}},
		})
		if err != nil {
			return "", "", false, fmt.Errorf("creating launch template %s: %w", name, err)
		}
		return aws.ToString(cr.LaunchTemplate.LaunchTemplateId), versionString(cr.LaunchTemplate.LatestVersionNumber), true, nil
	case err != nil:
		return "", "", false, fmt.Errorf("describing launch template %s: %w", name, err)
	case len(out.LaunchTemplateVersions) == 0:
		return "", "", false, fmt.Errorf("describing launch template %s: no $Latest version", name)
	}
	latest := out.LaunchTemplateVersions[0]
	id = aws.ToString(latest.LaunchTemplateId)
	if aws.ToString(latest.VersionDescription) == descriptionPrefix+hash {
		return id, versionString(latest.VersionNumber), false, nil
	}
	cv, err := c.ec2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateId: aws.String(id), LaunchTemplateData: d.request(),
		VersionDescription: aws.String(descriptionPrefix + hash),
	})
	if err != nil {
		return "", "", false, fmt.Errorf("creating a version of launch template %s: %w", name, err)
	}
	return id, versionString(cv.LaunchTemplateVersion.VersionNumber), true, nil
}

func versionString(v *int64) string { return strconv.FormatInt(aws.ToInt64(v), 10) }

// group is what the controller reads of an Auto Scaling group.
type group struct {
	Name                   string
	Min, Max, Desired      int32
	LaunchTemplateVersion  string
	AvailabilityZones      []string
	Instances              []groupInstance
	DeleteInProgress       bool
	MixedInstancesTemplate bool
}

type groupInstance struct {
	ID, AZ, Version, LifecycleState, Health string
}

// live reports whether the instance is, or is becoming, part of the group's capacity.
func (i groupInstance) live() bool {
	s := i.LifecycleState
	return !strings.HasPrefix(s, "Terminat") && !strings.HasPrefix(s, "Detach") && s != "Standby" && !strings.HasPrefix(s, "Warmed")
}

// describeGroup reads the group; nil when it does not exist.
func (c *cloud) describeGroup(ctx context.Context, name string) (*group, error) {
	out, err := c.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return nil, fmt.Errorf("describing Auto Scaling group %s: %w", name, err)
	}
	for _, g := range out.AutoScalingGroups {
		if aws.ToString(g.AutoScalingGroupName) != name {
			continue
		}
		r := &group{Name: name, Min: aws.ToInt32(g.MinSize), Max: aws.ToInt32(g.MaxSize), Desired: aws.ToInt32(g.DesiredCapacity),
			AvailabilityZones: g.AvailabilityZones, DeleteInProgress: aws.ToString(g.Status) != ""}
		switch {
		case g.LaunchTemplate != nil:
			r.LaunchTemplateVersion = aws.ToString(g.LaunchTemplate.Version)
		case g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil && g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification != nil:
			r.LaunchTemplateVersion = aws.ToString(g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification.Version)
			r.MixedInstancesTemplate = true
		}
		for _, in := range g.Instances {
			gi := groupInstance{ID: aws.ToString(in.InstanceId), AZ: aws.ToString(in.AvailabilityZone),
				LifecycleState: string(in.LifecycleState), Health: aws.ToString(in.HealthStatus)}
			if in.LaunchTemplate != nil {
				gi.Version = aws.ToString(in.LaunchTemplate.Version)
			}
			r.Instances = append(r.Instances, gi)
		}
		slices.SortFunc(r.Instances, func(a, b groupInstance) int { return strings.Compare(a.ID, b.ID) })
		return r, nil
	}
	return nil, nil
}

// groupSpec is what the controller asks of an Auto Scaling group.
type groupSpec struct {
	Name                  string
	LaunchTemplateID      string
	LaunchTemplateVersion string
	Min, Max, Desired     int32
	Subnets               []string
	AvailabilityZones     []string
	// Overrides are the instance types of a mixed-instances group (more than one
	// type, or Spot); empty means the launch template's own type.
	InstanceTypes []string
	Spot          bool
	Tags          map[string]string
}

func (s *groupSpec) launchSource() (*astypes.LaunchTemplateSpecification, *astypes.MixedInstancesPolicy) {
	lt := &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(s.LaunchTemplateID), Version: aws.String(s.LaunchTemplateVersion)}
	if len(s.InstanceTypes) == 0 {
		return lt, nil
	}
	var overrides []astypes.LaunchTemplateOverrides
	for _, t := range s.InstanceTypes {
		overrides = append(overrides, astypes.LaunchTemplateOverrides{InstanceType: aws.String(t)})
	}
	dist := &astypes.InstancesDistribution{OnDemandAllocationStrategy: aws.String("prioritized"), OnDemandBaseCapacity: aws.Int32(0),
		OnDemandPercentageAboveBaseCapacity: aws.Int32(100)}
	if s.Spot {
		dist.OnDemandPercentageAboveBaseCapacity = aws.Int32(0)
		dist.SpotAllocationStrategy = aws.String("price-capacity-optimized")
	}
	return nil, &astypes.MixedInstancesPolicy{
		LaunchTemplate:        &astypes.LaunchTemplate{LaunchTemplateSpecification: lt, Overrides: overrides},
		InstancesDistribution: dist,
	}
}

func (c *cloud) createGroup(ctx context.Context, s *groupSpec) error {
	lt, mixed := s.launchSource()
	in := &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(s.Name), MinSize: aws.Int32(s.Min), MaxSize: aws.Int32(s.Max), DesiredCapacity: aws.Int32(s.Desired),
		LaunchTemplate: lt, MixedInstancesPolicy: mixed, CapacityRebalance: aws.Bool(s.Spot),
	}
	if len(s.Subnets) > 0 {
		in.VPCZoneIdentifier = aws.String(strings.Join(s.Subnets, ","))
	} else {
		in.AvailabilityZones = s.AvailabilityZones
	}
	for _, k := range sortedKeys(s.Tags) {
		in.Tags = append(in.Tags, astypes.Tag{Key: aws.String(k), Value: aws.String(s.Tags[k]), PropagateAtLaunch: aws.Bool(true),
			ResourceId: aws.String(s.Name), ResourceType: aws.String("auto-scaling-group")})
	}
	if _, err := c.asg.CreateAutoScalingGroup(ctx, in); err != nil {
		return fmt.Errorf("creating Auto Scaling group %s: %w", s.Name, err)
	}
	return nil
}

// updateGroup sets the group's size and launch template version.
func (c *cloud) updateGroup(ctx context.Context, s *groupSpec) error {
	lt, mixed := s.launchSource()
	_, err := c.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(s.Name), MinSize: aws.Int32(s.Min), MaxSize: aws.Int32(s.Max), DesiredCapacity: aws.Int32(s.Desired),
		LaunchTemplate: lt, MixedInstancesPolicy: mixed,
	})
	if err != nil {
		return fmt.Errorf("updating Auto Scaling group %s: %w", s.Name, err)
	}
	return nil
}

// setDesired changes the group's desired capacity alone.
func (c *cloud) setDesired(ctx context.Context, name string, desired int32) error {
	_, err := c.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(desired)})
	if err != nil {
		return fmt.Errorf("setting the desired capacity of Auto Scaling group %s to %d: %w", name, desired, err)
	}
	return nil
}

// terminate terminates one instance through Auto Scaling; decrement lowers the desired
// capacity with it, else the group launches a replacement.
func (c *cloud) terminate(ctx context.Context, id string, decrement bool) error {
	_, err := c.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(decrement),
	})
	if err != nil && !isCode(err, "ValidationError") {
		return fmt.Errorf("terminating instance %s: %w", id, err)
	}
	// A ValidationError means the instance is no longer in the group: already gone.
	return nil
}

// failedLaunches returns the group's failed launches newer than its last successful
// one (the failures still standing), newest first.
func (c *cloud) failedLaunches(ctx context.Context, name string) ([]astypes.Activity, error) {
	out, err := c.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String(name), MaxRecords: aws.Int32(20)})
	if err != nil {
		return nil, fmt.Errorf("describing the scaling activities of %s: %w", name, err)
	}
	return standingLaunchFailures(out.Activities), nil
}

// standingLaunchFailures picks, from a group's activities, the failed launches newer
// than its last successful launch, newest first. Only launches count: a termination
// that failed (Auto Scaling tries it again) is not a launch failure, and a failed
// termination after the last launch would otherwise hold the group DEGRADED for good.
func standingLaunchFailures(activities []astypes.Activity) []astypes.Activity {
	acts := slices.Clone(activities)
	slices.SortStableFunc(acts, func(a, b astypes.Activity) int {
		return aws.ToTime(b.StartTime).Compare(aws.ToTime(a.StartTime))
	})
	var failed []astypes.Activity
	for _, a := range acts {
		if !strings.HasPrefix(aws.ToString(a.Description), "Launching") {
			continue
		}
		if a.StatusCode == astypes.ScalingActivityStatusCodeSuccessful {
			break
		}
		if a.StatusCode == astypes.ScalingActivityStatusCodeFailed {
			failed = append(failed, a)
		}
	}
	return failed
}

// deleteGroup deletes the group, terminating what runs in it.
func (c *cloud) deleteGroup(ctx context.Context, name string) error {
	_, err := c.asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String(name), ForceDelete: aws.Bool(true)})
	if err != nil && !isCode(err, "ValidationError") {
		return fmt.Errorf("deleting Auto Scaling group %s: %w", name, err)
	}
	return nil
}

func (c *cloud) deleteTemplate(ctx context.Context, name string) error {
	_, err := c.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
	if err != nil && !isCode(err, "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFound") {
		return fmt.Errorf("deleting launch template %s: %w", name, err)
	}
	return nil
}

// isCode reports whether err is an AWS API error with one of codes.
func isCode(err error, codes ...string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && slices.Contains(codes, api.ErrorCode())
}

// apiCode is the AWS error code of err, or "".
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}
