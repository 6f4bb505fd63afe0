package progress

import (
	"fmt"
	"strings"

	"github.com/nodejoin/nodejoin/internal/printer"
)

// Line renders a progress event as one line.
func (e Event) Line() string {
	round := printer.Round
	switch e.Kind {
	case StepStarted:
		return " • " + e.Step
	case Note:
		return " • " + e.Detail
	case StepDone:
		return fmt.Sprintf(" ✓ %s (%s)", e.Step, round(e.Elapsed))
	case StepFailed:
		return fmt.Sprintf(" ✗ %s failed after %s", e.Step, round(e.Elapsed))
	case NodeStep:
		return fmt.Sprintf(" ✓ %-32s %-27s +%-6s %s", e.Node, e.Step, round(e.Elapsed), e.Detail)
	case NodeFailed:
		return fmt.Sprintf(" ✗ %-32s %-27s %s", e.Node, e.Step, e.Detail)
	case NodeCounts:
		parts := make([]string, 0, len(e.Counts))
		for _, c := range e.Counts {
			parts = append(parts, fmt.Sprintf("%s %d", c.Step, c.Nodes))
		}
		return fmt.Sprintf(" • %d nodes: %s", e.Total, strings.Join(parts, ", "))
	}
	return fmt.Sprintf(" • %s %s %s", e.Kind, e.Step, e.Detail)
}
