package resource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	localas "github.com/nodejoin/nodejoin/internal/localaws/autoscaling"
)

func TestParseISODuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"PT5M", 5 * time.Minute, true},
		{"PT1S", time.Second, true},
		{"PT0S", 0, true},
		{"PT1H", time.Hour, true},
		{"PT1M30S", 90 * time.Second, true},
		{"PT", 0, false},
		{"5m", 0, false},
		{"P1D", 0, false},
		{"PT-1S", 0, false},
	} {
		got, ok := parseISODuration(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseISODuration(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// rolled is what a rolling update did: its error, its events, the signal waits and
// the group's name.
type rolled struct {
	err    error
	events []string
	waits  []signalWait
	group  string
}

// rolling creates a group of desired instances at version 1 and updates it to version
// 2 under policy, with signals answering as mode.
func rolling(t *testing.T, e *resEnv, sizes [3]string, policy map[string]any, mode string) rolled {
	t.Helper()
	ctx := context.Background()
	lt := e.template(t, 2)
	p := e.provisioner("AWS::AutoScaling::AutoScalingGroup")
	props := e.asgProps(lt, "1", sizes[0], sizes[1], sizes[2])
	c, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.inService(t, res.PhysicalID, 2)
	sig := &fakeRollingSignals{mode: mode, launched: func() []string {
		launched, _ := e.launcher.record()
		return slices.Sorted(maps.Keys(launched))
	}}
	c2, ev := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", e.asgProps(lt, "2", sizes[0], sizes[1], sizes[2]))
	c2.UpdatePolicy = map[string]any{"AutoScalingRollingUpdate": policy}
	c2.Signals = sig
	_, err = p.Update(ctx, c2, res, props)
	return rolled{err, ev.list(), sig.calls(), res.PhysicalID}
}

func instanceID(n int) string { return fmt.Sprintf("i-%017x", n) }

func TestRollingUpdate(t *testing.T) {
	const waiting = "UPDATE_IN_PROGRESS New instance(s) added to autoscaling group - Waiting on 1 resource signal(s) with a timeout of PT5M."
	for _, tc := range []struct {
		name   string
		sizes  [3]string // min, max, desired
		policy map[string]any
		events []string
		// waits are the instances each signal wait accepted.
		waits [][]string
		// sizes after the update.
		min, max, desired int32
	}{{
		name: "one at a time, keeping one in service, waiting on signals", sizes: [3]string{"1", "3", "2"},
		policy: map[string]any{"MinInstancesInService": "1", "MaxBatchSize": "1", "WaitOnResourceSignals": "true", "PauseTime": "PT5M"},
		events: []string{
			"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 1, while keeping at least 1 instance(s) in service. Waiting on resource signals with a timeout of PT5M when new instances are added to the autoscaling group.",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "]; replacing with 1 new instance(s).", waiting,
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "] (Progress 50%).",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(2) + "]; replacing with 1 new instance(s).", waiting,
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(2) + "] (Progress 100%).",
		},
		waits: [][]string{{instanceID(3)}, {instanceID(4)}},
		min:   1, max: 3, desired: 2,
	}, {
		name: "all in service: the group is raised first", sizes: [3]string{"1", "3", "2"},
		policy: map[string]any{"MinInstancesInService": "2", "WaitOnResourceSignals": "true"},
		events: []string{
			"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 1, while keeping at least 2 instance(s) in service. Waiting on resource signals with a timeout of PT5M when new instances are added to the autoscaling group.",
			"UPDATE_IN_PROGRESS Temporarily setting autoscaling group MinSize and DesiredCapacity to 3.", waiting,
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "]; replacing with 1 new instance(s).", waiting,
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "] (Progress 50%).",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(2) + "]; replacing with 0 new instance(s).",
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(2) + "] (Progress 100%).",
		},
		waits: [][]string{{instanceID(3)}, {instanceID(4)}},
		min:   1, max: 3, desired: 2,
	}, {
		name: "a batch above MaxSize: MaxSize is raised too", sizes: [3]string{"1", "2", "2"},
		policy: map[string]any{"MinInstancesInService": "1", "MaxBatchSize": "2"},
		events: []string{
			"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 2, while keeping at least 1 instance(s) in service.",
			"UPDATE_IN_PROGRESS Temporarily setting autoscaling group MinSize and DesiredCapacity to 3.",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "," + instanceID(2) + "]; replacing with 1 new instance(s).",
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "," + instanceID(2) + "] (Progress 100%).",
		},
		min: 1, max: 2, desired: 2,
	}, {
		name: "eksctl's empty policy: batches of one, no signals, no pause", sizes: [3]string{"2", "2", "2"},
		policy: map[string]any{},
		events: []string{
			"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 1, while keeping at least 0 instance(s) in service.",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "]; replacing with 1 new instance(s).",
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "] (Progress 50%).",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(2) + "]; replacing with 1 new instance(s).",
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(2) + "] (Progress 100%).",
		},
		min: 2, max: 2, desired: 2,
	}, {
		name: "both at once", sizes: [3]string{"0", "4", "2"},
		policy: map[string]any{"MaxBatchSize": "2", "PauseTime": "PT1S"},
		events: []string{
			"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 2, while keeping at least 0 instance(s) in service.",
			"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "," + instanceID(2) + "]; replacing with 2 new instance(s).",
			"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "," + instanceID(2) + "] (Progress 100%).",
		},
		min: 0, max: 4, desired: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newResEnv(t)
			r := rolling(t, e, tc.sizes, tc.policy, "success")
			err, events, waits, name := r.err, r.events, r.waits, r.group
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(events, tc.events) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(tc.events, "\n"))
			}
			var accepted [][]string
			for _, w := range waits {
				accepted = append(accepted, w.accepted)
				if w.count != 1 || w.timeout != 5*time.Minute {
					t.Errorf("signal wait %+v, want 1 signal within 5m", w)
				}
			}
			if !slices.EqualFunc(accepted, tc.waits, slices.Equal) {
				t.Errorf("signal waits accepted %v, want %v", accepted, tc.waits)
			}
			g := e.inService(t, name, 2)
			for id, v := range instanceVersions(g) {
				if v != "2" {
					t.Errorf("instance %s is at version %s after the update", id, v)
				}
			}
			if aws.ToInt32(g.MinSize) != tc.min || aws.ToInt32(g.MaxSize) != tc.max || aws.ToInt32(g.DesiredCapacity) != tc.desired {
				t.Errorf("sizes %d..%d (%d), want %d..%d (%d)", aws.ToInt32(g.MinSize), aws.ToInt32(g.MaxSize), aws.ToInt32(g.DesiredCapacity), tc.min, tc.max, tc.desired)
			}
			if _, terminated := e.launcher.record(); !slices.Equal(terminated, []string{instanceID(1), instanceID(2)}) {
				t.Errorf("terminated %v, want the two obsolete instances", terminated)
			}
		})
	}
}

func TestRollingUpdateFails(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		policy     map[string]any
		want       []string
		lastEvent  string
	}{{
		name: "a FAILURE signal", mode: "failure",
		policy:    map[string]any{"MinInstancesInService": "1", "WaitOnResourceSignals": "true"},
		want:      []string{"Received FAILURE signal with UniqueId " + instanceID(3), "the node did not join"},
		lastEvent: "UPDATE_IN_PROGRESS New instance(s) added to autoscaling group - Waiting on 1 resource signal(s) with a timeout of PT5M.",
	}, {
		name: "no signal within PauseTime", mode: "timeout",
		policy:    map[string]any{"MinInstancesInService": "1", "WaitOnResourceSignals": "true", "PauseTime": "PT1S"},
		want:      []string{"Received 0 SUCCESS signal(s) out of 1", "Unable to satisfy 100% MinSuccessfulInstancesPercent requirement", instanceID(3)},
		lastEvent: "UPDATE_IN_PROGRESS Failed to receive 1 resource signal(s) for the current batch. Each resource signal timeout is counted as a FAILURE.",
	}, {
		name: "MinInstancesInService as large as MaxSize", mode: "success",
		policy: map[string]any{"MinInstancesInService": "3"},
		want:   []string{"MinInstancesInService (3) must be less than the Auto Scaling group's MaxSize (3)"},
	}, {
		name: "a malformed PauseTime", mode: "success",
		policy: map[string]any{"PauseTime": "5 minutes"},
		want:   []string{`#/UpdatePolicy/AutoScalingRollingUpdate/PauseTime: "5 minutes" is not an ISO 8601 duration`},
	}, {
		name: "an unknown key", mode: "success",
		policy: map[string]any{"MaxBatch": "2"},
		want:   []string{"#/UpdatePolicy/AutoScalingRollingUpdate: extraneous key [MaxBatch] is not permitted"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newResEnv(t)
			r := rolling(t, e, [3]string{"1", "3", "2"}, tc.policy, tc.mode)
			err, events := r.err, r.events
			if err == nil {
				t.Fatalf("the update succeeded; events %v", events)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.lastEvent != "" && (len(events) == 0 || events[len(events)-1] != tc.lastEvent) {
				t.Errorf("events %v, want the last to be %q", events, tc.lastEvent)
			}
		})
	}
}

// A larger group and a new version at once: the group grows to the new size first,
// then its old instances are replaced one at a time.
func TestRollingUpdateWhileGrowing(t *testing.T) {
	e := newResEnv(t)
	ctx := context.Background()
	lt := e.template(t, 2)
	p := e.provisioner("AWS::AutoScaling::AutoScalingGroup")
	props := e.asgProps(lt, "1", "1", "4", "2")
	c, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.inService(t, res.PhysicalID, 2)
	c2, ev := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", e.asgProps(lt, "2", "1", "4", "3"))
	c2.UpdatePolicy = map[string]any{"AutoScalingRollingUpdate": map[string]any{"MinInstancesInService": "2"}}
	if _, err := p.Update(ctx, c2, res, props); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"UPDATE_IN_PROGRESS Rolling update initiated. Terminating 2 obsolete instance(s) in batches of 1, while keeping at least 2 instance(s) in service.",
		"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(1) + "]; replacing with 1 new instance(s).",
		"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(1) + "] (Progress 50%).",
		"UPDATE_IN_PROGRESS Terminating instance(s) [" + instanceID(2) + "]; replacing with 1 new instance(s).",
		"UPDATE_IN_PROGRESS Successfully terminated instance(s) [" + instanceID(2) + "] (Progress 100%).",
	}
	if got := ev.list(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	g := e.inService(t, res.PhysicalID, 3)
	for id, v := range instanceVersions(g) {
		if v != "2" {
			t.Errorf("instance %s is at version %s after the update", id, v)
		}
	}
}

// Replacements that cannot launch fail the update with Auto Scaling's reason.
func TestRollingUpdateLaunchFails(t *testing.T) {
	defer func(d time.Duration) { asgWaitLimit = d }(asgWaitLimit)
	asgWaitLimit = 300 * time.Millisecond
	e := newResEnv(t)
	ctx := context.Background()
	lt := e.template(t, 2)
	p := e.provisioner("AWS::AutoScaling::AutoScalingGroup")
	props := e.asgProps(lt, "1", "1", "3", "2")
	c, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.inService(t, res.PhysicalID, 2)
	e.launcher.setFail(func(spec localas.LaunchSpec) error {
		return &localas.LaunchError{Code: "InvalidAMIID.NotFound", Message: "The image id '[" + spec.ImageID + "]' does not exist"}
	})
	c2, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", e.asgProps(lt, "2", "1", "3", "2"))
	c2.UpdatePolicy = map[string]any{"AutoScalingRollingUpdate": map[string]any{"MinInstancesInService": "1"}}
	_, err = p.Update(ctx, c2, res, props)
	if err == nil || !strings.Contains(err.Error(), "the group's last failed activity: The image id '[ami-00000000000000002]' does not exist") {
		t.Fatalf("error %v, want the failed launch's reason", err)
	}
}
