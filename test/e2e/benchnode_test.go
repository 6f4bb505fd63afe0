package e2e

import (
	"testing"

	"github.com/nodejoin/nodejoin/internal/bench"
)

// `nodejoin bench node` launches real nodes one at a time into a running cluster and
// times each step of each join from what recorded it: every step of every node has a
// time, each after the step it follows, and every node reached Ready.
func TestBenchNodeTimesEachStep(t *testing.T) {
	name := "e2e-benchnode"
	c, _, ifaces := upCluster(t, name, "--nodes", "1")

	const nodes = 2
	var r bench.NodeReport
	c.runJSON(false, &r, "bench", "node", "--name", name, "--nodes", "2", "-o", "json")
	t.Logf("slowest step %s; Ready median %.2f s, max %.2f s", r.SlowestStep, r.ReadyMedianSeconds, r.ReadyMaxSeconds)
	for _, s := range r.Steps {
		t.Logf("%-28s at %6.2f/%6.2f s  took %6.2f/%6.2f s  (%s)", s.Step, s.AtMedianSeconds, s.AtMaxSeconds, s.TookMedianSeconds, s.TookMaxSeconds, s.Source)
	}
	if r.Nodes != nodes || len(r.Joins) != nodes {
		t.Fatalf("report of %d nodes (%d joins), want %d", r.Nodes, len(r.Joins), nodes)
	}
	steps := bench.NodeSteps()
	if len(r.Steps) != len(steps) {
		t.Errorf("report has %d steps, want %d", len(r.Steps), len(steps))
	}
	for _, j := range r.Joins {
		if missing := j.Missing(steps); len(missing) > 0 {
			t.Errorf("node %s: no time for %v", j.Node, missing)
		}
		if err := j.OutOfOrder(steps); err != nil {
			t.Error(err)
		}
		for _, s := range j.Steps {
			t.Logf("%s %-28s +%.3f s  %s", j.Node, s.Step, s.At.Sub(j.Launched).Seconds(), s.Source)
		}
	}
	for _, s := range r.Steps {
		if s.N != nodes {
			t.Errorf("step %s: %d of %d nodes have its time", s.Step, s.N, nodes)
		}
	}
	if r.ReadyMedianSeconds <= 0 || r.SlowestStep == "" {
		t.Errorf("no Ready figures or slowest step: median %v, slowest %q", r.ReadyMedianSeconds, r.SlowestStep)
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
