package sandbox

import "github.com/nodejoin/nodejoin/internal/sandbox/progress"

// Progress receives a sandbox's progress. Calls are serialized.
type Progress = progress.Func

// Event is one thing that happened; EventKind says what.
type (
	Event     = progress.Event
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
