package localaws

// This file serves Auto Scaling on its Query protocol (Version 2011-01-01, member lists,
// <OpResult> wrappers, <ErrorResponse> errors): CreateAutoScalingGroup,
// UpdateAutoScalingGroup, SetDesiredCapacity, DescribeAutoScalingGroups,
// TerminateInstanceInAutoScalingGroup, SetInstanceHealth, DeleteAutoScalingGroup and
// DescribeScalingActivities.

import (
	"cmp"
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

const asgXMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

// asgTimeFormat is how Auto Scaling writes times.
const asgTimeFormat = "2006-01-02T15:04:05.000Z"

// maxGroups is Auto Scaling's quota of groups per region.
const maxGroups = 500

type asgErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

// writeQueryError writes an awsQuery error (Auto Scaling, CloudFormation).
func writeQueryError(xmlns string) func(http.ResponseWriter, string, *apiError) {
	return func(w http.ResponseWriter, requestID string, e *apiError) {
		out := asgErrorResponse{Xmlns: xmlns, RequestID: requestID}
		out.Error.Type, out.Error.Code, out.Error.Message = "Sender", e.code, e.message
		if e.status >= 500 {
			out.Error.Type = "Receiver"
		}
		writeXML(w, e.status, out)
	}
}

var writeASGError = writeQueryError(asgXMLNS)

// queryResponse is an awsQuery answer: the operation's result, if any, and its
// request ID.
type queryResponse struct {
	XMLName          xml.Name
	Xmlns            string `xml:"xmlns,attr"`
	Result           any
	ResponseMetadata struct {
		RequestID string `xml:"RequestId"`
	} `xml:"ResponseMetadata"`
}

func validationError(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ValidationError", fmt.Sprintf(format, args...)}
}

func groupNotFound(name string) *apiError {
	return validationError("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", name)
}

// ServeHTTP answers the Auto Scaling actions.
func (a *AutoScaling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}, writeASGError)
	if !ok {
		return
	}
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	action := form.Get("Action")
	root := parseFormTree(form)
	var result any
	var aerr *apiError
	switch action {
	case "CreateAutoScalingGroup":
		aerr = a.createGroup(root)
	case "UpdateAutoScalingGroup":
		aerr = a.updateGroup(root)
	case "SetDesiredCapacity":
		aerr = a.setDesiredCapacity(root)
	case "DescribeAutoScalingGroups":
		result, aerr = a.describeGroups(root)
	case "TerminateInstanceInAutoScalingGroup":
		result, aerr = a.terminateInstance(root)
	case "SetInstanceHealth":
		aerr = a.setInstanceHealth(root)
	case "DeleteAutoScalingGroup":
		aerr = a.deleteGroup(root)
	case "DescribeScalingActivities":
		result, aerr = a.describeActivities(root)
	default:
		aerr = &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)}
	}
	if aerr != nil {
		writeASGError(w, reqID, aerr)
		return
	}
	a.wake()
	out := queryResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: asgXMLNS, Result: result}
	out.ResponseMetadata.RequestID = reqID
	writeXML(w, http.StatusOK, out)
}

// asgUnknown refuses a parameter no one read.
func asgUnknown(root *formNode) *apiError {
	if u := root.unknown(); u != "" {
		return validationError("The parameter %s is not recognized by the local cloud's Auto Scaling", u)
	}
	return nil
}

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

func parseLTSpec(n *formNode) *ltSpec {
	if n == nil {
		return nil
	}
	s := &ltSpec{}
	s.ID, _ = n.str("LaunchTemplateId")
	s.Name, _ = n.str("LaunchTemplateName")
	s.Version, _ = n.str("Version")
	return s
}

func parseGroupParams(root *formNode, create bool) (groupParams, *apiError) {
	var p groupParams
	var aerr *apiError
	p.name, _ = root.str("AutoScalingGroupName")
	if p.name == "" {
		return p, validationError("1 validation error detected: Value null at 'autoScalingGroupName' failed to satisfy constraint: Member must not be null")
	}
	if len(p.name) > 255 {
		return p, validationError("1 validation error detected: Value '%s' at 'autoScalingGroupName' failed to satisfy constraint: Member must have length less than or equal to 255", p.name)
	}
	for name, dst := range map[string]**int64{"MinSize": &p.min, "MaxSize": &p.max, "DesiredCapacity": &p.desired,
		"HealthCheckGracePeriod": &p.grace, "DefaultCooldown": &p.cooldown, "DefaultInstanceWarmup": new(*int64), "MaxInstanceLifetime": new(*int64)} {
		if *dst, aerr = root.int(name); aerr != nil {
			return p, aerr
		}
	}
	p.lt = parseLTSpec(root.child("LaunchTemplate"))
	if m := root.child("MixedInstancesPolicy"); m != nil {
		p.mip = &mixedPolicy{}
		lt := m.child("LaunchTemplate")
		if s := parseLTSpec(lt.child("LaunchTemplateSpecification")); s != nil {
			p.mip.lt = *s
		}
		for _, o := range lt.list("Overrides", true) {
			var x ltOverride
			x.InstanceType, _ = o.str("InstanceType")
			x.WeightedCapacity, _ = o.str("WeightedCapacity")
			p.mip.overrides = append(p.mip.overrides, x)
		}
		if d := m.child("InstancesDistribution"); d != nil {
			dist := &p.mip.dist
			dist.OnDemandAllocationStrategy, _ = d.str("OnDemandAllocationStrategy")
			dist.SpotAllocationStrategy, _ = d.str("SpotAllocationStrategy")
			dist.SpotMaxPrice = d.strPtr("SpotMaxPrice")
			for name, dst := range map[string]**int64{"OnDemandBaseCapacity": &dist.OnDemandBaseCapacity,
				"OnDemandPercentageAboveBaseCapacity": &dist.OnDemandPercentageAboveBaseCapacity, "SpotInstancePools": &dist.SpotInstancePools} {
				if *dst, aerr = d.int(name); aerr != nil {
					return p, aerr
				}
			}
		}
	}
	_, p.launchConfigGiven = root.str("LaunchConfigurationName")
	p.vpcZoneIdentifier = root.strPtr("VPCZoneIdentifier")
	p.zones = root.strList("AvailabilityZones", true)
	p.healthCheckType = root.strPtr("HealthCheckType")
	p.termination = root.strList("TerminationPolicies", true)
	if p.protectNew, aerr = root.bool("NewInstancesProtectedFromScaleIn"); aerr != nil {
		return p, aerr
	}
	if p.rebal, aerr = root.bool("CapacityRebalance"); aerr != nil {
		return p, aerr
	}
	// Accepted, with no effect on local instances.
	root.str("ServiceLinkedRoleARN")
	root.str("Context")
	if create {
		for _, t := range root.list("Tags", true) {
			var tag asTag
			tag.Key, _ = t.str("Key")
			tag.Value, _ = t.str("Value")
			prop, aerr := t.bool("PropagateAtLaunch")
			if aerr != nil {
				return p, aerr
			}
			tag.Propagate = prop != nil && *prop
			t.str("ResourceId")
			t.str("ResourceType")
			if tag.Key == "" {
				return p, validationError("Tag key cannot be empty.")
			}
			if strings.HasPrefix(tag.Key, "aws:") {
				return p, validationError("Tag keys starting with 'aws:' are reserved for internal use.")
			}
			p.tags = append(p.tags, tag)
		}
	}
	return p, asgUnknown(root)
}

// placement resolves a group's subnets and zones from VPCZoneIdentifier and
// AvailabilityZones.
func (a *AutoScaling) placement(vpcZoneIdentifier string, zones []string) (subnets, enabled []string, aerr *apiError) {
	known := map[string]bool{}
	for _, s := range a.cfg.Subnets {
		known[s.AvailabilityZone] = true
	}
	for _, z := range zones {
		if !known[z] {
			return nil, nil, validationError("Invalid Availability Zone: %s (the local cloud's zones: %s)", z, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	if strings.TrimSpace(vpcZoneIdentifier) != "" {
		for s := range strings.SplitSeq(vpcZoneIdentifier, ",") {
			s = strings.TrimSpace(s)
			z, ok := a.zoneOf(s)
			if !ok {
				return nil, nil, validationError("The subnet ID '%s' does not exist", s)
			}
			if len(zones) > 0 && !slices.Contains(zones, z) {
				return nil, nil, validationError("The availability zones of the specified subnets and the Auto Scaling group do not match")
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
		return nil, nil, validationError("At least one Availability Zone or VPC Subnet is required.")
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
func (a *AutoScaling) checkTemplate(s *ltSpec) *apiError {
	switch {
	case s.ID != "" && s.Name != "":
		return validationError("You must specify either a launch template ID or a launch template name in the request, but not both.")
	case s.ID == "" && s.Name == "":
		return validationError("You must specify either a launch template ID or a launch template name in the request.")
	}
	if s.Version == "" {
		s.Version = "$Default"
	}
	t, err := a.cfg.Templates.Resolve(s.ID, s.Name, s.Version)
	if err != nil {
		return validationError("You must use a valid fully-formed launch template. %s", err.Error())
	}
	s.ID, s.Name = t.ID, t.Name
	return nil
}

func checkSizes(min, max, desired int64) *apiError {
	if min > max {
		return validationError("Max bound, %d, must be greater than or equal to min bound, %d", max, min)
	}
	if desired < min || desired > max {
		return validationError("Desired capacity:%d must be between the specified min size:%d and max size:%d", desired, min, max)
	}
	return nil
}

func (a *AutoScaling) createGroup(root *formNode) *apiError {
	p, aerr := parseGroupParams(root, true)
	if aerr != nil {
		return aerr
	}
	if p.launchConfigGiven {
		return validationError("Launch configurations are not emulated by the local cloud: use LaunchTemplate or MixedInstancesPolicy.")
	}
	if (p.lt == nil) == (p.mip == nil) {
		return validationError("Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter.")
	}
	if p.min == nil || p.max == nil {
		return validationError("1 validation error detected: Value null at 'minSize' or 'maxSize' failed to satisfy constraint: Member must not be null")
	}
	desired := *p.min
	if p.desired != nil {
		desired = *p.desired
	}
	if aerr := checkSizes(*p.min, *p.max, desired); aerr != nil {
		return aerr
	}
	g := &asGroup{name: p.name, min: *p.min, max: *p.max, desired: desired, healthCheckType: "EC2", cooldown: 300,
		termination: []string{"Default"}, tags: p.tags, instances: map[string]*asInstance{}, launching: map[string]int{}}
	if p.lt != nil {
		if aerr := a.checkTemplate(p.lt); aerr != nil {
			return aerr
		}
		g.lt = p.lt
	} else {
		if aerr := a.checkTemplate(&p.mip.lt); aerr != nil {
			return aerr
		}
		g.mip = p.mip
	}
	var vpc string
	if p.vpcZoneIdentifier != nil {
		vpc = *p.vpcZoneIdentifier
	}
	if g.subnets, g.zones, aerr = a.placement(vpc, p.zones); aerr != nil {
		return aerr
	}
	g.apply(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.groups[p.name]; dup {
		return &apiError{http.StatusBadRequest, "AlreadyExists", fmt.Sprintf("AutoScalingGroup by this name already exists - A group with the name %s already exists", p.name)}
	}
	if len(a.groups) >= maxGroups {
		return &apiError{http.StatusBadRequest, "LimitExceeded", fmt.Sprintf("You have reached your limit of %d Auto Scaling groups in this region.", maxGroups)}
	}
	g.created = a.now().UTC()
	g.arn = fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", a.cfg.Region, a.cfg.AccountID, newActivityID(), p.name)
	a.groups[p.name] = g
	return nil
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
func (a *AutoScaling) updateGroup(root *formNode) *apiError {
	p, aerr := parseGroupParams(root, false)
	if aerr != nil {
		return aerr
	}
	if p.launchConfigGiven {
		return validationError("Launch configurations are not emulated by the local cloud: use LaunchTemplate or MixedInstancesPolicy.")
	}
	if p.lt != nil {
		if aerr := a.checkTemplate(p.lt); aerr != nil {
			return aerr
		}
	}
	if p.mip != nil {
		if aerr := a.checkTemplate(&p.mip.lt); aerr != nil {
			return aerr
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[p.name]
	if !ok {
		return groupNotFound(p.name)
	}
	if g.deleting {
		return &apiError{http.StatusBadRequest, "ScalingActivityInProgress", "The Auto Scaling group is being deleted."}
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
		return aerr
	}
	if p.vpcZoneIdentifier != nil || p.zones != nil {
		vpc := strings.Join(g.subnets, ",")
		if p.vpcZoneIdentifier != nil {
			vpc = *p.vpcZoneIdentifier
		}
		subnets, zones, aerr := a.placement(vpc, p.zones)
		if aerr != nil {
			return aerr
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
	return nil
}

func (a *AutoScaling) setDesiredCapacity(root *formNode) *apiError {
	name, _ := root.str("AutoScalingGroupName")
	desired, aerr := root.int("DesiredCapacity")
	if aerr != nil {
		return aerr
	}
	if _, aerr := root.bool("HonorCooldown"); aerr != nil {
		return aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return aerr
	}
	if desired == nil {
		return validationError("1 validation error detected: Value null at 'desiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[name]
	if !ok || g.deleting {
		return groupNotFound(name)
	}
	switch {
	case *desired > g.max:
		return validationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", *desired, g.max)
	case *desired < g.min:
		return validationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", *desired, g.min)
	}
	g.desired = *desired
	return nil
}

// findInstance finds the group of an instance; a.mu is held.
func (a *AutoScaling) findInstance(id string) (*asGroup, *asInstance) {
	for _, g := range a.groups {
		if in, ok := g.instances[id]; ok {
			return g, in
		}
	}
	return nil, nil
}

func instanceNotFound(id string) *apiError {
	return validationError("Instance Id not found - No managed instance found for instance ID: %s", id)
}

type terminateResult struct {
	XMLName    xml.Name      `xml:"TerminateInstanceInAutoScalingGroupResult"`
	Activity   *activityXML  `xml:"Activity,omitempty"`
	Activities []activityXML `xml:"Activities>member,omitempty"`
}

func (a *AutoScaling) terminateInstance(root *formNode) (any, *apiError) {
	var ids []string
	if id, ok := root.str("InstanceId"); ok {
		ids = append(ids, id)
	}
	ids = append(ids, root.strList("InstanceIds", true)...)
	groupName, _ := root.str("AutoScalingGroupName")
	dec, aerr := root.bool("ShouldDecrementDesiredCapacity")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return nil, aerr
	}
	if dec == nil {
		return nil, validationError("1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	if len(ids) == 0 {
		return nil, validationError("Either InstanceId or InstanceIds must be given.")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	type target struct {
		g  *asGroup
		in *asInstance
	}
	var targets []target
	for _, id := range ids {
		g, in := a.findInstance(id)
		if in == nil || groupName != "" && g.name != groupName {
			return nil, instanceNotFound(id)
		}
		targets = append(targets, target{g, in})
	}
	out := terminateResult{}
	now := a.now().UTC().Format(time.RFC3339)
	for _, t := range targets {
		g, in := t.g, t.in
		if in.state == "Terminating" {
			if act := a.lastActivityFor(in.id); act != nil {
				out.Activities = append(out.Activities, act.xml())
			}
			continue
		}
		active, _ := g.active()
		cause := fmt.Sprintf("At %s instance %s was taken out of service in response to a user request.", now, in.id)
		if *dec {
			if g.desired-1 < g.min {
				return nil, validationError("Currently, desiredCapacity is %d and minSize is %d. Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size constraint.", g.desired, g.min)
			}
			cause = fmt.Sprintf("At %s instance %s was taken out of service in response to a user request, shrinking the capacity from %d to %d.", now, in.id, active, active-1)
			g.desired--
		}
		act := a.terminate(a.runContext(), g, in, cause)
		out.Activities = append(out.Activities, act.xml())
	}
	if len(out.Activities) > 0 {
		first := out.Activities[0]
		out.Activity = &first
	}
	return out, nil
}

// lastActivityFor is the newest activity about an instance; a.mu is held.
func (a *AutoScaling) lastActivityFor(id string) *activity {
	for i := len(a.activities) - 1; i >= 0; i-- {
		if strings.HasSuffix(a.activities[i].description, id) {
			return a.activities[i]
		}
	}
	return nil
}

func (a *AutoScaling) setInstanceHealth(root *formNode) *apiError {
	id, _ := root.str("InstanceId")
	status, _ := root.str("HealthStatus")
	if _, aerr := root.bool("ShouldRespectGracePeriod"); aerr != nil {
		return aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return aerr
	}
	if status != "Healthy" && status != "Unhealthy" {
		return validationError("Valid values for HealthStatus are Healthy and Unhealthy; got '%s'.", status)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, in := a.findInstance(id)
	if in == nil {
		return instanceNotFound(id)
	}
	in.health = status
	return nil
}

func (a *AutoScaling) deleteGroup(root *formNode) *apiError {
	name, _ := root.str("AutoScalingGroupName")
	force, aerr := root.bool("ForceDelete")
	if aerr != nil {
		return aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return aerr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[name]
	if !ok {
		return groupNotFound(name)
	}
	if force != nil && *force {
		g.deleting = true
		return nil
	}
	if len(g.instances) > 0 || g.inFlight() > 0 {
		return &apiError{http.StatusBadRequest, "ResourceInUse", "You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group."}
	}
	for _, act := range a.activities {
		if act.group == name && act.status == "InProgress" {
			return &apiError{http.StatusBadRequest, "ScalingActivityInProgress", "You cannot delete an AutoScalingGroup while there are scaling activities in progress for that group."}
		}
	}
	delete(a.groups, name)
	for _, act := range a.activities {
		if act.group == name {
			act.groupDeleted = true
		}
	}
	return nil
}

// asgPaging reads MaxRecords (1 to hi, default def) and NextToken.
func asgPaging(root *formNode, hi, def int64) (offset, max int, aerr *apiError) {
	m, aerr := root.int("MaxRecords")
	if aerr != nil {
		return 0, 0, aerr
	}
	max = int(def)
	if m != nil {
		if *m < 1 || *m > hi {
			return 0, 0, validationError("1 validation error detected: Value '%d' at 'maxRecords' failed to satisfy constraint: Member must have value between 1 and %d", *m, hi)
		}
		max = int(*m)
	}
	tok, _ := root.str("NextToken")
	offset, ok := parsePageToken(tok)
	if !ok {
		return 0, 0, &apiError{http.StatusBadRequest, "InvalidNextToken", "The token '" + tok + "' is invalid."}
	}
	return offset, max, nil
}

type describeGroupsResult struct {
	XMLName   xml.Name      `xml:"DescribeAutoScalingGroupsResult"`
	Groups    []asgGroupXML `xml:"AutoScalingGroups>member"`
	NextToken string        `xml:"NextToken,omitempty"`
}

// groupMatches applies DescribeAutoScalingGroups' tag filters.
func (g *asGroup) matches(name string, values []string) (bool, *apiError) {
	for _, t := range g.tags {
		var have string
		switch {
		case name == "tag-key":
			have = t.Key
		case name == "tag-value":
			have = t.Value
		case strings.HasPrefix(name, "tag:"):
			if t.Key != strings.TrimPrefix(name, "tag:") {
				continue
			}
			have = t.Value
		default:
			return false, validationError("Filter name '%s' is invalid: use tag-key, tag-value or tag:<key>.", name)
		}
		if slices.Contains(values, have) {
			return true, nil
		}
	}
	if name != "tag-key" && name != "tag-value" && !strings.HasPrefix(name, "tag:") {
		return false, validationError("Filter name '%s' is invalid: use tag-key, tag-value or tag:<key>.", name)
	}
	return false, nil
}

func (a *AutoScaling) describeGroups(root *formNode) (any, *apiError) {
	names := root.strList("AutoScalingGroupNames", true)
	type filter struct {
		name   string
		values []string
	}
	var filters []filter
	for _, f := range root.list("Filters", true) {
		n, _ := f.str("Name")
		filters = append(filters, filter{n, f.strList("Values", true)})
	}
	offset, max, aerr := asgPaging(root, 100, 50)
	if aerr != nil {
		return nil, aerr
	}
	withInstances := true
	if b, aerr := root.bool("IncludeInstances"); aerr != nil {
		return nil, aerr
	} else if b != nil {
		withInstances = *b
	}
	if _, aerr := root.bool("IncludeManagedResources"); aerr != nil {
		return nil, aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return nil, aerr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []asgGroupXML
	for _, name := range slices.Sorted(maps.Keys(a.groups)) {
		g := a.groups[name]
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		ok := true
		for _, f := range filters {
			m, aerr := g.matches(f.name, f.values)
			if aerr != nil {
				return nil, aerr
			}
			ok = ok && m
		}
		if ok {
			out = append(out, g.xml(withInstances))
		}
	}
	items, next := page(out, offset, max)
	return describeGroupsResult{Groups: items, NextToken: next}, nil
}

type describeActivitiesResult struct {
	XMLName    xml.Name      `xml:"DescribeScalingActivitiesResult"`
	Activities []activityXML `xml:"Activities>member"`
	NextToken  string        `xml:"NextToken,omitempty"`
}

func (a *AutoScaling) describeActivities(root *formNode) (any, *apiError) {
	name, _ := root.str("AutoScalingGroupName")
	ids := root.strList("ActivityIds", true)
	offset, max, aerr := asgPaging(root, 100, 100)
	if aerr != nil {
		return nil, aerr
	}
	deleted, aerr := root.bool("IncludeDeletedGroups")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := asgUnknown(root); aerr != nil {
		return nil, aerr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []activityXML
	for i := len(a.activities) - 1; i >= 0; i-- { // newest first
		act := a.activities[i]
		switch {
		case name != "" && act.group != name,
			len(ids) > 0 && !slices.Contains(ids, act.id),
			act.groupDeleted && (deleted == nil || !*deleted):
			continue
		}
		out = append(out, act.xml())
	}
	items, next := page(out, offset, max)
	return describeActivitiesResult{Activities: items, NextToken: next}, nil
}

// runContext is the context of Run (launches and terminations outlive requests).
func (a *AutoScaling) runContext() context.Context {
	if a.ctx != nil {
		return a.ctx
	}
	return context.Background()
}

// The XML of Auto Scaling's answers.

type asgLTXML struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"LaunchTemplateName,omitempty"`
	Version            string `xml:"Version,omitempty"`
}

type asgInstanceXML struct {
	InstanceID           string    `xml:"InstanceId"`
	InstanceType         string    `xml:"InstanceType"`
	AvailabilityZone     string    `xml:"AvailabilityZone"`
	LifecycleState       string    `xml:"LifecycleState"`
	HealthStatus         string    `xml:"HealthStatus"`
	LaunchTemplate       *asgLTXML `xml:"LaunchTemplate,omitempty"`
	ProtectedFromScaleIn bool      `xml:"ProtectedFromScaleIn"`
}

type asgTagXML struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type asgMIPXML struct {
	LaunchTemplate struct {
		LaunchTemplateSpecification asgLTXML `xml:"LaunchTemplateSpecification"`
		Overrides                   []struct {
			InstanceType     string `xml:"InstanceType,omitempty"`
			WeightedCapacity string `xml:"WeightedCapacity,omitempty"`
		} `xml:"Overrides>member"`
	} `xml:"LaunchTemplate"`
	InstancesDistribution struct {
		OnDemandAllocationStrategy          string  `xml:"OnDemandAllocationStrategy,omitempty"`
		OnDemandBaseCapacity                int64   `xml:"OnDemandBaseCapacity"`
		OnDemandPercentageAboveBaseCapacity int64   `xml:"OnDemandPercentageAboveBaseCapacity"`
		SpotAllocationStrategy              string  `xml:"SpotAllocationStrategy,omitempty"`
		SpotInstancePools                   int64   `xml:"SpotInstancePools"`
		SpotMaxPrice                        *string `xml:"SpotMaxPrice,omitempty"`
	} `xml:"InstancesDistribution"`
}

type asgGroupXML struct {
	AutoScalingGroupName             string           `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN              string           `xml:"AutoScalingGroupARN"`
	LaunchTemplate                   *asgLTXML        `xml:"LaunchTemplate,omitempty"`
	MixedInstancesPolicy             *asgMIPXML       `xml:"MixedInstancesPolicy,omitempty"`
	MinSize                          int64            `xml:"MinSize"`
	MaxSize                          int64            `xml:"MaxSize"`
	DesiredCapacity                  int64            `xml:"DesiredCapacity"`
	DefaultCooldown                  int64            `xml:"DefaultCooldown"`
	AvailabilityZones                []string         `xml:"AvailabilityZones>member"`
	HealthCheckType                  string           `xml:"HealthCheckType"`
	HealthCheckGracePeriod           int64            `xml:"HealthCheckGracePeriod"`
	Instances                        []asgInstanceXML `xml:"Instances>member"`
	CreatedTime                      string           `xml:"CreatedTime"`
	VPCZoneIdentifier                string           `xml:"VPCZoneIdentifier,omitempty"`
	Status                           string           `xml:"Status,omitempty"`
	Tags                             []asgTagXML      `xml:"Tags>member"`
	TerminationPolicies              []string         `xml:"TerminationPolicies>member"`
	NewInstancesProtectedFromScaleIn bool             `xml:"NewInstancesProtectedFromScaleIn"`
	CapacityRebalance                bool             `xml:"CapacityRebalance"`
}

type activityXML struct {
	ActivityID            string `xml:"ActivityId"`
	AutoScalingGroupName  string `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN   string `xml:"AutoScalingGroupARN"`
	Description           string `xml:"Description"`
	Cause                 string `xml:"Cause"`
	StartTime             string `xml:"StartTime"`
	EndTime               string `xml:"EndTime,omitempty"`
	StatusCode            string `xml:"StatusCode"`
	StatusMessage         string `xml:"StatusMessage,omitempty"`
	Progress              int    `xml:"Progress"`
	Details               string `xml:"Details"`
	AutoScalingGroupState string `xml:"AutoScalingGroupState"`
}

func (act *activity) xml() activityXML {
	x := activityXML{ActivityID: act.id, AutoScalingGroupName: act.group, AutoScalingGroupARN: act.groupARN, Description: act.description,
		Cause: act.cause, StartTime: act.start.Format(asgTimeFormat), StatusCode: act.status, StatusMessage: act.message,
		Progress: act.progress, Details: act.details, AutoScalingGroupState: "InService"}
	if !act.end.IsZero() {
		x.EndTime = act.end.Format(asgTimeFormat)
	}
	if act.groupDeleted {
		x.AutoScalingGroupState = "Deleted"
	}
	return x
}

func (s ltSpec) xml() *asgLTXML {
	return &asgLTXML{LaunchTemplateID: s.ID, LaunchTemplateName: s.Name, Version: s.Version}
}

func (g *asGroup) xml(withInstances bool) asgGroupXML {
	x := asgGroupXML{AutoScalingGroupName: g.name, AutoScalingGroupARN: g.arn, MinSize: g.min, MaxSize: g.max, DesiredCapacity: g.desired,
		DefaultCooldown: g.cooldown, AvailabilityZones: slices.Clone(g.zones), HealthCheckType: g.healthCheckType,
		HealthCheckGracePeriod: g.gracePeriod, CreatedTime: g.created.Format(asgTimeFormat), VPCZoneIdentifier: strings.Join(g.subnets, ","),
		TerminationPolicies: slices.Clone(g.termination), NewInstancesProtectedFromScaleIn: g.protectNew, CapacityRebalance: g.capacityRebalance}
	if g.deleting {
		x.Status = "Delete in progress"
	}
	if g.lt != nil {
		x.LaunchTemplate = g.lt.xml()
	}
	if g.mip != nil {
		m := &asgMIPXML{}
		m.LaunchTemplate.LaunchTemplateSpecification = *g.mip.lt.xml()
		for _, o := range g.mip.overrides {
			m.LaunchTemplate.Overrides = append(m.LaunchTemplate.Overrides, struct {
				InstanceType     string `xml:"InstanceType,omitempty"`
				WeightedCapacity string `xml:"WeightedCapacity,omitempty"`
			}{o.InstanceType, o.WeightedCapacity})
		}
		d, in := g.mip.dist, &m.InstancesDistribution
		in.OnDemandAllocationStrategy = cmp.Or(d.OnDemandAllocationStrategy, "prioritized")
		in.SpotAllocationStrategy = cmp.Or(d.SpotAllocationStrategy, "lowest-price")
		in.OnDemandBaseCapacity, in.OnDemandPercentageAboveBaseCapacity, in.SpotInstancePools = 0, 100, 2
		if d.OnDemandBaseCapacity != nil {
			in.OnDemandBaseCapacity = *d.OnDemandBaseCapacity
		}
		if d.OnDemandPercentageAboveBaseCapacity != nil {
			in.OnDemandPercentageAboveBaseCapacity = *d.OnDemandPercentageAboveBaseCapacity
		}
		if d.SpotInstancePools != nil {
			in.SpotInstancePools = *d.SpotInstancePools
		}
		in.SpotMaxPrice = d.SpotMaxPrice
		x.MixedInstancesPolicy = m
	}
	for _, t := range g.tags {
		x.Tags = append(x.Tags, asgTagXML{ResourceID: g.name, ResourceType: "auto-scaling-group", Key: t.Key, Value: t.Value, PropagateAtLaunch: t.Propagate})
	}
	if withInstances {
		for _, id := range slices.Sorted(maps.Keys(g.instances)) {
			in := g.instances[id]
			x.Instances = append(x.Instances, asgInstanceXML{InstanceID: in.id, InstanceType: in.instanceType, AvailabilityZone: in.zone,
				LifecycleState: in.state, HealthStatus: in.health, LaunchTemplate: in.lt.xml(), ProtectedFromScaleIn: in.protected})
		}
	}
	return x
}
