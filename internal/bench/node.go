package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// A real node's join, step by step (`nodejoin bench node`): real-kubelet instances
// launched one at a time into a running cluster (by the sandbox, through Launch), each
// step of each join timed from what recorded it (ReadNodeJoin), and per step the
// median and max time since the instance started and of the step's own duration.

// NodeStep is one step of a join: its name and the step it follows, whose time its own
// duration counts from ("" for the first: it counts from the instance's start).
type NodeStep struct {
	Name  string
	After string
}

// StepTime is when one step of one join happened and what recorded it.
type StepTime struct {
	Step   string    `json:"step"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`
}

// NodeJoin is one node's join: when its instance started and each step's time.
type NodeJoin struct {
	Node       string     `json:"node"`
	InstanceID string     `json:"instance_id"`
	Launched   time.Time  `json:"launched"`
	Steps      []StepTime `json:"steps"`
}

// NodeOptions configure RunNode.
type NodeOptions struct {
	// Cluster names the cluster, for the report.
	Cluster string
	// Nodes is how many instances to launch, one after the other.
	Nodes int
	// StateDir is the cluster's state directory, where ReadNodeJoin reads its joins;
	// default sandbox.StateDir(Cluster).
	StateDir string
	// Timeout is how long each node may take to become Ready (Launch's).
	Timeout time.Duration
	// Steps are the join's steps in order; default NodeSteps.
	Steps []NodeStep
	// Launch launches one instance and returns once its node is Ready, with its
	// instance ID; default a real node added to Cluster (sandbox.AddNodesTo).
	Launch func(ctx context.Context) (string, error)
	// Timeline reads the join of instance id; default ReadNodeJoin of StateDir.
	Timeline func(ctx context.Context, id string) (*NodeJoin, error)
	// Progress, when set, gets a line per node.
	Progress io.Writer
	// Settle is how long to wait for a step the records do not show yet once the node is
	// Ready (an Event sent in the background); default 10 s.
	Settle time.Duration
}

// NodeReport is the figures of `nodejoin bench node`.
type NodeReport struct {
	Cluster string `json:"cluster"`
	Nodes   int    `json:"nodes"`
	// Load is /proc/loadavg's first three fields at the end of the run.
	Load string `json:"load"`
	// ReadyMedianSeconds and ReadyMaxSeconds are from instance start to Ready.
	ReadyMedianSeconds float64 `json:"ready_median_seconds"`
	ReadyMaxSeconds    float64 `json:"ready_max_seconds"`
	// SlowestStep is the step of the longest median duration.
	SlowestStep string `json:"slowest_step"`
	// Steps are the figures of each step, in order.
	Steps []StepFigures `json:"steps"`
	// Joins are each node's step times.
	Joins []NodeJoin `json:"joins"`
}

// StepFigures are one step's figures over the nodes, in seconds.
type StepFigures struct {
	Step string `json:"step"`
	// After is the step whose time the step's own duration counts from.
	After string `json:"after"`
	// Source says what recorded the step's time (of the first node that has it).
	Source string `json:"source"`
	// AtMedianSeconds and AtMaxSeconds are from the instance's start.
	AtMedianSeconds float64 `json:"at_median_seconds"`
	AtMaxSeconds    float64 `json:"at_max_seconds"`
	// TookMedianSeconds and TookMaxSeconds are the step's own duration: from After's
	// time to its own.
	TookMedianSeconds float64 `json:"took_median_seconds"`
	TookMaxSeconds    float64 `json:"took_max_seconds"`
	// N is how many nodes have the step's time.
	N int `json:"n"`
}

// RunNode launches o.Nodes instances one at a time, each once the previous is Ready,
// and reports each step's figures.
func RunNode(ctx context.Context, o NodeOptions) (*NodeReport, error) {
	if o.Nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: want at least 1", o.Nodes)
	}
	if o.Settle == 0 {
		o.Settle = 10 * time.Second
	}
	if o.Steps == nil {
		o.Steps = NodeSteps()
	}
	if o.Launch == nil {
		// One real node at a time, as `nodejoin add node` launches it.
		o.Launch = func(ctx context.Context) (string, error) {
			added, err := sandbox.AddNodesTo(ctx, o.Cluster, sandbox.NodeOptions{Count: 1, Kubelet: instance.KubeletReal, Timeout: o.Timeout}, sandbox.ProgressTo(o.Progress))
			if err != nil {
				return "", sandbox.FlagError(err)
			}
			return added[0].InstanceID, nil
		}
	}
	if o.Timeline == nil && o.StateDir == "" {
		dir, err := sandbox.StateDir(o.Cluster)
		if err != nil {
			return nil, err
		}
		o.StateDir = dir
	}
	if o.Timeline == nil {
		o.Timeline = func(ctx context.Context, id string) (*NodeJoin, error) { return ReadNodeJoin(ctx, o.StateDir, id) }
	}
	var joins []NodeJoin
	for i := range o.Nodes {
		id, err := o.Launch(ctx)
		if err != nil {
			return nil, fmt.Errorf("node %d of %d: %w", i+1, o.Nodes, err)
		}
		j, err := settledTimeline(ctx, o, id)
		if err != nil {
			return nil, fmt.Errorf("node %d of %d (instance %s): reading its join: %w", i+1, o.Nodes, id, err)
		}
		joins = append(joins, *j)
		if o.Progress != nil {
			ready := "not Ready"
			if at, ok := j.at(lastStep(o.Steps)); ok {
				ready = fmt.Sprintf("Ready %s s after its instance started", num(seconds(at.Sub(j.Launched))))
			}
			fmt.Fprintf(o.Progress, "node %d/%d %s (%s): %s\n", i+1, o.Nodes, j.Node, id, ready)
		}
	}
	r := NodeFigures(o.Steps, joins)
	load, _ := os.ReadFile("/proc/loadavg")
	r.Cluster, r.Load = o.Cluster, loadAvg(load)
	return r, nil
}

// settledTimeline reads instance id's timeline until every step shows or o.Settle
// passes: the records of a node just Ready may lag it a little.
func settledTimeline(ctx context.Context, o NodeOptions, id string) (*NodeJoin, error) {
	deadline := time.Now().Add(o.Settle)
	for {
		j, err := o.Timeline(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(j.Missing(o.Steps)) == 0 || time.Now().After(deadline) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func lastStep(steps []NodeStep) string {
	if len(steps) == 0 {
		return ""
	}
	return steps[len(steps)-1].Name
}

func (j *NodeJoin) at(step string) (time.Time, bool) {
	for _, s := range j.Steps {
		if s.Step == step {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// Missing lists the steps j has no time for.
func (j *NodeJoin) Missing(steps []NodeStep) []string {
	var out []string
	for _, s := range steps {
		if _, ok := j.at(s.Name); !ok {
			out = append(out, s.Name)
		}
	}
	return out
}

// OutOfOrder reports each step that happened before the step it follows. A time in
// whole seconds (an API timestamp, truncated) may read up to a second early.
func (j *NodeJoin) OutOfOrder(steps []NodeStep) error {
	var errs []error
	for _, s := range steps {
		at, ok := j.at(s.Name)
		if !ok {
			continue
		}
		before, name := j.Launched, "the instance's start"
		if s.After != "" {
			if before, ok = j.at(s.After); !ok {
				continue
			}
			name = s.After
		}
		slack := time.Duration(0)
		if at.Nanosecond() == 0 {
			slack = time.Second
		}
		if at.Add(slack).Before(before) {
			errs = append(errs, fmt.Errorf("node %s: %s at %s is before %s at %s", j.Node, s.Name,
				at.Format("15:04:05.000"), name, before.Format("15:04:05.000")))
		}
	}
	return errors.Join(errs...)
}

// NodeFigures sums up the joins, step by step.
func NodeFigures(steps []NodeStep, joins []NodeJoin) *NodeReport {
	r := &NodeReport{Nodes: len(joins), Joins: joins}
	slowest := -1.0
	for _, s := range steps {
		f := StepFigures{Step: s.Name, After: s.After}
		var at, took []time.Duration
		for _, j := range joins {
			t, ok := j.at(s.Name)
			if !ok {
				continue
			}
			if f.Source == "" {
				f.Source = j.source(s.Name)
			}
			at = append(at, t.Sub(j.Launched))
			from := j.Launched
			if s.After != "" {
				if from, ok = j.at(s.After); !ok {
					continue
				}
			}
			took = append(took, t.Sub(from))
		}
		f.N = len(at)
		f.AtMedianSeconds, f.AtMaxSeconds = medianMax(at)
		f.TookMedianSeconds, f.TookMaxSeconds = medianMax(took)
		if f.N > 0 && f.TookMedianSeconds > slowest {
			slowest, r.SlowestStep = f.TookMedianSeconds, s.Name
		}
		r.Steps = append(r.Steps, f)
	}
	if n := len(r.Steps); n > 0 {
		r.ReadyMedianSeconds, r.ReadyMaxSeconds = r.Steps[n-1].AtMedianSeconds, r.Steps[n-1].AtMaxSeconds
	}
	return r
}

func (j *NodeJoin) source(step string) string {
	for _, s := range j.Steps {
		if s.Step == step {
			return s.Source
		}
	}
	return ""
}

// medianMax is the median (the mean of the middle two of an even count) and the max of
// d, in seconds.
func medianMax(d []time.Duration) (median, maxS float64) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return seconds(m), seconds(s[len(s)-1])
}
