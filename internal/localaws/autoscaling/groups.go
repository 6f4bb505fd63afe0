package autoscaling

// This file holds the actions that create and change groups: CreateAutoScalingGroup,
// UpdateAutoScalingGroup and SetDesiredCapacity.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// groupParams are the settings CreateAutoScalingGroup and UpdateAutoScalingGroup take.
type groupParams struct {
	name              string
	min, max, desired *int64
	lt                *ltSpec
	mip               *mixedPolicy
	vpcZoneIdentifier *string
	zones             []string
	healthCheckType   *string
	grace, cooldown   *int64
	termination       []string
	protectNew, rebal *bool
	tags              []asTag
	launchConfigGiven bool
}

func parseLTSpec(n *protocol.Params) *ltSpec {
	if n == nil {
		return nil
	}
	s := &ltSpec{}
	s.ID, _ = n.Str("LaunchTemplateId")
	s.Name, _ = n.Str("LaunchTemplateName")
	s.Version, _ = n.Str("Version")
	return s
}

// cloudFormationTags are the reserved tags CloudFormation puts on the groups of a
// stack (and, propagated at launch, on their instances); the local CloudFormation
// creates groups through this API, so these alone of the aws: keys are taken.
var cloudFormationTags = map[string]bool{
	"aws:cloudformation:stack-name": true, "aws:cloudformation:stack-id": true, "aws:cloudformation:logical-id": true,
}

func parseGroupParams(root *protocol.Params, create bool) (groupParams, *protocol.Error) {
	var p groupParams
	var aerr *protocol.Error
	p.name, _ = root.Str("AutoScalingGroupName")
	if p.name == "" {
		return p, protocol.ValidationError("1 validation error detected: Value null at 'autoScalingGroupName' failed to satisfy constraint: Member must not be null")
	}
	if len(p.name) > 255 {
		return p, protocol.ValidationError("1 validation error detected: Value '%s' at 'autoScalingGroupName' failed to satisfy constraint: Member must have length less than or equal to 255", p.name)
	}
	for name, dst := range map[string]**int64{"MinSize": &p.min, "MaxSize": &p.max, "DesiredCapacity": &p.desired,
		"HealthCheckGracePeriod": &p.grace, "DefaultCooldown": &p.cooldown, "DefaultInstanceWarmup": new(*int64), "MaxInstanceLifetime": new(*int64)} {
		if *dst, aerr = root.Int(name); aerr != nil {
			return p, aerr
		}
	}
	p.lt = parseLTSpec(root.Child("LaunchTemplate"))
	if m := root.Child("MixedInstancesPolicy"); m != nil {
		p.mip = &mixedPolicy{}
		lt := m.Child("LaunchTemplate")
		if s := parseLTSpec(lt.Child("LaunchTemplateSpecification")); s != nil {
			p.mip.lt = *s
		}
		for _, o := range lt.List("Overrides") {
			var x ltOverride
			x.InstanceType, _ = o.Str("InstanceType")
			x.WeightedCapacity, _ = o.Str("WeightedCapacity")
			p.mip.overrides = append(p.mip.overrides, x)
		}
		if d := m.Child("InstancesDistribution"); d != nil {
			dist := &p.mip.dist
			dist.OnDemandAllocationStrategy, _ = d.Str("OnDemandAllocationStrategy")
			dist.SpotAllocationStrategy, _ = d.Str("SpotAllocationStrategy")
			dist.SpotMaxPrice = d.StrPtr("SpotMaxPrice")
			for name, dst := range map[string]**int64{"OnDemandBaseCapacity": &dist.OnDemandBaseCapacity,
				"OnDemandPercentageAboveBaseCapacity": &dist.OnDemandPercentageAboveBaseCapacity, "SpotInstancePools": &dist.SpotInstancePools} {
				if *dst, aerr = d.Int(name); aerr != nil {
					return p, aerr
				}
			}
		}
	}
	_, p.launchConfigGiven = root.Str("LaunchConfigurationName")
	p.vpcZoneIdentifier = root.StrPtr("VPCZoneIdentifier")
	p.zones = root.StrList("AvailabilityZones")
	p.healthCheckType = root.StrPtr("HealthCheckType")
	p.termination = root.StrList("TerminationPolicies")
	if p.protectNew, aerr = root.Bool("NewInstancesProtectedFromScaleIn"); aerr != nil {
		return p, aerr
	}
	if p.rebal, aerr = root.Bool("CapacityRebalance"); aerr != nil {
		return p, aerr
	}
	// Accepted, with no effect on local instances.
	root.Str("ServiceLinkedRoleARN")
	root.Str("Context")
	if create {
		for _, t := range root.List("Tags") {
			var tag asTag
			tag.Key, _ = t.Str("Key")
			tag.Value, _ = t.Str("Value")
			prop, aerr := t.Bool("PropagateAtLaunch")
			if aerr != nil {
				return p, aerr
			}
			tag.Propagate = prop != nil && *prop
			t.Str("ResourceId")
			t.Str("ResourceType")
			if tag.Key == "" {
				return p, protocol.ValidationError("Tag key cannot be empty.")
			}
			if strings.HasPrefix(tag.Key, "aws:") && !cloudFormationTags[tag.Key] {
				return p, protocol.ValidationError("Tag keys starting with 'aws:' are reserved for internal use.")
			}
			p.tags = append(p.tags, tag)
		}
	}
	return p, root.Finish()
}

// placement resolves a group's subnets and zones from VPCZoneIdentifier and
// AvailabilityZones.
func (a *AutoScaling) placement(vpcZoneIdentifier string, zones []string) (subnets, enabled []string, aerr *protocol.Error) {
	known := map[string]bool{}
	for _, s := range a.cfg.Subnets {
		known[s.AvailabilityZone] = true
	}
	for _, z := range zones {
		if !known[z] {
			return nil, nil, protocol.ValidationError("Invalid Availability Zone: %s (the local cloud's zones: %s)", z, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	if strings.TrimSpace(vpcZoneIdentifier) != "" {
		for s := range strings.SplitSeq(vpcZoneIdentifier, ",") {
			s = strings.TrimSpace(s)
			z, ok := a.zoneOf(s)
			if !ok {
				return nil, nil, protocol.ValidationError("The subnet ID '%s' does not exist", s)
			}
			if len(zones) > 0 && !slices.Contains(zones, z) {
				return nil, nil, protocol.ValidationError("The availability zones of the specified subnets and the Auto Scaling group do not match")
			}
			if !slices.Contains(subnets, s) {
				subnets = append(subnets, s)
			}
			if !slices.Contains(enabled, z) {
				enabled = append(enabled, z)
			}
		}
		return subnets, enabled, nil
	}
	if len(zones) == 0 {
		return nil, nil, protocol.ValidationError("At least one Availability Zone or VPC ec2.Subnet is required.")
	}
	for _, z := range zones {
		if slices.Contains(enabled, z) {
			continue
		}
		enabled = append(enabled, z)
		for _, s := range a.cfg.Subnets {
			if s.AvailabilityZone == z {
				subnets = append(subnets, s.ID)
				break
			}
		}
	}
	return subnets, enabled, nil
}

// checkTemplate resolves a group's launch template, filling in both its ID and name.
func (a *AutoScaling) checkTemplate(s *ltSpec) *protocol.Error {
	switch {
	case s.ID != "" && s.Name != "":
		return protocol.ValidationError("You must specify either a launch template ID or a launch template name in the request, but not both.")
	case s.ID == "" && s.Name == "":
		return protocol.ValidationError("You must specify either a launch template ID or a launch template name in the request.")
	}
	if s.Version == "" {
		s.Version = "$Default"
	}
	t, err := a.cfg.Templates.Resolve(s.ID, s.Name, s.Version)
	if err != nil {
		return protocol.ValidationError("You must use a valid fully-formed launch template. %s", err.Error())
	}
	s.ID, s.Name = t.ID, t.Name
	return nil
}

func checkSizes(min, max, desired int64) *protocol.Error {
	if min > max {
		return protocol.ValidationError("Max bound, %d, must be greater than or equal to min bound, %d", max, min)
	}
	if desired < min || desired > max {
		return protocol.ValidationError("Desired capacity:%d must be between the specified min size:%d and max size:%d", desired, min, max)
	}
	return nil
}

func (a *AutoScaling) createGroup(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	p, aerr := parseGroupParams(root, true)
	if aerr != nil {
		return nil, aerr
	}
	if p.launchConfigGiven {
		return nil, protocol.ValidationError("Launch configurations are not emulated by the local cloud: use LaunchTemplate or MixedInstancesPolicy.")
	}
	if (p.lt == nil) == (p.mip == nil) {
		return nil, protocol.ValidationError("Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter.")
	}
	if p.min == nil || p.max == nil {
		return nil, protocol.ValidationError("1 validation error detected: Value null at 'minSize' or 'maxSize' failed to satisfy constraint: Member must not be null")
	}
	desired := *p.min
	if p.desired != nil {
		desired = *p.desired
	}
	if aerr := checkSizes(*p.min, *p.max, desired); aerr != nil {
		return nil, aerr
	}
	g := &asGroup{name: p.name, min: *p.min, max: *p.max, desired: desired, healthCheckType: "EC2", cooldown: 300,
		termination: []string{"Default"}, tags: p.tags, instances: map[string]*asInstance{}, launching: map[string]int{}}
	if p.lt != nil {
		if aerr := a.checkTemplate(p.lt); aerr != nil {
			return nil, aerr
		}
		g.lt = p.lt
	} else {
		if aerr := a.checkTemplate(&p.mip.lt); aerr != nil {
			return nil, aerr
		}
		g.mip = p.mip
	}
	var vpc string
	if p.vpcZoneIdentifier != nil {
		vpc = *p.vpcZoneIdentifier
	}
	if g.subnets, g.zones, aerr = a.placement(vpc, p.zones); aerr != nil {
		return nil, aerr
	}
	g.apply(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.groups[p.name]; dup {
		return nil, protocol.Errorf(http.StatusBadRequest, "AlreadyExists", "AutoScalingGroup by this name already exists - A group with the name %s already exists", p.name)
	}
	if len(a.groups) >= maxGroups {
		return nil, protocol.Errorf(http.StatusBadRequest, "LimitExceeded", "You have reached your limit of %d Auto Scaling groups in this region.", maxGroups)
	}
	g.created = a.now().UTC()
	g.arn = fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", a.cfg.Region, a.cfg.AccountID, protocol.NewRequestID(), p.name)
	a.groups[p.name] = g
	return nil, nil
}

// apply sets the optional settings p gives.
func (g *asGroup) apply(p groupParams) {
	if p.healthCheckType != nil {
		g.healthCheckType = *p.healthCheckType
	}
	if p.grace != nil {
		g.gracePeriod = *p.grace
	}
	if p.cooldown != nil {
		g.cooldown = *p.cooldown
	}
	if len(p.termination) > 0 {
		g.termination = p.termination
	}
	if p.protectNew != nil {
		g.protectNew = *p.protectNew
	}
	if p.rebal != nil {
		g.capacityRebalance = *p.rebal
	}
}

//nolint:gocyclo // one independent check per optional API parameter.
func (a *AutoScaling) updateGroup(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	p, aerr := parseGroupParams(root, false)
	if aerr != nil {
		return nil, aerr
	}
	if p.launchConfigGiven {
		return nil, protocol.ValidationError("Launch configurations are not emulated by the local cloud: use LaunchTemplate or MixedInstancesPolicy.")
	}
	if p.lt != nil {
		if aerr := a.checkTemplate(p.lt); aerr != nil {
			return nil, aerr
		}
	}
	if p.mip != nil {
		if aerr := a.checkTemplate(&p.mip.lt); aerr != nil {
			return nil, aerr
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[p.name]
	if !ok {
		return nil, groupNotFound(p.name)
	}
	if g.deleting {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "ScalingActivityInProgress", Message: "The Auto Scaling group is being deleted."}
	}
	min, max, desired := g.min, g.max, g.desired
	if p.min != nil {
		min = *p.min
	}
	if p.max != nil {
		max = *p.max
	}
	switch {
	case p.desired != nil:
		desired = *p.desired
	case p.min != nil && min > desired:
		desired = min
	case p.max != nil && max < desired:
		desired = max
	}
	if aerr := checkSizes(min, max, desired); aerr != nil {
		return nil, aerr
	}
	if p.vpcZoneIdentifier != nil || p.zones != nil {
		vpc := strings.Join(g.subnets, ",")
		if p.vpcZoneIdentifier != nil {
			vpc = *p.vpcZoneIdentifier
		}
		subnets, zones, aerr := a.placement(vpc, p.zones)
		if aerr != nil {
			return nil, aerr
		}
		g.subnets, g.zones = subnets, zones
	}
	if p.lt != nil {
		g.lt, g.mip = p.lt, nil
	}
	if p.mip != nil {
		g.mip, g.lt = p.mip, nil
	}
	g.min, g.max, g.desired = min, max, desired
	g.apply(p)
	return nil, nil
}

func (a *AutoScaling) setDesiredCapacity(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	name, _ := root.Str("AutoScalingGroupName")
	desired, aerr := root.Int("DesiredCapacity")
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := root.Bool("HonorCooldown"); aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	if desired == nil {
		return nil, protocol.ValidationError("1 validation error detected: Value null at 'desiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[name]
	if !ok || g.deleting {
		return nil, groupNotFound(name)
	}
	switch {
	case *desired > g.max:
		return nil, protocol.ValidationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", *desired, g.max)
	case *desired < g.min:
		return nil, protocol.ValidationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", *desired, g.min)
	}
	g.desired = *desired
	return nil, nil
}
