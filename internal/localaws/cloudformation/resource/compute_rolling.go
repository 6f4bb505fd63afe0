package resource

// This file holds the rolling update of an Auto Scaling group whose launch template
// changed under UpdatePolicy's AutoScalingRollingUpdate, as CloudFormation runs it:
// obsolete instances are terminated in batches of at most MaxBatchSize while at least
// MinInstancesInService stay in service (the group is temporarily raised when it
// could not be otherwise), each batch's replacements must be in service and then
// either signal (WaitOnResourceSignals, within PauseTime) or be given PauseTime, and
// the events say so in CloudFormation's words.

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// rollingPolicy is UpdatePolicy's AutoScalingRollingUpdate.
type rollingPolicy struct {
	minInService, maxBatch, minSuccessPercent int
	pause                                     time.Duration
	pauseText                                 string // as the template gave it (PT5M)
	waitSignals                               bool
}

// maxPause is CloudFormation's limit on PauseTime (one hour).
const maxPause = time.Hour

var isoDuration = regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?$`)

// parseISODuration reads an ISO 8601 duration of hours, minutes and seconds (PT5M).
func parseISODuration(s string) (time.Duration, bool) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "PT" {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			n, err := strconv.Atoi(m[i+1])
			if err != nil || n > 3600 {
				return 0, false
			}
			d += time.Duration(n) * unit
		}
	}
	return d, true
}

// readRollingPolicy reads UpdatePolicy's AutoScalingRollingUpdate (nil when absent).
func readRollingPolicy(c *Call) (*rollingPolicy, error) {
	p := newPropReader(c)
	const at = "#/UpdatePolicy/AutoScalingRollingUpdate"
	u := p.obj(c.UpdatePolicy, "#/UpdatePolicy", "AutoScalingRollingUpdate")
	if u == nil {
		return nil, p.err
	}
	p.known(u, at, "MaxBatchSize", "MinActiveInstancesPercent", "MinInstancesInService", "MinSuccessfulInstancesPercent",
		"PauseTime", "SuspendProcesses", "WaitOnResourceSignals")
	rp := &rollingPolicy{maxBatch: 1, minSuccessPercent: 100, pauseText: "PT0S"}
	if v := p.int32Ptr(u, at, "MaxBatchSize"); v != nil {
		rp.maxBatch = int(*v)
	}
	if v := p.int32Ptr(u, at, "MinInstancesInService"); v != nil {
		rp.minInService = int(*v)
	}
	if v := p.int32Ptr(u, at, "MinSuccessfulInstancesPercent"); v != nil {
		rp.minSuccessPercent = int(*v)
	}
	if v := p.boolPtr(u, at, "WaitOnResourceSignals"); v != nil {
		rp.waitSignals = *v
	}
	if rp.waitSignals {
		rp.pauseText = "PT5M"
	}
	if s := p.strPtr(u, at, "PauseTime"); s != nil {
		rp.pauseText = *s
	}
	// SuspendProcesses names Auto Scaling processes to suspend during the update; the
	// local Auto Scaling has no processes to suspend but its reconcile loop, which
	// the update needs. It is read (so that a malformed one is refused) and has no
	// effect.
	p.strList(u, at, "SuspendProcesses")
	p.int32Ptr(u, at, "MinActiveInstancesPercent")
	d, ok := parseISODuration(rp.pauseText)
	switch {
	case p.err != nil:
	case !ok || d > maxPause:
		p.fail(at+"/PauseTime", "%q is not an ISO 8601 duration of at most one hour, such as PT5M or PT30S", rp.pauseText)
	case rp.maxBatch < 1:
		p.fail(at+"/MaxBatchSize", "must be at least 1, not %d", rp.maxBatch)
	case rp.minInService < 0:
		p.fail(at+"/MinInstancesInService", "must not be negative, not %d", rp.minInService)
	case rp.minSuccessPercent < 0 || rp.minSuccessPercent > 100:
		p.fail(at+"/MinSuccessfulInstancesPercent", "must be between 0 and 100, not %d", rp.minSuccessPercent)
	}
	rp.pause = d
	return rp, p.err
}

// rollingUpdate is one rolling update of group; min and max are the sizes the update
// gave the group (nil: unchanged), restored after any temporary raise.
type rollingUpdate struct {
	cl       Clients
	c        *Call
	group    string
	policy   rollingPolicy
	min, max *int32

	targetID, targetVersion string
	origMin, origMax        int32
	desired                 int32 // the capacity the group ends with
	raised                  bool
}

// groupState is what a rolling update sees of the group's instances.
type groupState struct {
	upToDate, obsolete []string // in service or pending, by instance ID
	all                map[string]bool
	inServiceNew       int
	// desired is the group's desired capacity; settled says every launch and
	// termination toward it is done (as many instances as desired, none terminating).
	desired int32
	settled bool
}

func (r *rollingUpdate) state(ctx context.Context) (groupState, *astypes.AutoScalingGroup, error) {
	g, err := describeGroup(ctx, r.cl, r.group)
	if err != nil {
		return groupState{}, nil, err
	}
	if g == nil {
		return groupState{}, nil, handlerErrorf("Resource handler returned message: \"Auto Scaling group %s no longer exists\" (HandlerErrorCode: NotFound)", r.group)
	}
	s := groupState{all: map[string]bool{}, desired: aws.ToInt32(g.DesiredCapacity)}
	terminating := 0
	for _, in := range g.Instances {
		id := aws.ToString(in.InstanceId)
		s.all[id] = true
		switch in.LifecycleState {
		case astypes.LifecycleStateTerminating, astypes.LifecycleStateTerminatingWait, astypes.LifecycleStateTerminatingProceed, astypes.LifecycleStateTerminated:
			terminating++
			continue
		}
		// An instance is obsolete when it runs another launch template (version) or sits
		// in a zone the group no longer uses, as CloudFormation replaces both.
		lt := in.LaunchTemplate
		if lt != nil && aws.ToString(lt.LaunchTemplateId) == r.targetID && aws.ToString(lt.Version) == r.targetVersion &&
			slices.Contains(g.AvailabilityZones, aws.ToString(in.AvailabilityZone)) {
			s.upToDate = append(s.upToDate, id)
			if in.LifecycleState == astypes.LifecycleStateInService {
				s.inServiceNew++
			}
		} else {
			s.obsolete = append(s.obsolete, id)
		}
	}
	slices.Sort(s.upToDate)
	slices.Sort(s.obsolete)
	s.settled = terminating == 0 && len(s.upToDate)+len(s.obsolete) == int(s.desired)
	return s, g, nil
}

// settle waits until the group's launches and terminations toward its desired capacity
// are done, and says the group then.
func (r *rollingUpdate) settle(ctx context.Context) (groupState, *astypes.AutoScalingGroup, error) {
	var s groupState
	var g *astypes.AutoScalingGroup
	err := pollResource(ctx, asgWaitLimit, "Auto Scaling group "+r.group+" to reach its desired capacity", func() (bool, string, error) {
		var err error
		if s, g, err = r.state(ctx); err != nil {
			return false, "", err
		}
		return s.settled, fmt.Sprintf("%d of %d instance(s)", len(s.upToDate)+len(s.obsolete), s.desired), nil
	})
	return s, g, r.withLastFailure(ctx, err)
}

// withLastFailure adds to a failed wait the group's last failed scaling activity (why
// its instances did not launch, say).
func (r *rollingUpdate) withLastFailure(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	out, derr := r.cl.AutoScaling.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String(r.group)})
	if derr != nil {
		return err
	}
	for _, act := range out.Activities {
		if act.StatusCode == astypes.ScalingActivityStatusCodeFailed {
			return &handlerError{msg: err.Error() + "; the group's last failed activity: " + aws.ToString(act.StatusMessage), err: err}
		}
	}
	return err
}

// resolveTarget finds the launch template version the group now launches.
func (r *rollingUpdate) resolveTarget(ctx context.Context, g *astypes.AutoScalingGroup) error {
	spec := g.LaunchTemplate
	if spec == nil && g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil {
		spec = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
	}
	if spec == nil {
		return handlerErrorf("Resource handler returned message: \"Auto Scaling group %s has no launch template\"", r.group)
	}
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{aws.ToString(spec.Version)}}
	if id := aws.ToString(spec.LaunchTemplateId); id != "" {
		in.LaunchTemplateId = aws.String(id)
	} else {
		in.LaunchTemplateName = spec.LaunchTemplateName
	}
	if len(in.Versions) == 1 && in.Versions[0] == "" {
		in.Versions = []string{"$Default"}
	}
	out, err := r.cl.EC2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return serviceFailure("Ec2", err)
	}
	if len(out.LaunchTemplateVersions) != 1 {
		return handlerErrorf("Resource handler returned message: \"launch template version %s of Auto Scaling group %s was not found\"", aws.ToString(spec.Version), r.group)
	}
	v := out.LaunchTemplateVersions[0]
	r.targetID, r.targetVersion = aws.ToString(v.LaunchTemplateId), strconv.FormatInt(aws.ToInt64(v.VersionNumber), 10)
	return nil
}

func (r *rollingUpdate) event(format string, args ...any) {
	r.c.Event("UPDATE_IN_PROGRESS", fmt.Sprintf(format, args...))
}

func (r *rollingUpdate) run(ctx context.Context) (err error) {
	_, g, err := r.state(ctx)
	if err != nil {
		return err
	}
	if err := r.resolveTarget(ctx, g); err != nil {
		return err
	}
	s, g, err := r.settle(ctx)
	if err != nil || len(s.obsolete) == 0 {
		return err
	}
	r.origMin, r.origMax, r.desired = aws.ToInt32(g.MinSize), aws.ToInt32(g.MaxSize), aws.ToInt32(g.DesiredCapacity)
	pol := r.policy
	if toInt32(pol.minInService) >= r.origMax {
		return handlerErrorf("MinInstancesInService (%d) must be less than the Auto Scaling group's MaxSize (%d): lower UpdatePolicy's AutoScalingRollingUpdate MinInstancesInService or raise MaxSize", pol.minInService, r.origMax)
	}
	total := len(s.obsolete)
	msg := fmt.Sprintf("Rolling update initiated. Terminating %d obsolete instance(s) in batches of %d, while keeping at least %d instance(s) in service.", total, pol.maxBatch, pol.minInService)
	if pol.waitSignals {
		msg += fmt.Sprintf(" Waiting on resource signals with a timeout of %s when new instances are added to the autoscaling group.", pol.pauseText)
	}
	r.event("%s", msg)
	defer func() {
		if err != nil && r.raised {
			// Not left raised: the update failed, and rolling back sets the sizes again.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = r.cl.AutoScaling.UpdateAutoScalingGroup(rctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.group),
				MinSize: aws.Int32(r.origMin), MaxSize: aws.Int32(r.origMax), DesiredCapacity: aws.Int32(r.desired)})
		}
	}()
	if err := r.raiseIfNeeded(ctx, s); err != nil {
		return err
	}
	done := 0
	for {
		s, g, err = r.state(ctx)
		if err != nil {
			return err
		}
		if len(s.obsolete) == 0 {
			break
		}
		current := aws.ToInt32(g.DesiredCapacity)
		b := min(pol.maxBatch, len(s.obsolete), int(current)-pol.minInService)
		if b <= 0 {
			return handlerErrorf("Resource handler returned message: \"cannot terminate obsolete instances of %s while keeping at least %d instance(s) in service with a desired capacity of %d\"", r.group, pol.minInService, current)
		}
		replace := min(b, max(0, int(r.desired)-len(s.upToDate)))
		if err := r.batch(ctx, s, s.obsolete[:b], replace); err != nil {
			return err
		}
		done += b
		r.event("Successfully terminated instance(s) [%s] (Progress %d%%).", strings.Join(s.obsolete[:b], ","), done*100/max(total, done))
	}
	if r.raised {
		_, err := r.cl.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.group),
			MinSize: aws.Int32(r.origMin), MaxSize: aws.Int32(r.origMax), DesiredCapacity: aws.Int32(r.desired)})
		if err != nil {
			return serviceFailure("AutoScaling", err)
		}
		r.raised = false
	}
	return nil
}

// raiseIfNeeded raises the group when a first batch would leave fewer than
// MinInstancesInService in service, and waits for the added instances.
func (r *rollingUpdate) raiseIfNeeded(ctx context.Context, s groupState) error {
	pol := r.policy
	k := toInt32(pol.minInService + min(pol.maxBatch, len(s.obsolete)))
	if k <= r.desired {
		return nil
	}
	r.event("Temporarily setting autoscaling group MinSize and DesiredCapacity to %d.", k)
	r.raised = true
	since := time.Now()
	_, err := r.cl.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.group),
		MinSize: aws.Int32(k), MaxSize: aws.Int32(max(k, r.origMax)), DesiredCapacity: aws.Int32(k)})
	if err != nil {
		return serviceFailure("AutoScaling", err)
	}
	added := int(k - r.desired)
	return r.awaitNew(ctx, since, s, nil, len(s.upToDate)+added, added)
}

// batch terminates the batch's instances, replace of them with replacements and the
// rest with a lower desired capacity, and waits for the replacements.
func (r *rollingUpdate) batch(ctx context.Context, s groupState, ids []string, replace int) error {
	r.event("Terminating instance(s) [%s]; replacing with %d new instance(s).", strings.Join(ids, ","), replace)
	since := time.Now()
	shrink := len(ids) - replace
	if shrink > 0 && r.raised {
		// Terminating without replacement must not go below MinSize: the temporary
		// MinSize goes first.
		_, err := r.cl.AutoScaling.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(r.group), MinSize: aws.Int32(r.origMin)})
		if err != nil {
			return serviceFailure("AutoScaling", err)
		}
	}
	for i, id := range ids {
		_, err := r.cl.AutoScaling.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(i < shrink)})
		if err != nil {
			return serviceFailure("AutoScaling", err)
		}
	}
	return r.awaitNew(ctx, since, s, ids, len(s.upToDate)+replace, replace)
}

// awaitNew waits until the terminated instances are gone and want up-to-date
// instances are in service, then for the added ones' signals (or PauseTime).
func (r *rollingUpdate) awaitNew(ctx context.Context, since time.Time, before groupState, terminated []string, want, added int) error {
	var now groupState
	err := pollResource(ctx, asgWaitLimit, fmt.Sprintf("%d up-to-date instance(s) in service in %s", want, r.group), func() (bool, string, error) {
		var err error
		if now, _, err = r.state(ctx); err != nil {
			return false, "", err
		}
		gone := !slices.ContainsFunc(terminated, func(id string) bool { return now.all[id] })
		return gone && now.settled && now.inServiceNew >= want, fmt.Sprintf("%d up-to-date in service, %d of %d instance(s)",
			now.inServiceNew, len(now.upToDate)+len(now.obsolete), now.desired), nil
	})
	if err != nil || added == 0 {
		return r.withLastFailure(ctx, err)
	}
	fresh := map[string]bool{}
	for _, id := range now.upToDate {
		if !before.all[id] {
			fresh[id] = true
		}
	}
	pol := r.policy
	if !pol.waitSignals {
		return sleepOrDone(ctx, pol.pause)
	}
	need := (added*pol.minSuccessPercent + 99) / 100
	r.event("New instance(s) added to autoscaling group - Waiting on %d resource signal(s) with a timeout of %s.", added, pol.pauseText)
	if r.c.Signals == nil || need == 0 {
		return nil
	}
	start := time.Now()
	err = r.c.Signals.Wait(ctx, since, need, func(id string) bool { return fresh[id] }, pol.pause)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && time.Since(start) >= pol.pause {
		r.event("Failed to receive %d resource signal(s) for the current batch. Each resource signal timeout is counted as a FAILURE.", need)
		return fmt.Errorf("%s. Unable to satisfy %d%% MinSuccessfulInstancesPercent requirement (new instances: %s)", strings.TrimSuffix(err.Error(), "."), pol.minSuccessPercent, strings.Join(slices.Sorted(maps.Keys(fresh)), ", "))
	}
	return err
}
