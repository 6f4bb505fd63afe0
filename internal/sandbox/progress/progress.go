// Package progress is how the sandbox reports what it does: the events of `nodejoin
// up` and `add node`, and a reporter that serializes them to one callback. It imports
// nothing of nodejoin.
package progress

import (
	"sync"
	"time"
)

// Func receives a sandbox's progress. Calls are serialized.
type Func func(Event)

// EventKind says what an Event reports.
type EventKind string

// The kinds of events.
const (
	// StepStarted, StepDone and StepFailed report a step of creating the cluster
	// (Step), with Elapsed once it ended.
	StepStarted EventKind = "step-started"
	StepDone    EventKind = "step-done"
	StepFailed  EventKind = "step-failed"
	// Note is a remark (Detail), such as why simulated kubelets replace real ones.
	Note EventKind = "note"
	// NodeStep reports that Node finished a join step (Step) Elapsed after its launch.
	NodeStep EventKind = "node-step"
	// NodeFailed reports that Node's Step failed, the reason in Detail.
	NodeFailed EventKind = "node-failed"
	// NodeCounts reports, for many nodes, how many (of Total) passed each step.
	NodeCounts EventKind = "node-counts"
)

// Event is one thing that happened.
type Event struct {
	Kind    EventKind     `json:"kind"`
	Step    string        `json:"step,omitempty"`
	Node    string        `json:"node,omitempty"`
	Elapsed time.Duration `json:"elapsed,omitempty"`
	Detail  string        `json:"detail,omitempty"`
	Total   int           `json:"total,omitempty"`
	Counts  []StepCount   `json:"counts,omitempty"`
}

// StepCount is how many nodes passed a join step.
type StepCount struct {
	Step  string `json:"step"`
	Nodes int    `json:"nodes"`
}

// Reporter serializes a Func; a nil one (or one with a nil Func) discards.
type Reporter struct {
	mu sync.Mutex
	fn Func
}

// NewReporter returns a Reporter that calls fn.
func NewReporter(fn Func) *Reporter { return &Reporter{fn: fn} }

// Report sends e.
func (r *Reporter) Report(e Event) {
	if r == nil || r.fn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn(e)
}

// Note sends a remark.
func (r *Reporter) Note(detail string) { r.Report(Event{Kind: Note, Detail: detail}) }

// Timed reports a step's start and end around fn.
func (r *Reporter) Timed(step string, fn func() error) error {
	start := time.Now()
	r.Report(Event{Kind: StepStarted, Step: step})
	if err := fn(); err != nil {
		r.Report(Event{Kind: StepFailed, Step: step, Elapsed: time.Since(start)})
		return err
	}
	r.Report(Event{Kind: StepDone, Step: step, Elapsed: time.Since(start)})
	return nil
}
