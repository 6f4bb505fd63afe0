package resource

// This file holds AWS::AutoScaling::AutoScalingGroup: create, in-place update and
// delete; compute_rolling.go holds the rolling update of UpdatePolicy's
// AutoScalingRollingUpdate.

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// asgWaitLimit bounds the waits of an Auto Scaling group that has no deadline of its
// own: its instances' launches and terminations.
var asgWaitLimit = 30 * time.Minute

// asgType is AWS::AutoScaling::AutoScalingGroup. Ref is the group's name.
type asgType struct{ cl Clients }

var asgKeys = []string{"AutoScalingGroupName", "AvailabilityZones", "CapacityRebalance", "Cooldown", "DesiredCapacity",
	"HealthCheckGracePeriod", "HealthCheckType", "LaunchTemplate", "MaxInstanceLifetime", "MaxSize", "MetricsCollection",
	"MinSize", "MixedInstancesPolicy", "NewInstancesProtectedFromScaleIn", "Tags", "TerminationPolicies", "VPCZoneIdentifier"}

// asgProps are a group's properties as UpdateAutoScalingGroup takes them (the name
// aside); tags are CreateAutoScalingGroup's.
type asgProps struct {
	name string
	in   autoscaling.UpdateAutoScalingGroupInput
	tags []astypes.Tag
}

func readLTSpec(p *propReader, m map[string]any, at string) *astypes.LaunchTemplateSpecification {
	p.known(m, at, "LaunchTemplateId", "LaunchTemplateName", "Version")
	p.required(m, at, "Version")
	s := &astypes.LaunchTemplateSpecification{LaunchTemplateId: p.strPtr(m, at, "LaunchTemplateId"),
		LaunchTemplateName: p.strPtr(m, at, "LaunchTemplateName"), Version: p.strPtr(m, at, "Version")}
	if (s.LaunchTemplateId == nil) == (s.LaunchTemplateName == nil) {
		p.fail(at, "exactly one of LaunchTemplateId and LaunchTemplateName is required")
	}
	return s
}

func readMixedPolicy(p *propReader, m map[string]any) *astypes.MixedInstancesPolicy {
	const at = "#/MixedInstancesPolicy"
	p.known(m, at, "InstancesDistribution", "LaunchTemplate")
	p.required(m, at, "LaunchTemplate")
	out := &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{}}
	if lt := p.obj(m, at, "LaunchTemplate"); lt != nil {
		p.known(lt, at+"/LaunchTemplate", "LaunchTemplateSpecification", "Overrides")
		p.required(lt, at+"/LaunchTemplate", "LaunchTemplateSpecification")
		if s := p.obj(lt, at+"/LaunchTemplate", "LaunchTemplateSpecification"); s != nil {
			out.LaunchTemplate.LaunchTemplateSpecification = readLTSpec(p, s, at+"/LaunchTemplate/LaunchTemplateSpecification")
		}
		for i, o := range p.objList(lt, at+"/LaunchTemplate", "Overrides") {
			oat := fmt.Sprintf("%s/LaunchTemplate/Overrides/%d", at, i)
			p.known(o, oat, "InstanceType", "WeightedCapacity")
			out.LaunchTemplate.Overrides = append(out.LaunchTemplate.Overrides, astypes.LaunchTemplateOverrides{
				InstanceType: p.strPtr(o, oat, "InstanceType"), WeightedCapacity: p.strPtr(o, oat, "WeightedCapacity")})
		}
	}
	if d := p.obj(m, at, "InstancesDistribution"); d != nil {
		dat := at + "/InstancesDistribution"
		p.known(d, dat, "OnDemandAllocationStrategy", "OnDemandBaseCapacity", "OnDemandPercentageAboveBaseCapacity",
			"SpotAllocationStrategy", "SpotInstancePools", "SpotMaxPrice")
		out.InstancesDistribution = &astypes.InstancesDistribution{
			OnDemandAllocationStrategy:          p.strPtr(d, dat, "OnDemandAllocationStrategy"),
			OnDemandBaseCapacity:                p.int32Ptr(d, dat, "OnDemandBaseCapacity"),
			OnDemandPercentageAboveBaseCapacity: p.int32Ptr(d, dat, "OnDemandPercentageAboveBaseCapacity"),
			SpotAllocationStrategy:              p.strPtr(d, dat, "SpotAllocationStrategy"),
			SpotInstancePools:                   p.int32Ptr(d, dat, "SpotInstancePools"),
			SpotMaxPrice:                        p.strPtr(d, dat, "SpotMaxPrice"),
		}
	}
	return out
}

func readASG(c *Call, props map[string]any) (asgProps, error) {
	p := newPropReader(c)
	p.known(props, "#", asgKeys...)
	p.required(props, "#", "MinSize", "MaxSize")
	out := asgProps{name: p.str(props, "#", "AutoScalingGroupName")}
	in := &out.in
	in.MinSize, in.MaxSize, in.DesiredCapacity = p.int32Ptr(props, "#", "MinSize"), p.int32Ptr(props, "#", "MaxSize"), p.int32Ptr(props, "#", "DesiredCapacity")
	in.HealthCheckType = p.strPtr(props, "#", "HealthCheckType")
	in.HealthCheckGracePeriod = p.int32Ptr(props, "#", "HealthCheckGracePeriod")
	in.DefaultCooldown = p.int32Ptr(props, "#", "Cooldown")
	in.MaxInstanceLifetime = p.int32Ptr(props, "#", "MaxInstanceLifetime")
	in.CapacityRebalance = p.boolPtr(props, "#", "CapacityRebalance")
	in.NewInstancesProtectedFromScaleIn = p.boolPtr(props, "#", "NewInstancesProtectedFromScaleIn")
	in.TerminationPolicies = p.strList(props, "#", "TerminationPolicies")
	in.AvailabilityZones = p.strList(props, "#", "AvailabilityZones")
	if subnets := p.strList(props, "#", "VPCZoneIdentifier"); len(subnets) > 0 {
		in.VPCZoneIdentifier = aws.String(strings.Join(subnets, ","))
	}
	// MetricsCollection enables CloudWatch metrics, which the local cloud does not
	// collect; it is read (so that a malformed one is refused) and has no effect.
	p.objList(props, "#", "MetricsCollection")
	if lt := p.obj(props, "#", "LaunchTemplate"); lt != nil {
		in.LaunchTemplate = readLTSpec(p, lt, "#/LaunchTemplate")
	}
	if m := p.obj(props, "#", "MixedInstancesPolicy"); m != nil {
		in.MixedInstancesPolicy = readMixedPolicy(p, m)
	}
	if (in.LaunchTemplate == nil) == (in.MixedInstancesPolicy == nil) {
		p.fail("#", "exactly one of LaunchTemplate and MixedInstancesPolicy is required (launch configurations are not emulated by the local cloud)")
	}
	given := map[string]bool{}
	for i, t := range p.objList(props, "#", "Tags") {
		at := fmt.Sprintf("#/Tags/%d", i)
		p.known(t, at, "Key", "PropagateAtLaunch", "Value")
		p.required(t, at, "Key", "PropagateAtLaunch", "Value")
		key := p.str(t, at, "Key")
		given[key] = true
		out.tags = append(out.tags, astypes.Tag{Key: aws.String(key), Value: aws.String(p.str(t, at, "Value")), PropagateAtLaunch: p.boolPtr(t, at, "PropagateAtLaunch")})
	}
	// The stack's tags and CloudFormation's own are the group's too, propagated at
	// launch, as AWS tags a stack's groups and their instances.
	for _, k := range sortedTagKeys(c.Tags) {
		if !given[k] {
			out.tags = append(out.tags, astypes.Tag{Key: aws.String(k), Value: aws.String(c.Tags[k]), PropagateAtLaunch: aws.Bool(true)})
		}
	}
	return out, p.err
}

func (t *asgType) Create(ctx context.Context, c *Call) (Result, error) {
	ap, err := readASG(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	name := ap.name
	if name == "" {
		name = fmt.Sprintf("%s-%s-%s", c.StackName, c.LogicalID, physicalSuffix(13))
	}
	in := ap.in
	for i := range ap.tags {
		ap.tags[i].ResourceId, ap.tags[i].ResourceType = aws.String(name), aws.String("auto-scaling-group")
	}
	_, err = t.cl.AutoScaling.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String(name), MinSize: in.MinSize, MaxSize: in.MaxSize, DesiredCapacity: in.DesiredCapacity,
		LaunchTemplate: in.LaunchTemplate, MixedInstancesPolicy: in.MixedInstancesPolicy, VPCZoneIdentifier: in.VPCZoneIdentifier,
		AvailabilityZones: in.AvailabilityZones, HealthCheckType: in.HealthCheckType, HealthCheckGracePeriod: in.HealthCheckGracePeriod,
		DefaultCooldown: in.DefaultCooldown, MaxInstanceLifetime: in.MaxInstanceLifetime, CapacityRebalance: in.CapacityRebalance,
		NewInstancesProtectedFromScaleIn: in.NewInstancesProtectedFromScaleIn, TerminationPolicies: in.TerminationPolicies, Tags: ap.tags,
	})
	if err != nil {
		return Result{}, serviceFailure("AutoScaling", err)
	}
	return Result{PhysicalID: name}, nil
}

// Update changes the group in place; another name needs a new group. A changed launch
// template (or subnets) rolls the instances when UpdatePolicy's AutoScalingRollingUpdate
// asks for it (compute_rolling.go), replaces the group when its
// AutoScalingReplacingUpdate does, and leaves the instances alone otherwise, as AWS does.
func (t *asgType) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	ap, err := readASG(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	oldAP, err := readASG(c, oldProps)
	if err != nil {
		return Result{}, err
	}
	if ap.name != oldAP.name {
		return Result{}, ErrReplace
	}
	if !reflect.DeepEqual(c.Properties["Tags"], oldProps["Tags"]) {
		return Result{}, handlerErrorf("Resource handler returned message: \"Changing the Tags of Auto Scaling group %s is not supported by the local Auto Scaling (it has no CreateOrUpdateTags); replace the group by giving it another AutoScalingGroupName\"", old.PhysicalID)
	}
	rolling, err := readRollingPolicy(c)
	if err != nil {
		return Result{}, err
	}
	// The changes after which CloudFormation replaces a group's instances: what they
	// launch from, and where.
	replacing := false
	for _, k := range []string{"LaunchTemplate", "MixedInstancesPolicy", "VPCZoneIdentifier", "AvailabilityZones"} {
		replacing = replacing || !reflect.DeepEqual(c.Properties[k], oldProps[k])
	}
	willReplace, err := readReplacingPolicy(c)
	if err != nil {
		return Result{}, err
	}
	if replacing && willReplace {
		return Result{}, ErrReplace
	}
	in := ap.in
	in.AutoScalingGroupName = aws.String(old.PhysicalID)
	if _, err := t.cl.AutoScaling.UpdateAutoScalingGroup(ctx, &in); err != nil {
		return Result{}, serviceFailure("AutoScaling", err)
	}
	if replacing && rolling != nil {
		r := &rollingUpdate{cl: t.cl, c: c, group: old.PhysicalID, policy: *rolling, min: in.MinSize, max: in.MaxSize}
		if err := r.run(ctx); err != nil {
			return Result{}, err
		}
	}
	return Result{PhysicalID: old.PhysicalID}, nil
}

// Delete empties the group and deletes it, then waits until its instances are gone.
func (t *asgType) Delete(ctx context.Context, _ *Call, r Result) error {
	if r.PhysicalID == "" {
		return nil // never made
	}
	zero := aws.Int32(0)
	_, err := t.cl.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.PhysicalID),
		MinSize: zero, MaxSize: zero, DesiredCapacity: zero})
	if isGroupNotFound(err) {
		return nil
	}
	if err != nil && serviceErrorCode(err) != "ScalingActivityInProgress" { // already being deleted
		return serviceFailure("AutoScaling", err)
	}
	_, err = t.cl.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.PhysicalID), ForceDelete: aws.Bool(true)})
	if isGroupNotFound(err) {
		return nil
	}
	if err != nil {
		return serviceFailure("AutoScaling", err)
	}
	return pollResource(ctx, asgWaitLimit, "Auto Scaling group "+r.PhysicalID+" to be deleted", func() (bool, string, error) {
		g, err := describeGroup(ctx, t.cl, r.PhysicalID)
		if err != nil || g == nil {
			return g == nil, "", err
		}
		return false, fmt.Sprintf("%d instance(s) remain", len(g.Instances)), nil
	})
}

// readReplacingPolicy reads UpdatePolicy's AutoScalingReplacingUpdate: whether a change
// that replaces the instances replaces the whole group instead.
func readReplacingPolicy(c *Call) (bool, error) {
	p := newPropReader(c)
	const at = "#/UpdatePolicy/AutoScalingReplacingUpdate"
	u := p.obj(c.UpdatePolicy, "#/UpdatePolicy", "AutoScalingReplacingUpdate")
	if u == nil {
		return false, p.err
	}
	p.known(u, at, "WillReplace")
	w := p.boolPtr(u, at, "WillReplace")
	return w != nil && *w, p.err
}

func isGroupNotFound(err error) bool {
	return err != nil && serviceErrorCode(err) == "ValidationError" && strings.Contains(err.Error(), "not found")
}

// describeGroup describes one group (nil when it does not exist).
func describeGroup(ctx context.Context, cl Clients, name string) (*astypes.AutoScalingGroup, error) {
	out, err := cl.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return nil, serviceFailure("AutoScaling", err)
	}
	for i := range out.AutoScalingGroups {
		if aws.ToString(out.AutoScalingGroups[i].AutoScalingGroupName) == name {
			return &out.AutoScalingGroups[i], nil
		}
	}
	return nil, nil
}

// pollResource polls cond every resourcePollInterval until it is done, it fails, ctx ends or limit
// passes; the error then says what was awaited and the last state cond described.
func pollResource(ctx context.Context, limit time.Duration, what string, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, state, err := cond()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return handlerErrorf("Resource handler returned message: \"Timed out after %s waiting for %s (%s)\" (HandlerErrorCode: NotStabilized)", limit, what, state)
		}
		if err := sleepOrDone(ctx, resourcePollInterval); err != nil {
			return handlerErrorf("Resource handler returned message: \"Stopped waiting for %s: %w (%s)\"", what, err, state)
		}
	}
}
