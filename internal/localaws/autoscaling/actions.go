package autoscaling

// This file serves Auto Scaling on its Query protocol (Version 2011-01-01): the table
// of actions, and the actions on instances, deletion and the Describe actions;
// groups.go holds the actions that create and change groups.

import (
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

const xmlns = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

// timeFormat is how Auto Scaling writes times.
const timeFormat = "2006-01-02T15:04:05.000Z"

// maxGroups is Auto Scaling's quota of groups per region.
const maxGroups = 500

func groupNotFound(name string) *protocol.Error {
	return protocol.ValidationError("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", name)
}

// newService serves the actions of Auto Scaling's table.
func (a *AutoScaling) newService() *protocol.Service {
	return &protocol.Service{
		Dialect: protocol.Query, WriteError: protocol.QueryErrorWriter(xmlns), Admit: a.admit,
		Unsigned: &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."},
		// Every action that succeeds wakes the reconcile loop, to act on its change now.
		Wrap: func(r *protocol.Request, result any) any {
			a.wake()
			return protocol.QueryWrap(xmlns)(r, result)
		},
		Actions: map[string]protocol.Handler{
			"CreateAutoScalingGroup":              a.createGroup,
			"UpdateAutoScalingGroup":              a.updateGroup,
			"SetDesiredCapacity":                  a.setDesiredCapacity,
			"DescribeAutoScalingGroups":           a.describeGroups,
			"TerminateInstanceInAutoScalingGroup": a.terminateInstance,
			"SetInstanceHealth":                   a.setInstanceHealth,
			"DeleteAutoScalingGroup":              a.deleteGroup,
			"DescribeScalingActivities":           a.describeActivities,
		},
	}
}

func (a *AutoScaling) admit(*protocol.Request) *protocol.Error {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	return nil
}

// ServeHTTP answers the actions of Auto Scaling's table.
func (a *AutoScaling) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.service.ServeHTTP(w, r) }

// findInstance finds the group of an instance; a.mu is held.
func (a *AutoScaling) findInstance(id string) (*asGroup, *asInstance) {
	for _, g := range a.groups {
		if in, ok := g.instances[id]; ok {
			return g, in
		}
	}
	return nil, nil
}

func instanceNotFound(id string) *protocol.Error {
	return protocol.ValidationError("Instance Id not found - No managed instance found for instance ID: %s", id)
}

type terminateResult struct {
	XMLName    xml.Name      `xml:"TerminateInstanceInAutoScalingGroupResult"`
	Activity   *activityXML  `xml:"Activity,omitempty"`
	Activities []activityXML `xml:"Activities>member,omitempty"`
}

func (a *AutoScaling) terminateInstance(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	var ids []string
	if id, ok := root.Str("InstanceId"); ok {
		ids = append(ids, id)
	}
	ids = append(ids, root.StrList("InstanceIds")...)
	groupName, _ := root.Str("AutoScalingGroupName")
	dec, aerr := root.Bool("ShouldDecrementDesiredCapacity")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	if dec == nil {
		return nil, protocol.ValidationError("1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null")
	}
	if len(ids) == 0 {
		return nil, protocol.ValidationError("Either InstanceId or InstanceIds must be given.")
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
				return nil, protocol.ValidationError("Currently, desiredCapacity is %d and minSize is %d. Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size constraint.", g.desired, g.min)
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

func (a *AutoScaling) setInstanceHealth(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	id, _ := root.Str("InstanceId")
	status, _ := root.Str("HealthStatus")
	if _, aerr := root.Bool("ShouldRespectGracePeriod"); aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	if status != "Healthy" && status != "Unhealthy" {
		return nil, protocol.ValidationError("Valid values for HealthStatus are Healthy and Unhealthy; got '%s'.", status)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, in := a.findInstance(id)
	if in == nil {
		return nil, instanceNotFound(id)
	}
	in.health = status
	return nil, nil
}

func (a *AutoScaling) deleteGroup(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	name, _ := root.Str("AutoScalingGroupName")
	force, aerr := root.Bool("ForceDelete")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.groups[name]
	if !ok {
		return nil, groupNotFound(name)
	}
	if force != nil && *force {
		g.deleting = true
		return nil, nil
	}
	if len(g.instances) > 0 || g.inFlight() > 0 {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "ResourceInUse", Message: "You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group."}
	}
	for _, act := range a.activities {
		if act.group == name && act.status == "InProgress" {
			return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "ScalingActivityInProgress", Message: "You cannot delete an AutoScalingGroup while there are scaling activities in progress for that group."}
		}
	}
	delete(a.groups, name)
	for _, act := range a.activities {
		if act.group == name {
			act.groupDeleted = true
		}
	}
	return nil, nil
}

type describeGroupsResult struct {
	XMLName   xml.Name      `xml:"DescribeAutoScalingGroupsResult"`
	Groups    []asgGroupXML `xml:"AutoScalingGroups>member"`
	NextToken string        `xml:"NextToken,omitempty"`
}

// groupMatches applies DescribeAutoScalingGroups' tag filters.
func (g *asGroup) matches(name string, values []string) (bool, *protocol.Error) {
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
			return false, protocol.ValidationError("Filter name '%s' is invalid: use tag-key, tag-value or tag:<key>.", name)
		}
		if slices.Contains(values, have) {
			return true, nil
		}
	}
	if name != "tag-key" && name != "tag-value" && !strings.HasPrefix(name, "tag:") {
		return false, protocol.ValidationError("Filter name '%s' is invalid: use tag-key, tag-value or tag:<key>.", name)
	}
	return false, nil
}

func (a *AutoScaling) describeGroups(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	names := root.StrList("AutoScalingGroupNames")
	type filter struct {
		name   string
		values []string
	}
	var filters []filter
	for _, f := range root.List("Filters") {
		n, _ := f.Str("Name")
		filters = append(filters, filter{n, f.StrList("Values")})
	}
	page, aerr := root.ReadPage("MaxRecords", 1, 100, 50)
	if aerr != nil {
		return nil, aerr
	}
	withInstances := true
	if b, aerr := root.Bool("IncludeInstances"); aerr != nil {
		return nil, aerr
	} else if b != nil {
		withInstances = *b
	}
	if _, aerr := root.Bool("IncludeManagedResources"); aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
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
	items, next, _ := protocol.Page(out, page.Token, page.Max)
	return describeGroupsResult{Groups: items, NextToken: next}, nil
}

type describeActivitiesResult struct {
	XMLName    xml.Name      `xml:"DescribeScalingActivitiesResult"`
	Activities []activityXML `xml:"Activities>member"`
	NextToken  string        `xml:"NextToken,omitempty"`
}

func (a *AutoScaling) describeActivities(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	name, _ := root.Str("AutoScalingGroupName")
	ids := root.StrList("ActivityIds")
	page, aerr := root.ReadPage("MaxRecords", 1, 100, 100)
	if aerr != nil {
		return nil, aerr
	}
	deleted, aerr := root.Bool("IncludeDeletedGroups")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
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
	items, next, _ := protocol.Page(out, page.Token, page.Max)
	return describeActivitiesResult{Activities: items, NextToken: next}, nil
}

// runContext is the context of Run (launches and terminations outlive requests).
func (a *AutoScaling) runContext() context.Context {
	if a.ctx != nil {
		return a.ctx
	}
	return context.Background()
}
