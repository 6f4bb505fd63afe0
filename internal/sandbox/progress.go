package sandbox

import "github.com/nodejoin/nodejoin/internal/sandbox/progress"

// Progress receives a sandbox's progress. Calls are serialized.
type Progress = progress.Func

// The progress types, named as the sandbox's API names them (see package progress).
type (
	// Event is one thing that happened.
	Event = progress.Event
	// EventKind says what happened.
	EventKind = progress.EventKind
	// StepCount is how many nodes passed a join step.
	StepCount = progress.StepCount
)

// The kinds of events; see package progress.
const (
	StepStarted = progress.StepStarted
	StepDone    = progress.StepDone
	StepFailed  = progress.StepFailed
	Note        = progress.Note
	NodeStep    = progress.NodeStep
	NodeFailed  = progress.NodeFailed
	NodeCounts  = progress.NodeCounts
)
