package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/printer/printertest"
)

var testSteps = []NodeStep{{"instance started", ""}, {"images imported", "instance started"}, {"kubelet started", "images imported"},
	{"nodeadm done", "kubelet started"}, {"authenticated", "kubelet started"}, {"Node registered", "authenticated"},
	{"serving certificate issued", "Node registered"}, {"network ready", "Node registered"}, {"Ready", "network ready"}}

var t0 = time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)

// join makes a node's join from seconds since its start, one per step of testSteps.
func join(node string, secs ...float64) NodeJoin {
	j := NodeJoin{Node: node, InstanceID: "i-" + node, Launched: t0}
	for i, s := range secs {
		j.Steps = append(j.Steps, StepTime{Step: testSteps[i].Name, At: t0.Add(time.Duration(s * float64(time.Second))), Source: "source of " + testSteps[i].Name})
	}
	return j
}

func sampleNodeReport() *NodeReport {
	r := NodeFigures(testSteps, []NodeJoin{
		join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 8.4, 9),
		join("b", 0.2, 5.5, 5.7, 6.8, 7.0, 7.1, 7.2, 8.0, 9),
		join("c", 0.1, 7.0, 7.3, 8.4, 8.5, 8.6, 9.0, 9.5, 10),
	})
	r.Cluster, r.Load = "bench", "1.00 0.50 0.25"
	return r
}

func TestNodeFigures(t *testing.T) {
	r := sampleNodeReport()
	byStep := map[string]StepFigures{}
	for _, s := range r.Steps {
		byStep[s.Step] = s
	}
	// images imported took 5.9, 5.3 and 6.9 s: the slowest step, median 5.9.
	if got := byStep["images imported"]; got.TookMedianSeconds != 5.9 || got.TookMaxSeconds != 6.9 || got.AtMedianSeconds != 6 || got.AtMaxSeconds != 7 || got.N != 3 {
		t.Errorf("images imported: %+v", got)
	}
	if r.SlowestStep != "images imported" {
		t.Errorf("slowest step %q, want images imported", r.SlowestStep)
	}
	if r.ReadyMedianSeconds != 9 || r.ReadyMaxSeconds != 10 {
		t.Errorf("Ready median/max %v/%v, want 9/10", r.ReadyMedianSeconds, r.ReadyMaxSeconds)
	}
	// A step's duration counts from the step it follows, not the one listed before it.
	if got := byStep["authenticated"]; got.TookMedianSeconds != 1.3 {
		t.Errorf("authenticated took median %v, want 1.3 (since kubelet started)", got.TookMedianSeconds)
	}
}

func TestNodeFiguresCountOnlyNodesWithTheStep(t *testing.T) {
	partial := join("p", 0.1, 4)
	r := NodeFigures(testSteps, []NodeJoin{join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 8.4, 9), partial})
	if r.Steps[1].N != 2 || r.Steps[2].N != 1 {
		t.Errorf("nodes per step %d, %d; want 2, 1", r.Steps[1].N, r.Steps[2].N)
	}
	if got := partial.Missing(testSteps); len(got) != len(testSteps)-2 || got[0] != "kubelet started" {
		t.Errorf("missing %v", got)
	}
}

func TestNodeJoinOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    NodeJoin
		want string
	}{
		{"in order", join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 8.4, 9), ""},
		// authenticated before nodeadm done is fine: it follows kubelet started.
		{"overlapping steps", join("a", 0.1, 6.0, 6.2, 7.3, 6.5, 7.6, 7.9, 8.4, 9), ""},
		// Ready in whole seconds (9) a little before network ready (9.4): truncation.
		{"whole seconds read early", join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 9.4, 9), ""},
		{"registered before authenticated", join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.4, 7.9, 8.4, 9), "Node registered at 05:00:07.400 is before authenticated at 05:00:07.500"},
		{"whole second too early", join("a", 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 10.5, 9), "Ready at 05:00:09.000 is before network ready"},
		{"before the instance", join("a", -0.5), "instance started at 04:59:59.500 is before the instance's start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.j.OutOfOrder(testSteps)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRunNodeLaunchesOneAtATime(t *testing.T) {
	launched, read := 0, 0
	var progress bytes.Buffer
	r, err := RunNode(t.Context(), NodeOptions{
		Cluster: "c", Nodes: 3, Steps: testSteps, Progress: &progress, Settle: time.Millisecond,
		Launch: func(context.Context) (string, error) {
			if launched != read {
				return "", errors.New("launched before the previous join was read")
			}
			launched++
			return fmt.Sprintf("n%d", launched), nil
		},
		Timeline: func(_ context.Context, id string) (*NodeJoin, error) {
			read++
			j := join(id, 0.1, 6.0, 6.2, 7.3, 7.5, 7.6, 7.9, 8.4, float64(8+read))
			return &j, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Nodes != 3 || r.ReadyMaxSeconds != 11 || r.Cluster != "c" {
		t.Errorf("report: %d nodes, Ready max %v, cluster %q", r.Nodes, r.ReadyMaxSeconds, r.Cluster)
	}
	if !strings.Contains(progress.String(), "node 3/3 n3 (n3): Ready 11 s after its instance started") {
		t.Errorf("progress:\n%s", progress.String())
	}
	_, err = RunNode(t.Context(), NodeOptions{Nodes: 2, Steps: testSteps, StateDir: t.TempDir(),
		Launch: func(context.Context) (string, error) { return "", errors.New("no capacity") }})
	if err == nil || !strings.Contains(err.Error(), "node 1 of 2: no capacity") {
		t.Errorf("a failed launch: %v", err)
	}
}

func TestPrintNodeReport(t *testing.T) {
	var b bytes.Buffer
	sampleNodeReport().WriteText(&b)
	printertest.Golden(t, "bench-node.txt", b.String())
}

func TestNodeReportJSON(t *testing.T) {
	data, err := json.MarshalIndent(sampleNodeReport(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "node-report.json", append(data, '\n'))
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodes", "ready_median_seconds", "ready_max_seconds", "slowest_step", "steps", "joins"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report has no %s", k)
		}
	}
	step := m["steps"].([]any)[0].(map[string]any)
	for _, k := range []string{"step", "after", "source", "at_median_seconds", "at_max_seconds", "took_median_seconds", "took_max_seconds", "n"} {
		if _, ok := step[k]; !ok {
			t.Errorf("a step's figures have no %s", k)
		}
	}
}
