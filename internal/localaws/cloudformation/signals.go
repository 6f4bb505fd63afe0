package cloudformation

// This file holds the signals instances send (SignalResource, what cfn-signal calls)
// and the waits of the resources whose CreationPolicy or rolling update asks for them.
// A signal is taken only for a live stack's resource that is waiting for signals, from
// an instance of that resource; every refusal is counted by its reason and logged
// without credentials.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// Signal is one SignalResource call: a stack's logical resource (such as NodeGroup)
// signalled SUCCESS or FAILURE by one instance (UniqueID, its instance ID).
type Signal struct {
	StackName         string    `json:"stackName"`
	StackID           string    `json:"stackId"`
	LogicalResourceID string    `json:"logicalResourceId"`
	UniqueID          string    `json:"uniqueId"`
	Status            string    `json:"status"`
	Time              time.Time `json:"time"`
}

// signalBox holds the signals taken and wakes the resources waiting on them.
type signalBox struct {
	mu      sync.Mutex
	signals []Signal
	changed chan struct{} // closed and replaced on each signal
	refused map[string]int
}

func newSignalBox() *signalBox {
	return &signalBox{changed: make(chan struct{}), refused: map[string]int{}}
}

// add records a signal; a signal from the same instance for the same resource of the
// same stack replaces the earlier one.
func (b *signalBox) add(s Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.IndexFunc(b.signals, func(o Signal) bool {
		return o.StackID == s.StackID && o.LogicalResourceID == s.LogicalResourceID && o.UniqueID == s.UniqueID
	})
	if i >= 0 {
		b.signals[i] = s
	} else {
		b.signals = append(b.signals, s)
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *signalBox) refuse(reason string) {
	b.mu.Lock()
	b.refused[reason]++
	b.mu.Unlock()
}

// snapshot returns the signals of one resource since a time, and the channel closed
// at the next signal.
func (b *signalBox) snapshot(stackID, logical string, since time.Time) ([]Signal, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Signal
	for _, s := range b.signals {
		if s.StackID == stackID && s.LogicalResourceID == logical && !s.Time.Before(since) {
			out = append(out, s)
		}
	}
	return out, b.changed
}

// Signals returns the signals taken, oldest first.
func (c *CloudFormation) Signals() []Signal {
	c.box.mu.Lock()
	defer c.box.mu.Unlock()
	return slices.Clone(c.box.signals)
}

// RefusedSignals counts the signals refused, by reason: no-such-stack,
// no-such-resource, not-waiting, not-an-instance-of-the-resource,
// signed-by-another-instance.
func (c *CloudFormation) RefusedSignals() map[string]int {
	c.box.mu.Lock()
	defer c.box.mu.Unlock()
	out := make(map[string]int, len(c.box.refused))
	for k, v := range c.box.refused {
		out[k] = v
	}
	return out
}

func (c *CloudFormation) signalResource(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	var s Signal
	s.StackName, _ = root.Str("StackName")
	s.LogicalResourceID, _ = root.Str("LogicalResourceId")
	s.UniqueID, _ = root.Str("UniqueId")
	s.Status, _ = root.Str("Status")
	for _, p := range []struct{ name, v string }{{"stackName", s.StackName}, {"logicalResourceId", s.LogicalResourceID}, {"uniqueId", s.UniqueID}, {"status", s.Status}} {
		if p.v == "" {
			return nil, protocol.ValidationError("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", p.name)
		}
	}
	if s.Status != "SUCCESS" && s.Status != "FAILURE" {
		return nil, protocol.ValidationError("1 validation error detected: Value '%s' at 'status' failed to satisfy constraint: Member must satisfy enum value set: [SUCCESS, FAILURE]", s.Status)
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	refuse := func(reason string, aerr *protocol.Error) (any, *protocol.Error) {
		c.box.refuse(reason)
		c.log.Info("signal refused", "stack", s.StackName, "resource", s.LogicalResourceID, "uniqueId", s.UniqueID, "status", s.Status, "reason", reason)
		return nil, aerr
	}
	if c.engine == nil {
		return refuse("no-such-stack", stackNotFound(s.StackName))
	}
	w, aerr := c.engine.signalTarget(r.Context, s.StackName, s.LogicalResourceID)
	if aerr != nil {
		reason := "no-such-resource"
		if strings.Contains(aerr.Message, "Stack with id") {
			reason = "no-such-stack"
		} else if strings.Contains(aerr.Message, "cannot be signaled") {
			reason = "not-waiting"
		}
		return refuse(reason, aerr)
	}
	// A role session of an instance carries the instance ID as its session name, as
	// EC2's instance roles do: an instance may only speak for itself.
	if caller, ok := protocol.CallerFrom(r.Context); ok && caller.Session() {
		session := caller.ARN[strings.LastIndex(caller.ARN, "/")+1:]
		if strings.HasPrefix(session, "i-") && session != s.UniqueID {
			return refuse("signed-by-another-instance", protocol.ValidationError("UniqueId %s is not the instance that signed the request (%s); an instance signals for itself", s.UniqueID, session))
		}
	}
	if w.accept != nil && !w.accept(r.Context, s.UniqueID) {
		return refuse("not-an-instance-of-the-resource", protocol.ValidationError("%s is not an instance of resource %s in stack %s", s.UniqueID, s.LogicalResourceID, s.StackName))
	}
	s.StackID = w.stackID
	s.Time = c.now().UTC()
	c.box.add(s)
	w.event(fmt.Sprintf("Received %s signal with UniqueId %s", s.Status, s.UniqueID))
	return nil, nil
}

// waiter is a resource waiting for signals: its stack's ID, and which instances may
// signal it (nil: any).
type waiter struct {
	stackID string
	typ     string
	// status is the resource's status while it waits (CREATE_IN_PROGRESS,
	// UPDATE_IN_PROGRESS): each signal taken is an event of that status.
	status string
	accept func(ctx context.Context, uniqueID string) bool
	event  func(reason string)
}

// boxSignals is resource.Signals over the box, for one resource of one stack. A
// FAILURE names the instance and, when its console says why, the node's own reason.
type boxSignals struct {
	box     *signalBox
	stackID string
	logical string
	reason  func(ctx context.Context, instanceID string) string
	// members lists the resource's instances, so that a timeout can say why those
	// that never signalled did not (nil: not known).
	members func(ctx context.Context) []string
}

func (b *boxSignals) Wait(ctx context.Context, since time.Time, count int, accept func(string) bool, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		got, changed := b.box.snapshot(b.stackID, b.logical, since)
		success := 0
		for _, s := range got {
			if accept != nil && !accept(s.UniqueID) {
				continue
			}
			if s.Status == "FAILURE" {
				msg := fmt.Sprintf("Received FAILURE signal with UniqueId %s", s.UniqueID)
				if why := b.reason(ctx, s.UniqueID); why != "" {
					msg += ": " + why
				}
				return &reasonError{msg}
			}
			success++
		}
		if success >= count {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			msg := fmt.Sprintf("Failed to receive %d resource signal(s) within the specified duration (received %d)", count, success)
			return &reasonError{msg + b.silentReasons(ctx, got)}
		case <-ctx.Done():
			return &reasonError{fmt.Sprintf("Stopped waiting for %d resource signal(s) (received %d): %v", count, success, context.Cause(ctx))}
		}
	}
}

// reasonError is a failure as CloudFormation words it in an event or a status reason
// (capitalized, ending with a full stop), which Go's error-string conventions would
// not allow.
type reasonError struct{ msg string }

func (e *reasonError) Error() string { return e.msg }

// silentReasons says, for the instances of the resource that sent no signal, what their
// consoles say went wrong, if anything.
func (b *boxSignals) silentReasons(ctx context.Context, got []Signal) string {
	if b.members == nil {
		return ""
	}
	var out []string
	for _, id := range b.members(ctx) {
		if slices.ContainsFunc(got, func(s Signal) bool { return s.UniqueID == id }) {
			continue
		}
		if why := b.reason(ctx, id); why != "" {
			out = append(out, id+": "+why)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}
