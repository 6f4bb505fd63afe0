package resource

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"

	localas "github.com/nodejoin/nodejoin/internal/localaws/autoscaling"
	localec2 "github.com/nodejoin/nodejoin/internal/localaws/ec2"
	localeks "github.com/nodejoin/nodejoin/internal/localaws/eks"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

func init() {
	// The services answer at once: poll as fast as a test can.
	resourcePollInterval = 5 * time.Millisecond
}

// asgFakeLauncher launches instances into the local EC2 by counting, and records the
// launches and terminations.
type asgFakeLauncher struct {
	ec2 *localec2.EC2

	mu         sync.Mutex
	n          int
	launched   []localas.LaunchSpec
	ids        []string
	terminated []string
	// fail, when set, refuses the launches it returns an error for.
	fail func(localas.LaunchSpec) error
}

func (f *asgFakeLauncher) Launch(_ context.Context, spec localas.LaunchSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(spec); err != nil {
			return "", err
		}
	}
	f.n++
	id := fmt.Sprintf("i-%017x", f.n)
	if err := f.ec2.Launch(localec2.Instance{ID: id, Type: spec.InstanceType, AvailabilityZone: spec.AvailabilityZone,
		PrivateIPv4: fmt.Sprintf("198.18.1.%d", f.n), SubnetID: spec.SubnetID}, localec2.WithTags(spec.Tags)); err != nil {
		return "", err
	}
	f.launched = append(f.launched, spec)
	f.ids = append(f.ids, id)
	return id, nil
}

func (f *asgFakeLauncher) setFail(fn func(localas.LaunchSpec) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

func (f *asgFakeLauncher) Terminate(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, id)
	return f.ec2.SetState(id, "terminated")
}

// record is what the launcher did: the instances launched (with their launch
// template versions) and terminated.
func (f *asgFakeLauncher) record() (launched map[string]localas.LaunchSpec, terminated []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	launched = map[string]localas.LaunchSpec{}
	for i, id := range f.ids {
		launched[id] = f.launched[i]
	}
	return launched, slices.Clone(f.terminated)
}

// eventLog records a Call's events.
type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (e *eventLog) add(status, reason string) {
	e.mu.Lock()
	e.got = append(e.got, status+" "+reason)
	e.mu.Unlock()
}

func (e *eventLog) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// fakeRollingSignals answers Wait as the test says: SUCCESS from every accepted instance,
// a FAILURE from the first, or nothing (the timeout passes).
type fakeRollingSignals struct {
	mode string // "success", "failure" or "timeout"
	// launched lists the instances launched so far, to find the accepted ones.
	launched func() []string

	mu    sync.Mutex
	waits []signalWait
}

type signalWait struct {
	count    int
	accepted []string
	timeout  time.Duration
}

func (s *fakeRollingSignals) Wait(ctx context.Context, _ time.Time, count int, accept func(string) bool, timeout time.Duration) error {
	var ok []string
	for _, id := range s.launched() {
		if accept == nil || accept(id) {
			ok = append(ok, id)
		}
	}
	s.mu.Lock()
	s.waits = append(s.waits, signalWait{count, ok, timeout})
	s.mu.Unlock()
	switch {
	case s.mode == "failure" && len(ok) > 0:
		return handlerErrorf("Received FAILURE signal with UniqueId %s: the node did not join: kubelet exited", ok[0])
	case s.mode == "success" && len(ok) >= count:
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return handlerErrorf("Received 0 SUCCESS signal(s) out of %d.", count)
	}
}

func (s *fakeRollingSignals) calls() []signalWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

// resEnv is the local EC2 (with launch templates), Auto Scaling (with a fast reconcile
// loop and a fake launcher) and EKS (over a test backend), served to SDK clients.
type resEnv struct {
	cl       Clients
	ec2      *localec2.EC2
	as       *localas.AutoScaling
	launcher *asgFakeLauncher
	eks      *testBackend
	subnets  []string
}

func newResEnv(t *testing.T) *resEnv {
	t.Helper()
	inventory := localec2.New(awstest.Account)
	lt := localec2.NewLaunchTemplates(awstest.Account)
	as := localas.New(localas.Config{AccountID: awstest.Account, Region: "us-west-2", Templates: lt, EC2: inventory,
		RetryDelay: 50 * time.Millisecond, Interval: 10 * time.Millisecond})
	fl := &asgFakeLauncher{ec2: inventory}
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
	backend := newTestBackend()
	ec2Srv := httptest.NewServer(inventory.WithLaunchTemplates(lt))
	asSrv := httptest.NewServer(as)
	eksSrv := httptest.NewServer(localeks.NewWithBackend(backend, nil))
	for _, s := range []*httptest.Server{ec2Srv, asSrv, eksSrv} {
		t.Cleanup(s.Close)
	}
	cfg := awstest.SDKConfig()
	e := &resEnv{ec2: inventory, as: as, launcher: fl, eks: backend, cl: Clients{
		EC2:         ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(ec2Srv.URL) }),
		AutoScaling: autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(asSrv.URL) }),
		EKS:         eks.NewFromConfig(cfg, func(o *eks.Options) { o.BaseEndpoint = aws.String(eksSrv.URL) }),
	}}
	for _, s := range as.Subnets() {
		e.subnets = append(e.subnets, s.ID)
	}
	return e
}

// call is a Call of logical ID on stack "nodes", recording its events.
func (e *resEnv) call(typ, logicalID string, props map[string]any) (*Call, *eventLog) {
	ev := &eventLog{}
	return &Call{StackName: "nodes", StackID: "arn:aws:cloudformation:us-west-2:" + awstest.Account + ":stack/nodes/0f7c6f5e-1111-2222-3333-444455556666",
		LogicalID: logicalID, Region: "us-west-2", AccountID: awstest.Account, Type: typ, Properties: props,
		Tags:  map[string]string{"aws:cloudformation:stack-name": "nodes", "aws:cloudformation:logical-id": logicalID, "team": "infra"},
		Event: ev.add}, ev
}

func (e *resEnv) provisioner(typ string) Provisioner { return Provisioners(e.cl)[typ] }

func (e *resEnv) group(t *testing.T, name string) *astypes.AutoScalingGroup {
	t.Helper()
	g, err := describeGroup(context.Background(), e.cl, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// pollTest polls cond for up to a minute (generous: the machine is shared).
func pollTest(t *testing.T, what string, cond func() (bool, string)) {
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
		time.Sleep(5 * time.Millisecond)
	}
}

// inService waits until the group has n InService instances and no others.
func (e *resEnv) inService(t *testing.T, name string, n int) *astypes.AutoScalingGroup {
	t.Helper()
	var g *astypes.AutoScalingGroup
	pollTest(t, fmt.Sprintf("%d instances in service in %s", n, name), func() (bool, string) {
		g = e.group(t, name)
		var states []string
		in := 0
		for _, i := range g.Instances {
			states = append(states, string(i.LifecycleState))
			if i.LifecycleState == astypes.LifecycleStateInService {
				in++
			}
		}
		return in == n && len(g.Instances) == n, strings.Join(states, ",")
	})
	return g
}

// instanceVersions are a group's instances' launch template versions, by instance ID.
func instanceVersions(g *astypes.AutoScalingGroup) map[string]string {
	out := map[string]string{}
	for _, i := range g.Instances {
		out[aws.ToString(i.InstanceId)] = aws.ToString(i.LaunchTemplate.Version)
	}
	return out
}
