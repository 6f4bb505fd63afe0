package autoscaling

// This file holds the reconcile loop: which instances to launch and terminate, where,
// and the scaling activities that record them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// active counts g's instances that are not terminating.
func (g *asGroup) active() (n int64, byZone map[string]int) {
	byZone = map[string]int{}
	for _, in := range g.instances {
		if in.state != "Terminating" {
			n++
			byZone[in.zone]++
		}
	}
	return n, byZone
}

func (g *asGroup) inFlight() int64 {
	var n int64
	for _, c := range g.launching {
		n += int64(c)
	}
	return n
}

// runningInstances counts the account's running instances and launches under way;
// a.mu is held.
func (a *AutoScaling) runningInstances() int {
	n := 0
	if a.cfg.EC2 != nil {
		for _, r := range a.cfg.EC2.Instances() {
			if r.State == "pending" || r.State == "running" {
				n++
			}
		}
	} else {
		for _, g := range a.groups {
			for _, in := range g.instances {
				if in.state != "Terminating" {
					n++
				}
			}
		}
	}
	for _, g := range a.groups {
		n += int(g.inFlight())
	}
	return n
}

// checkHealth marks InService instances that EC2 no longer shows running as Unhealthy;
// a.mu is held.
func (a *AutoScaling) checkHealth() {
	if a.cfg.EC2 == nil {
		return
	}
	states := map[string]string{}
	for _, r := range a.cfg.EC2.Instances() {
		states[r.ID] = r.State
	}
	for _, g := range a.groups {
		for _, in := range g.instances {
			if st := states[in.id]; in.state == "InService" && st != "running" && st != "pending" {
				in.health = "Unhealthy"
			}
		}
	}
}

// reconcile moves every group toward its desired capacity: it starts launches and
// terminations, which finish in goroutines and wake the loop again.
func (a *AutoScaling) reconcile(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	a.checkHealth()
	now := a.now()
	for _, name := range slices.Sorted(maps.Keys(a.groups)) {
		g := a.groups[name]
		if g.deleting && len(g.instances) == 0 && g.inFlight() == 0 {
			delete(a.groups, name)
			for _, act := range a.activities {
				if act.group == name {
					act.groupDeleted = true
				}
			}
			continue
		}
		// Unhealthy instances are replaced: terminated here, launched again below.
		for _, id := range slices.Sorted(maps.Keys(g.instances)) {
			if in := g.instances[id]; in.health == "Unhealthy" && in.state == "InService" {
				cause := fmt.Sprintf("At %s an instance was taken out of service in response to an EC2 instance status check failure.", now.UTC().Format(time.RFC3339))
				a.terminate(ctx, g, in, cause)
			}
		}
		desired := g.desired
		if g.deleting {
			desired = 0
		}
		active, byZone := g.active()
		have := active + g.inFlight()
		switch {
		case have < desired:
			for range desired - have {
				if !a.launch(ctx, g, now, have, desired) {
					break
				}
			}
		case have > desired && active > 0:
			excess := min(have-desired, active)
			for range excess {
				in := g.pickForTermination(byZone)
				if in == nil {
					break
				}
				byZone[in.zone]--
				cause := fmt.Sprintf("At %s an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from %d to %d.  At %s instance %s was selected for termination.",
					now.UTC().Format(time.RFC3339), have, desired, now.UTC().Format(time.RFC3339), in.id)
				if g.deleting {
					cause = fmt.Sprintf("At %s the Auto Scaling group %s was deleted, terminating its instances.", now.UTC().Format(time.RFC3339), g.name)
				}
				a.terminate(ctx, g, in, cause)
			}
		}
	}
}

// pickZone picks the enabled zone with the fewest instances (and launches under way)
// that is not backing off after a failed launch; "" when every zone backs off.
func (g *asGroup) pickZone(now time.Time) string {
	_, byZone := g.active()
	best, bestN := "", 0
	for _, z := range g.zones {
		if now.Before(g.backoff[z]) {
			continue
		}
		n := byZone[z] + g.launching[z]
		if best == "" || n < bestN {
			best, bestN = z, n
		}
	}
	return best
}

// pickSubnet picks the zone's subnet with the fewest instances.
func (g *asGroup) pickSubnet(a *AutoScaling, zone string) string {
	counts := map[string]int{}
	for _, in := range g.instances {
		counts[in.subnet]++
	}
	best := ""
	for _, s := range g.subnets {
		if z, _ := a.zoneOf(s); z == zone && (best == "" || counts[s] < counts[best]) {
			best = s
		}
	}
	return best
}

// pickForTermination follows the default termination policy: the zone with the most
// instances, then the oldest launch template (or version), then the oldest instance.
func (g *asGroup) pickForTermination(byZone map[string]int) *asInstance {
	var cands []*asInstance
	for _, in := range g.instances {
		if in.state != "Terminating" && (!in.protected || g.deleting) {
			cands = append(cands, in)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	current := g.currentTemplate()
	slices.SortFunc(cands, func(x, y *asInstance) int {
		if c := cmp.Compare(byZone[y.zone], byZone[x.zone]); c != 0 {
			return c
		}
		// Among zones as full, an instance of another template, or of an older
		// version, goes first.
		xo, yo := x.lt.ID != current.ID, y.lt.ID != current.ID
		if xo != yo {
			if xo {
				return -1
			}
			return 1
		}
		xv, _ := strconv.Atoi(x.lt.Version)
		yv, _ := strconv.Atoi(y.lt.Version)
		if c := cmp.Compare(xv, yv); c != 0 {
			return c
		}
		if c := cmp.Compare(x.zone, y.zone); c != 0 {
			return c
		}
		if c := x.launched.Compare(y.launched); c != 0 {
			return c
		}
		return cmp.Compare(x.id, y.id)
	})
	return cands[0]
}

// currentTemplate is the launch template the group launches from.
func (g *asGroup) currentTemplate() ltSpec {
	if g.mip != nil {
		return g.mip.lt
	}
	if g.lt != nil {
		return *g.lt
	}
	return ltSpec{}
}

// launch starts one launch of g, returning false when none can start now (every zone
// backs off); a.mu is held.
func (a *AutoScaling) launch(ctx context.Context, g *asGroup, now time.Time, have, desired int64) bool {
	zone := g.pickZone(now)
	if zone == "" {
		return false
	}
	subnet := g.pickSubnet(a, zone)
	cause := fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
		now.UTC().Format(time.RFC3339), have, desired)
	details := fmt.Sprintf(`{"ec2.Subnet ID":%q,"Availability Zone":%q}`, subnet, zone)
	act := a.addActivity(g, "Launching a new EC2 instance", cause, details)
	spec, err := a.launchSpec(g, zone, subnet)
	if err == nil && a.launcher == nil {
		err = &LaunchError{"InternalFailure", "The local cloud has no instance launcher."}
	}
	if err == nil && a.instanceLimit > 0 {
		if n := a.runningInstances(); n >= a.instanceLimit {
			err = &LaunchError{"InstanceLimitExceeded", fmt.Sprintf("You have requested more instances (%d) than your current instance limit of %d allows for the specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.", n+1, a.instanceLimit)}
		}
	}
	if err != nil {
		a.launchFailed(g, act, zone, err)
		return true
	}
	if g.launching == nil {
		g.launching = map[string]int{}
	}
	g.launching[zone]++
	launcher := a.launcher
	a.ops.Add(1)
	go func() {
		defer a.ops.Done()
		id, err := launcher.Launch(ctx, spec)
		a.mu.Lock()
		g.launching[zone]--
		if err != nil {
			a.launchFailed(g, act, zone, err)
		} else {
			in := &asInstance{id: id, zone: zone, subnet: subnet, instanceType: spec.InstanceType, state: "InService", health: "Healthy",
				launched: a.now().UTC(), protected: g.protectNew,
				lt: ltSpec{ID: spec.Template.ID, Name: spec.Template.Name, Version: strconv.FormatInt(spec.Template.Version, 10)}}
			g.instances[id] = in
			act.description = "Launching a new EC2 instance: " + id
			act.finish(a.now(), "")
			a.cfg.Log.Info("auto scaling launched an instance", "group", g.name, "instance", id, "zone", zone)
		}
		a.mu.Unlock()
		a.wake()
	}()
	return true
}

// launchFailed records a failed launch; a.mu is held.
func (a *AutoScaling) launchFailed(g *asGroup, act *activity, zone string, err error) {
	msg := err.Error()
	var le *LaunchError
	if errors.As(err, &le) {
		msg = le.Message
	}
	msg += " Launching EC2 instance failed."
	act.description = "Launching a new EC2 instance.  Status Reason: " + msg
	act.finish(a.now(), msg)
	if g.backoff == nil {
		g.backoff = map[string]time.Time{}
	}
	g.backoff[zone] = a.now().Add(a.cfg.RetryDelay)
	a.cfg.Log.Warn("auto scaling launch failed", "group", g.name, "zone", zone, "err", msg)
}

// launchSpec resolves what g launches now in zone.
func (a *AutoScaling) launchSpec(g *asGroup, zone, subnet string) (LaunchSpec, error) {
	spec := LaunchSpec{GroupName: g.name, AvailabilityZone: zone, SubnetID: subnet}
	cur := g.currentTemplate()
	// The group holds both the ID and the name; the ID is what stays true.
	t, err := a.cfg.Templates.Resolve(cur.ID, "", cur.Version)
	if err != nil {
		return spec, &LaunchError{"InvalidLaunchTemplate", "The specified launch template does not exist or is not valid: " + err.Error()}
	}
	spec.Template, spec.ImageID, spec.InstanceType = t, t.Data.ImageID, t.Data.InstanceType
	if g.mip != nil && len(g.mip.overrides) > 0 {
		// On-Demand "prioritized": the first override's type.
		spec.InstanceType = g.mip.overrides[0].InstanceType
	}
	if spec.InstanceType == "" {
		return spec, &LaunchError{"MissingParameter", "The request must contain the parameter InstanceType."}
	}
	if spec.UserData, err = t.Data.DecodedUserData(); err != nil {
		return spec, &LaunchError{"InvalidUserData.Malformed", "Invalid BASE64 encoding of user data."}
	}
	if p := t.Data.IAMInstanceProfile; p != nil {
		spec.IAMInstanceProfile = cmp.Or(p.ARN, p.Name)
		if a.cfg.Profiles != nil {
			role, ok := a.cfg.Profiles.InstanceProfileRole(spec.IAMInstanceProfile)
			if !ok {
				return spec, &LaunchError{"InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", spec.IAMInstanceProfile)}
			}
			spec.Role = role
		}
	}
	spec.SecurityGroupIDs = slices.Clone(t.Data.SecurityGroupIDs)
	for _, ni := range t.Data.NetworkInterfaces {
		if ni.DeviceIndex != nil && *ni.DeviceIndex == 0 {
			spec.SecurityGroupIDs = append(spec.SecurityGroupIDs, ni.Groups...)
		}
	}
	spec.Tags = t.Data.InstanceTags()
	for _, tag := range g.tags {
		if tag.Propagate {
			spec.Tags[tag.Key] = tag.Value
		}
	}
	spec.Tags["aws:autoscaling:groupName"] = g.name
	spec.Tags["aws:ec2launchtemplate:id"] = t.ID
	spec.Tags["aws:ec2launchtemplate:version"] = strconv.FormatInt(t.Version, 10)
	return spec, nil
}

// terminate starts terminating an instance of g; a.mu is held.
func (a *AutoScaling) terminate(ctx context.Context, g *asGroup, in *asInstance, cause string) *activity {
	in.state = "Terminating"
	act := a.addActivity(g, "Terminating EC2 instance: "+in.id, cause, fmt.Sprintf(`{"ec2.Subnet ID":%q,"Availability Zone":%q}`, in.subnet, in.zone))
	launcher := a.launcher
	a.ops.Add(1)
	go func() {
		defer a.ops.Done()
		var err error
		if launcher == nil {
			err = errors.New("the local cloud has no instance launcher")
		} else {
			err = launcher.Terminate(ctx, in.id)
		}
		a.mu.Lock()
		if err != nil {
			// Tried again on a later pass (not at once: no hot loop on a failing launcher).
			in.state = "InService"
			act.finish(a.now(), err.Error())
			a.cfg.Log.Warn("auto scaling could not terminate an instance", "group", g.name, "instance", in.id, "err", err)
			a.mu.Unlock()
			return
		}
		delete(g.instances, in.id)
		act.finish(a.now(), "")
		a.cfg.Log.Info("auto scaling terminated an instance", "group", g.name, "instance", in.id)
		a.mu.Unlock()
		a.wake()
	}()
	return act
}
