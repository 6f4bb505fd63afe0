package autoscaling

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	localec2 "github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// fakeLauncher launches instances by counting; fail, when set, refuses launches. With
// ec2 set, it enters its instances there as running.
type fakeLauncher struct {
	ec2 *localec2.EC2

	mu         sync.Mutex
	n          int
	launched   []LaunchSpec
	running    map[string]LaunchSpec
	terminated []string
	fail       func(LaunchSpec) error
}

func newFakeLauncher() *fakeLauncher { return &fakeLauncher{running: map[string]LaunchSpec{}} }

func (f *fakeLauncher) Launch(_ context.Context, spec LaunchSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(spec); err != nil {
			return "", err
		}
	}
	f.n++
	id := fmt.Sprintf("i-%017x", f.n)
	if f.ec2 != nil {
		if err := f.ec2.Launch(localec2.Instance{ID: id, Type: spec.InstanceType, AvailabilityZone: spec.AvailabilityZone,
			PrivateIPv4: fmt.Sprintf("198.18.1.%d", f.n), SubnetID: spec.SubnetID}, localec2.WithTags(spec.Tags)); err != nil {
			return "", err
		}
	}
	f.launched = append(f.launched, spec)
	f.running[id] = spec
	return id, nil
}

func (f *fakeLauncher) Terminate(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.running[id]; !ok {
		return fmt.Errorf("no instance %s", id)
	}
	delete(f.running, id)
	f.terminated = append(f.terminated, id)
	if f.ec2 != nil {
		_ = f.ec2.SetState(id, "terminated")
	}
	return nil
}

func (f *fakeLauncher) setFail(fn func(LaunchSpec) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

// asgEnv is Auto Scaling and launch templates served to the real SDK clients, with a
// fast reconcile loop and a fake launcher.
type asgEnv struct {
	as       *AutoScaling
	lt       *localec2.LaunchTemplates
	launcher *fakeLauncher
	asg      *autoscaling.Client
	ec2      *ec2.Client
	subnets  []localec2.Subnet
}

func newASGEnv(t *testing.T, inventory *localec2.EC2) *asgEnv {
	t.Helper()
	lt := localec2.NewLaunchTemplates(awstest.Account)
	as := New(Config{AccountID: awstest.Account, Region: "us-west-2", Templates: lt, EC2: inventory,
		RetryDelay: 200 * time.Millisecond, Interval: 20 * time.Millisecond})
	fl := newFakeLauncher()
	fl.ec2 = inventory
	as.SetLauncher(fl)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		as.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	asSrv := httptest.NewServer(as)
	t.Cleanup(asSrv.Close)
	if inventory == nil {
		inventory = localec2.New(awstest.Account)
	}
	ec2Srv := httptest.NewServer(inventory.WithLaunchTemplates(lt))
	t.Cleanup(ec2Srv.Close)
	return &asgEnv{as: as, lt: lt, launcher: fl, subnets: as.Subnets(),
		asg: autoscaling.NewFromConfig(awstest.SDKConfig(), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(asSrv.URL) }),
		ec2: ec2.NewFromConfig(awstest.SDKConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(ec2Srv.URL) })}
}

func (e *asgEnv) subnetIDs() string {
	var ids []string
	for _, s := range e.subnets {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, ",")
}

// template creates launch template name and returns its ID.
func (e *asgEnv) template(t *testing.T, name, userData string) string { //nolint:unparam // callers name the template so each test reads on its own
	t.Helper()
	out, err := e.ec2.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: awstest.NodeTemplateData(userData)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId)
}

func (e *asgEnv) group(t *testing.T, name string) astypes.AutoScalingGroup {
	t.Helper()
	out, err := e.asg.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingGroups) != 1 {
		t.Fatalf("group %s: described %d groups", name, len(out.AutoScalingGroups))
	}
	return out.AutoScalingGroups[0]
}

// waitFor polls cond for up to a minute (generous: the machine is shared).
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last: %s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zoneCounts counts a group's InService instances per zone.
func zoneCounts(g astypes.AutoScalingGroup) map[string]int {
	out := map[string]int{}
	for _, in := range g.Instances {
		if in.LifecycleState == astypes.LifecycleStateInService {
			out[aws.ToString(in.AvailabilityZone)]++
		}
	}
	return out
}

func (e *asgEnv) waitZones(t *testing.T, name string, want map[string]int) astypes.AutoScalingGroup {
	t.Helper()
	var g astypes.AutoScalingGroup
	waitFor(t, fmt.Sprintf("group %s to have %v", name, want), func() (bool, string) {
		g = e.group(t, name)
		got := zoneCounts(g)
		return maps.Equal(got, want) && len(g.Instances) == total(want), fmt.Sprintf("%v (%d instances)", got, len(g.Instances))
	})
	return g
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A group launches toward its desired capacity, spread over its zones, from its
// launch template's user data, type and profile, with the tags Auto Scaling puts on
// instances; scaling in terminates from the fullest zones.
func TestAutoScalingGroupsWithTheAWSClient(t *testing.T) {
	ctx := context.Background()
	e := newASGEnv(t, nil)
	ltID := e.template(t, "ng1", "#!/bin/bash\n/etc/eks/bootstrap.sh c1\n")
	_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("eks-ng1"), MinSize: aws.Int32(1), MaxSize: aws.Int32(6), DesiredCapacity: aws.Int32(3),
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1"), Version: aws.String("$Latest")},
		VPCZoneIdentifier: aws.String(e.subnetIDs()),
		Tags: []astypes.Tag{
			{Key: aws.String("eks:cluster-name"), Value: aws.String("c1"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String("eks:nodegroup-name"), Value: aws.String("from-group"), PropagateAtLaunch: aws.Bool(true)},
			{Key: aws.String("not-propagated"), Value: aws.String("x"), PropagateAtLaunch: aws.Bool(false)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	g := e.waitZones(t, "eks-ng1", map[string]int{"us-west-2a": 1, "us-west-2b": 1, "us-west-2c": 1})
	if aws.ToString(g.LaunchTemplate.LaunchTemplateId) != ltID || aws.ToString(g.LaunchTemplate.LaunchTemplateName) != "ng1" || aws.ToString(g.LaunchTemplate.Version) != "$Latest" ||
		aws.ToInt32(g.MinSize) != 1 || aws.ToInt32(g.MaxSize) != 6 || aws.ToInt32(g.DesiredCapacity) != 3 || len(g.AvailabilityZones) != 3 ||
		aws.ToString(g.VPCZoneIdentifier) != e.subnetIDs() || len(g.Tags) != 3 || g.CreatedTime == nil || !strings.HasPrefix(aws.ToString(g.AutoScalingGroupARN), "arn:aws:autoscaling:us-west-2:"+awstest.Account+":autoScalingGroup:") {
		t.Errorf("group = %+v", g)
	}
	for _, in := range g.Instances {
		if in.HealthStatus == nil || *in.HealthStatus != "Healthy" || aws.ToString(in.LaunchTemplate.Version) != "1" || aws.ToString(in.InstanceType) != "m5.large" {
			t.Errorf("instance %+v", in)
		}
	}
	e.launcher.mu.Lock()
	spec := e.launcher.launched[0]
	e.launcher.mu.Unlock()
	if string(spec.UserData) != "#!/bin/bash\n/etc/eks/bootstrap.sh c1\n" || spec.IAMInstanceProfile != "nodes" || spec.InstanceType != "m5.large" ||
		spec.ImageID != "ami-0123456789abcdef0" || !slices.Equal(spec.SecurityGroupIDs, []string{"sg-1", "sg-2"}) || spec.Template.Version != 1 {
		t.Errorf("launch spec = %+v", spec)
	}
	wantTags := map[string]string{"aws:autoscaling:groupName": "eks-ng1", "eks:cluster-name": "c1", "eks:nodegroup-name": "from-group",
		"aws:ec2launchtemplate:id": ltID, "aws:ec2launchtemplate:version": "1"}
	if !maps.Equal(spec.Tags, wantTags) {
		t.Errorf("instance tags = %v, want %v (the group's propagated tags win over the template's)", spec.Tags, wantTags)
	}

	if _, err := e.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("eks-ng1"), DesiredCapacity: aws.Int32(6)}); err != nil {
		t.Fatal(err)
	}
	e.waitZones(t, "eks-ng1", map[string]int{"us-west-2a": 2, "us-west-2b": 2, "us-west-2c": 2})
	if _, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("eks-ng1"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	// Zones as full lose instances in name order: a, b, c, then a again.
	g = e.waitZones(t, "eks-ng1", map[string]int{"us-west-2b": 1, "us-west-2c": 1})
	e.launcher.mu.Lock()
	terminated, running := len(e.launcher.terminated), len(e.launcher.running)
	e.launcher.mu.Unlock()
	if terminated != 4 || running != 2 {
		t.Errorf("launcher: %d terminated, %d running; want 4 and 2", terminated, running)
	}

	acts, err := e.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("eks-ng1")})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, a := range acts.Activities {
		if a.StatusCode != astypes.ScalingActivityStatusCodeSuccessful || aws.ToInt32(a.Progress) != 100 || a.EndTime == nil || a.StartTime == nil ||
			aws.ToString(a.AutoScalingGroupName) != "eks-ng1" || !strings.HasPrefix(aws.ToString(a.Cause), "At ") {
			t.Errorf("activity %+v", a)
		}
		counts[strings.Fields(aws.ToString(a.Description))[0]]++
	}
	if counts["Launching"] != 6 || counts["Terminating"] != 4 {
		t.Errorf("activities: %v; want 6 launches and 4 terminations", counts)
	}
	for i := 1; i < len(acts.Activities); i++ {
		if acts.Activities[i].StartTime.After(*acts.Activities[i-1].StartTime) {
			t.Errorf("activity %d starts after activity %d: not newest first", i, i-1)
		}
	}
}

// A new launch template version reaches new instances only; scaling in takes the
// instances of the older version first, as a rolling update relies on.
func TestAutoScalingLaunchTemplateVersions(t *testing.T) {
	ctx := context.Background()
	e := newASGEnv(t, nil)
	ltID := e.template(t, "ng1", "v1")
	_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(0), MaxSize: aws.Int32(4), DesiredCapacity: aws.Int32(2),
		LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(ltID), Version: aws.String("1")},
		AvailabilityZones: []string{"us-west-2a", "us-west-2b", "us-west-2c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitZones(t, "g", map[string]int{"us-west-2a": 1, "us-west-2b": 1})
	if _, err := e.ec2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String(ltID), SourceVersion: aws.String("1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{UserData: aws.String(base64.StdEncoding.EncodeToString([]byte("v2")))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(4),
		MaxSize:        aws.Int32(4),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateId: aws.String(ltID), Version: aws.String("$Latest")}}); err != nil {
		t.Fatal(err)
	}
	// c is empty, then the zones are as full and the first gets the fourth.
	g := e.waitZones(t, "g", map[string]int{"us-west-2a": 2, "us-west-2b": 1, "us-west-2c": 1})
	versions := map[string]int{}
	for _, in := range g.Instances {
		versions[aws.ToString(in.LaunchTemplate.Version)]++
	}
	if versions["1"] != 2 || versions["2"] != 2 {
		t.Errorf("instance versions %v", versions)
	}
	e.launcher.mu.Lock()
	last := e.launcher.launched[len(e.launcher.launched)-1]
	e.launcher.mu.Unlock()
	if string(last.UserData) != "v2" || last.Tags["aws:ec2launchtemplate:version"] != "2" {
		t.Errorf("a $Latest launch got user data %q, tags %v", last.UserData, last.Tags)
	}
	// Back to 2: both version-1 instances go (zone a's, the fullest, first; then b's, the oldest version among as full zones).
	if _, err := e.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "only version 2 left", func() (bool, string) {
		g := e.group(t, "g")
		var vs []string
		for _, in := range g.Instances {
			vs = append(vs, aws.ToString(in.LaunchTemplate.Version))
		}
		return slices.Equal(vs, []string{"2", "2"}), fmt.Sprint(vs)
	})
}

// Launch failures become Failed activities with EC2's message; the group launches in
// the other zones meanwhile, and an instance limit is reported as AWS words it.
func TestAutoScalingLaunchFailures(t *testing.T) {
	ctx := context.Background()
	e := newASGEnv(t, nil)
	e.template(t, "ng1", "x")
	e.launcher.setFail(func(s LaunchSpec) error {
		if s.AvailabilityZone == "us-west-2a" {
			return &LaunchError{"InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-west-2a)."}
		}
		return nil
	})
	_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(0), MaxSize: aws.Int32(5), DesiredCapacity: aws.Int32(4),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1")}, VPCZoneIdentifier: aws.String(e.subnetIDs()),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitZones(t, "g", map[string]int{"us-west-2b": 2, "us-west-2c": 2})
	failed := func() []astypes.Activity {
		out, err := e.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
		if err != nil {
			t.Fatal(err)
		}
		var f []astypes.Activity
		for _, a := range out.Activities {
			if a.StatusCode == astypes.ScalingActivityStatusCodeFailed {
				f = append(f, a)
			}
		}
		return f
	}
	f := failed()
	if len(f) == 0 {
		t.Fatal("no failed activity")
	}
	want := "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-west-2a). Launching EC2 instance failed."
	if aws.ToString(f[0].StatusMessage) != want || aws.ToString(f[0].Description) != "Launching a new EC2 instance.  Status Reason: "+want ||
		!strings.Contains(aws.ToString(f[0].Details), `"Availability Zone":"us-west-2a"`) {
		t.Errorf("failed activity %+v", f[0])
	}

	// An account limit of 4 running instances: the fifth launch fails everywhere.
	e.launcher.setFail(nil)
	e.as.SetInstanceLimit(4)
	if _, err := e.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(5)}); err != nil {
		t.Fatal(err)
	}
	limit := "You have requested more instances (5) than your current instance limit of 4 allows for the specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. Launching EC2 instance failed."
	waitFor(t, "an InstanceLimitExceeded activity", func() (bool, string) {
		f := failed()
		return len(f) > 0 && aws.ToString(f[0].StatusMessage) == limit, aws.ToString(f[0].StatusMessage)
	})
	if n := len(e.group(t, "g").Instances); n != 4 {
		t.Errorf("%d instances under a limit of 4", n)
	}
	e.as.SetInstanceLimit(0)
	e.waitZones(t, "g", map[string]int{"us-west-2a": 1, "us-west-2b": 2, "us-west-2c": 2})
}

// TerminateInstanceInAutoScalingGroup replaces the instance, or with
// ShouldDecrementDesiredCapacity lowers the desired capacity; an instance EC2 shows
// terminated is replaced; ForceDelete terminates everything.
func TestAutoScalingTerminateAndDelete(t *testing.T) {
	ctx := context.Background()
	inventory := localec2.New(awstest.Account)
	e := newASGEnv(t, inventory)
	e.template(t, "ng1", "x")
	_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(1), MaxSize: aws.Int32(3), DesiredCapacity: aws.Int32(2),
		MixedInstancesPolicy: &astypes.MixedInstancesPolicy{
			LaunchTemplate: &astypes.LaunchTemplate{
				LaunchTemplateSpecification: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1"), Version: aws.String("$Default")},
				Overrides:                   []astypes.LaunchTemplateOverrides{{InstanceType: aws.String("t3.large")}, {InstanceType: aws.String("m5.xlarge")}},
			},
			InstancesDistribution: &astypes.InstancesDistribution{OnDemandBaseCapacity: aws.Int32(0), OnDemandPercentageAboveBaseCapacity: aws.Int32(100)},
		},
		VPCZoneIdentifier: aws.String(e.subnets[0].ID + "," + e.subnets[1].ID),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := e.waitZones(t, "g", map[string]int{"us-west-2a": 1, "us-west-2b": 1})
	if g.MixedInstancesPolicy == nil || len(g.MixedInstancesPolicy.LaunchTemplate.Overrides) != 2 ||
		aws.ToString(g.MixedInstancesPolicy.InstancesDistribution.OnDemandAllocationStrategy) != "prioritized" {
		t.Errorf("mixed instances policy %+v", g.MixedInstancesPolicy)
	}
	for _, in := range g.Instances {
		if aws.ToString(in.InstanceType) != "t3.large" {
			t.Errorf("instance type %s, want the first override", aws.ToString(in.InstanceType))
		}
	}
	// The instance carries the group's tag in EC2.
	first := aws.ToString(g.Instances[0].InstanceId)
	desc, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{first}})
	if err != nil {
		t.Fatal(err)
	}
	var tagged bool
	for _, tag := range desc.Reservations[0].Instances[0].Tags {
		tagged = tagged || aws.ToString(tag.Key) == "aws:autoscaling:groupName" && aws.ToString(tag.Value) == "g"
	}
	if !tagged {
		t.Errorf("instance %s tags %+v lack aws:autoscaling:groupName", first, desc.Reservations[0].Instances[0].Tags)
	}

	// Without decrementing: replaced.
	out, err := e.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: aws.String(first), ShouldDecrementDesiredCapacity: aws.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Activity == nil || aws.ToString(out.Activity.Description) != "Terminating EC2 instance: "+first || !strings.Contains(aws.ToString(out.Activity.Cause), "in response to a user request") {
		t.Errorf("terminate activity %+v", out.Activity)
	}
	waitFor(t, "a replacement", func() (bool, string) {
		g := e.group(t, "g")
		ids := instanceIDs(g)
		return len(ids) == 2 && !slices.Contains(ids, first) && aws.ToInt32(g.DesiredCapacity) == 2, fmt.Sprint(ids)
	})
	// With decrementing: desired 1; below min refused.
	second := instanceIDs(e.group(t, "g"))[0]
	if _, err := e.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: aws.String(second), ShouldDecrementDesiredCapacity: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one instance", func() (bool, string) {
		g := e.group(t, "g")
		return len(g.Instances) == 1 && aws.ToInt32(g.DesiredCapacity) == 1, fmt.Sprint(instanceIDs(g))
	})
	last := instanceIDs(e.group(t, "g"))[0]
	_, err = e.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: aws.String(last), ShouldDecrementDesiredCapacity: aws.Bool(true)})
	if code, _ := awstest.APICode(t, err); code != "ValidationError" || !strings.Contains(err.Error(), "violate group's min size constraint") {
		t.Errorf("terminating below min: %v", err)
	}
	// EC2 shows it terminated: Unhealthy, replaced.
	if err := inventory.SetState(last, "terminated"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the unhealthy instance replaced", func() (bool, string) {
		ids := instanceIDs(e.group(t, "g"))
		return len(ids) == 1 && ids[0] != last, fmt.Sprint(ids)
	})

	// Deleting a group with instances needs ForceDelete.
	_, err = e.asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String("g")})
	var inUse *astypes.ResourceInUseFault
	if !errors.As(err, &inUse) {
		t.Errorf("deleting a group with instances: %v", err)
	}
	if _, err := e.asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), ForceDelete: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group gone", func() (bool, string) {
		out, err := e.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.AutoScalingGroups) == 1 && aws.ToString(out.AutoScalingGroups[0].Status) != "Delete in progress" {
			t.Errorf("a deleting group's status is %q", aws.ToString(out.AutoScalingGroups[0].Status))
		}
		return len(out.AutoScalingGroups) == 0, fmt.Sprint(len(out.AutoScalingGroups))
	})
	e.launcher.mu.Lock()
	running := len(e.launcher.running)
	e.launcher.mu.Unlock()
	if running != 0 {
		t.Errorf("%d instances still running after ForceDelete", running)
	}
	acts, err := e.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
	if err != nil || len(acts.Activities) != 0 {
		t.Errorf("activities of a deleted group without IncludeDeletedGroups: %v, %d", err, len(acts.Activities))
	}
	acts, err = e.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g"), IncludeDeletedGroups: aws.Bool(true)})
	if err != nil || len(acts.Activities) == 0 || aws.ToString(acts.Activities[0].AutoScalingGroupState) != "Deleted" {
		t.Errorf("activities of a deleted group: %v, %+v", err, acts)
	}
}

func instanceIDs(g astypes.AutoScalingGroup) []string {
	var ids []string
	for _, in := range g.Instances {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	return ids
}

func TestAutoScalingErrors(t *testing.T) {
	ctx := context.Background()
	e := newASGEnv(t, nil)
	e.template(t, "ng1", "x")
	lt := &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1")}
	create := func(name string, min, max, desired int32, lt *astypes.LaunchTemplateSpecification, subnets string) error {
		_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: aws.String(name),
			MinSize: aws.Int32(min), MaxSize: aws.Int32(max), DesiredCapacity: aws.Int32(desired), LaunchTemplate: lt, VPCZoneIdentifier: aws.String(subnets)})
		return err
	}
	if err := create("g", 1, 3, 1, lt, e.subnetIDs()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, code, message string
		err                 error
	}{
		{"duplicate", "AlreadyExists", "AutoScalingGroup by this name already exists - A group with the name g already exists", create("g", 1, 3, 1, lt, e.subnetIDs())},
		{"min above max", "ValidationError", "Max bound, 1, must be greater than or equal to min bound, 2", create("h", 2, 1, 1, lt, e.subnetIDs())},
		{"desired outside", "ValidationError", "Desired capacity:5 must be between the specified min size:1 and max size:3", create("h", 1, 3, 5, lt, e.subnetIDs())},
		{"unknown template", "ValidationError", "You must use a valid fully-formed launch template.", create("h", 1, 3, 1, &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("nope")}, e.subnetIDs())},
		{"no template", "ValidationError", "Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter.", create("h", 1, 3, 1, nil, e.subnetIDs())},
		{"unknown subnet", "ValidationError", "The subnet ID 'subnet-nope' does not exist", create("h", 1, 3, 1, lt, "subnet-nope")},
		{"above max", "ValidationError", "New SetDesiredCapacity value 4 is above max value 3 for the AutoScalingGroup.", func() error {
			_, err := e.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(4)})
			return err
		}()},
		{"below min", "ValidationError", "New SetDesiredCapacity value 0 is below min value 1 for the AutoScalingGroup.", func() error {
			_, err := e.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(0)})
			return err
		}()},
		{"update outside", "ValidationError", "Desired capacity:9 must be between the specified min size:1 and max size:3", func() error {
			_, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(9)})
			return err
		}()},
		{"update unknown group", "ValidationError", "AutoScalingGroup name not found - AutoScalingGroup 'nope' not found", func() error {
			_, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("nope"), MaxSize: aws.Int32(2)})
			return err
		}()},
		{"terminate unknown", "ValidationError", "Instance Id not found - No managed instance found for instance ID: i-00000000000000099", func() error {
			_, err := e.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: aws.String("i-00000000000000099"), ShouldDecrementDesiredCapacity: aws.Bool(false)})
			return err
		}()},
		{"delete unknown", "ValidationError", "AutoScalingGroup name not found - AutoScalingGroup 'nope' not found", func() error {
			_, err := e.asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String("nope")})
			return err
		}()},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		code, status := awstest.APICode(t, tc.err)
		if code != tc.code || status != 400 || !strings.Contains(tc.err.Error(), tc.message) {
			t.Errorf("%s: got %s/%d %v; want %s: %s", tc.name, code, status, tc.err, tc.code, tc.message)
		}
	}
	var exists *astypes.AlreadyExistsFault
	if !errors.As(create("g", 1, 3, 1, lt, e.subnetIDs()), &exists) {
		t.Error("a duplicate group is not the SDK's AlreadyExistsFault")
	}
	// UpdateAutoScalingGroup: a new min above the desired capacity raises it; a new
	// max below lowers it.
	if _, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if g := e.group(t, "g"); aws.ToInt32(g.DesiredCapacity) != 2 {
		t.Errorf("desired %d after min 2", aws.ToInt32(g.DesiredCapacity))
	}
	if _, err := e.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), MinSize: aws.Int32(0), MaxSize: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if g := e.group(t, "g"); aws.ToInt32(g.DesiredCapacity) != 1 {
		t.Errorf("desired %d after max 1", aws.ToInt32(g.DesiredCapacity))
	}
}

// DescribeAutoScalingGroups pages and filters on tags.
func TestAutoScalingDescribePagingAndFilters(t *testing.T) {
	ctx := context.Background()
	e := newASGEnv(t, nil)
	e.template(t, "ng1", "x")
	for i := range 5 {
		_, err := e.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: aws.String(fmt.Sprintf("g%d", i)),
			MinSize: aws.Int32(0), MaxSize: aws.Int32(1), LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1")},
			AvailabilityZones: []string{"us-west-2a"},
			Tags:              []astypes.Tag{{Key: aws.String("parity"), Value: aws.String([]string{"even", "odd"}[i%2])}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(e.asg, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(2)})
	var names []string
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range out.AutoScalingGroups {
			names = append(names, aws.ToString(g.AutoScalingGroupName))
		}
	}
	if !slices.Equal(names, []string{"g0", "g1", "g2", "g3", "g4"}) {
		t.Errorf("paged names %v", names)
	}
	out, err := e.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{Filters: []astypes.Filter{{Name: aws.String("tag:parity"), Values: []string{"odd"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var odd []string
	for _, g := range out.AutoScalingGroups {
		odd = append(odd, aws.ToString(g.AutoScalingGroupName))
	}
	if !slices.Equal(odd, []string{"g1", "g3"}) {
		t.Errorf("tag:parity=odd gave %v", odd)
	}
}

// Arbitrary request bodies never panic Auto Scaling and always get one well-formed
// answer.
func FuzzAutoScalingRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateAutoScalingGroup&AutoScalingGroupName=g&MinSize=0&MaxSize=2&LaunchTemplate.LaunchTemplateName=ng1&AvailabilityZones.member.1=us-west-2a",
		"Action=CreateAutoScalingGroup&AutoScalingGroupName=g&MinSize=0&MaxSize=2&MixedInstancesPolicy.LaunchTemplate.Overrides.member.1.InstanceType=t3.large",
		"Action=UpdateAutoScalingGroup&AutoScalingGroupName=g&MaxSize=-1&VPCZoneIdentifier=%2C%2C",
		"Action=SetDesiredCapacity&AutoScalingGroupName=g&DesiredCapacity=99999999999999999999",
		"Action=DescribeAutoScalingGroups&Filters.member.1.Name=tag%3Ax&Filters.member.1.Values.member.1=y&MaxRecords=0",
		"Action=TerminateInstanceInAutoScalingGroup&InstanceIds.member.1=i-1&ShouldDecrementDesiredCapacity=maybe",
		"Action=DescribeScalingActivities&NextToken=%zz&IncludeDeletedGroups=true",
		"Action=DeleteAutoScalingGroup&AutoScalingGroupName=g&ForceDelete=true",
	} {
		f.Add([]byte(seed))
	}
	lt := localec2.NewLaunchTemplates(awstest.Account)
	if _, err := lt.Resolve("", "ng1", ""); err == nil {
		f.Fatal("no template expected")
	}
	a := New(Config{AccountID: awstest.Account, Region: "us-west-2", Templates: lt})
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return
		}
		w := awstest.FuzzRequest(t.Context(), a, body)
		awstest.CheckQueryAnswer(t, w, form.Get("Action")+"Response", "ErrorResponse")
	})
}
