package cloudformation

// This file holds the engine's operations: creating a stack's resources (waiting on
// their CreationPolicy's signals), rolling a failed creation back, deleting a stack,
// and the outputs and exports of a finished one.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

func decodeConsole(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	return string(b), err
}

// start runs op for run in the background, with the stack's timeout, as its one
// running operation.
func (e *Engine) start(run *stackRun, op func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(e.ctx)
	if run.timeout > 0 {
		ctx, cancel = context.WithTimeout(e.ctx, run.timeout)
	}
	done := make(chan struct{})
	e.mu.Lock()
	run.cancel, run.done = cancel, done
	e.mu.Unlock()
	e.ops.Add(1)
	go func() {
		defer e.ops.Done()
		defer close(done)
		defer cancel()
		op(ctx)
		e.mu.Lock()
		run.cancel = nil
		e.mu.Unlock()
	}()
}

// active tells whether the resource is to be made: its Condition, if any, holds.
func (run *stackRun) active(logical string) bool {
	c := run.tmpl.Resources[logical].Condition
	return c == "" || run.conds[c]
}

// create makes a new stack's resources in order; on a failure it rolls back, deletes
// the stack or leaves it, as OnFailure says.
func (e *Engine) create(ctx context.Context, run *stackRun) {
	e.stackEvent(run, "CREATE_IN_PROGRESS", "User Initiated")
	var failed []string
	for _, logical := range run.tmpl.Order() {
		if !run.active(logical) {
			continue
		}
		if err := e.createOne(ctx, run, logical); err != nil {
			failed = append(failed, logical)
			break
		}
	}
	if len(failed) == 0 {
		if err := e.publishOutputs(run); err != nil {
			e.stackEvent(run, "ROLLBACK_IN_PROGRESS", err.Error()+" Rollback requested by user.")
			e.finishRollback(run)
			return
		}
		e.stackEvent(run, "CREATE_COMPLETE", "")
		return
	}
	if e.deleting(run) || e.ctx.Err() != nil {
		return // DeleteStack removes what was made; a stopped engine leaves it
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.stackEvent(run, "CREATE_FAILED", "Create timed out")
	}
	reason := fmt.Sprintf("The following resource(s) failed to create: [%s]. ", strings.Join(failed, ", "))
	switch run.onFailure {
	case "DO_NOTHING":
		e.stackEvent(run, "CREATE_FAILED", reason)
	case "DELETE":
		e.stackEvent(run, "ROLLBACK_IN_PROGRESS", reason+"Delete requested by user.")
		if e.deleteAll(e.ctx, run) {
			e.stackEvent(run, "ROLLBACK_COMPLETE", "")
			e.remove(run)
			return
		}
		e.stackEvent(run, "ROLLBACK_FAILED", "The following resource(s) failed to delete during rollback.")
	default:
		e.stackEvent(run, "ROLLBACK_IN_PROGRESS", reason+"Rollback requested by user.")
		e.finishRollback(run)
	}
}

func (e *Engine) finishRollback(run *stackRun) {
	if e.deleteAll(e.ctx, run) {
		e.stackEvent(run, "ROLLBACK_COMPLETE", "")
		return
	}
	e.stackEvent(run, "ROLLBACK_FAILED", "The following resource(s) failed to delete during rollback.")
}

// createOne makes one resource and, when its CreationPolicy asks, waits for its
// signals.
func (e *Engine) createOne(ctx context.Context, run *stackRun, logical string) error {
	tr := run.tmpl.Resources[logical]
	fail := func(reason string) error {
		e.resourceEvent(run, logical, tr.Type, "", "CREATE_FAILED", reason)
		return errors.New(reason)
	}
	e.resourceEvent(run, logical, tr.Type, "", "CREATE_IN_PROGRESS", "")
	r, err := e.resolve(run, logical)
	if err != nil {
		return fail(err.Error())
	}
	c := e.call(run, logical, tr.Type, r)
	count, timeout, wantSignals, err := resourceSignal(c.CreationPolicy)
	if err != nil {
		return fail(err.Error())
	}
	since := e.cf.now().UTC()
	if wantSignals {
		e.expect(run, logical, tr.Type, "CREATE_IN_PROGRESS")
		defer e.unexpect(run, logical)
	}
	res, err := e.types[tr.Type].Create(ctx, c)
	if res.PhysicalID != "" {
		// Made, even if it then failed (a node group that ended CREATE_FAILED): the
		// rollback deletes it.
		e.mu.Lock()
		run.made[logical] = &made{typ: tr.Type, res: res, props: r.props}
		e.mu.Unlock()
	}
	if err != nil {
		return fail(handlerMessage(err))
	}
	e.resourceEvent(run, logical, tr.Type, res.PhysicalID, "CREATE_IN_PROGRESS", "Resource creation Initiated")
	if wantSignals && count > 0 {
		var accept func(string) bool
		if isAutoScalingGroup(tr.Type) {
			accept = func(id string) bool { return slices.Contains(e.members(ctx, run, logical), id) }
		}
		if err := c.Signals.Wait(ctx, since, count, accept, timeout); err != nil {
			return fail(handlerMessage(err))
		}
	}
	e.resourceEvent(run, logical, tr.Type, res.PhysicalID, "CREATE_COMPLETE", "")
	return nil
}

// expect lets a resource take signals while it is in status.
func (e *Engine) expect(run *stackRun, logical, typ, status string) {
	w := &waiter{stackID: run.id, status: status, typ: typ}
	if isAutoScalingGroup(typ) {
		w.accept = func(ctx context.Context, id string) bool { return slices.Contains(e.members(ctx, run, logical), id) }
	}
	w.event = func(reason string) { e.resourceEvent(run, logical, typ, "", w.status, reason) }
	e.mu.Lock()
	run.waiting[logical] = w
	e.mu.Unlock()
}

func (e *Engine) unexpect(run *stackRun, logical string) {
	e.mu.Lock()
	delete(run.waiting, logical)
	e.mu.Unlock()
}

// signalTarget finds the resource a signal is for: it must belong to a live stack
// and be waiting for signals.
func (e *Engine) signalTarget(_ context.Context, stackName, logical string) (*waiter, *protocol.Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	run := e.runs[stackName]
	if run == nil {
		for _, r := range e.runs {
			if r.id == stackName {
				run = r
			}
		}
	}
	if run == nil {
		return nil, stackNotFound(stackName)
	}
	if _, ok := run.tmpl.Resources[logical]; !ok {
		return nil, protocol.ValidationError("Resource %s does not exist for stack %s", logical, run.name)
	}
	w := run.waiting[logical]
	if w == nil {
		status := "CREATE_COMPLETE"
		if st, ok := e.cf.stacks.Get(run.name); ok {
			for _, r := range st.Resources {
				if r.LogicalID == logical {
					status = r.Status
				}
			}
		}
		return nil, protocol.ValidationError("Resource %s in stack %s is in %s state and cannot be signaled", logical, run.id, status)
	}
	return w, nil
}

// deleteAll deletes the stack's resources in reverse order; false when one failed.
func (e *Engine) deleteAll(ctx context.Context, run *stackRun) bool {
	ok := true
	order := run.tmpl.Order()
	e.mu.Lock()
	for logical := range run.made {
		if !slices.Contains(order, logical) {
			order = append(order, logical) // made from an earlier template
		}
	}
	e.mu.Unlock()
	for _, logical := range slices.Backward(order) {
		e.mu.Lock()
		m := run.made[logical]
		e.mu.Unlock()
		if m == nil {
			continue
		}
		if err := e.deleteOne(ctx, run, logical, m, run.tmpl.Resources[logical], true); err != nil {
			ok = false
		}
	}
	return ok
}

func (e *Engine) deleteOne(ctx context.Context, run *stackRun, logical string, m *made, tr *template.Resource, forget bool) error {
	if tr != nil && tr.DeletionPolicy == "Retain" {
		e.resourceEvent(run, logical, m.typ, m.res.PhysicalID, "DELETE_SKIPPED", "")
		if forget {
			e.forget(run, logical)
		}
		return nil
	}
	e.resourceEvent(run, logical, m.typ, m.res.PhysicalID, "DELETE_IN_PROGRESS", "")
	c := &resource.Call{StackName: run.name, StackID: run.id, LogicalID: logical, Region: e.cfg.Region, AccountID: e.cfg.AccountID,
		Type: m.typ, Properties: m.props, Event: func(st, reason string) { e.resourceEvent(run, logical, m.typ, "", st, reason) }}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	if err := e.types[m.typ].Delete(dctx, c, m.res); err != nil {
		e.resourceEvent(run, logical, m.typ, m.res.PhysicalID, "DELETE_FAILED", handlerMessage(err))
		return err
	}
	e.resourceEvent(run, logical, m.typ, m.res.PhysicalID, "DELETE_COMPLETE", "")
	if forget {
		e.forget(run, logical)
	}
	return nil
}

func (e *Engine) forget(run *stackRun, logical string) {
	e.mu.Lock()
	delete(run.made, logical)
	e.mu.Unlock()
}

// destroy is DeleteStack's operation; DeleteStack has recorded DELETE_IN_PROGRESS.
func (e *Engine) destroy(ctx context.Context, run *stackRun) {
	if !e.deleteAll(ctx, run) {
		var failed []string
		e.mu.Lock()
		for logical := range run.made {
			failed = append(failed, logical)
		}
		e.mu.Unlock()
		slices.Sort(failed)
		e.stackEvent(run, "DELETE_FAILED", fmt.Sprintf("The following resource(s) failed to delete: [%s]. ", strings.Join(failed, ", ")))
		return
	}
	e.stackEvent(run, "DELETE_COMPLETE", "")
	e.remove(run)
}

// remove moves a deleted stack to the deleted ones and drops its exports.
func (e *Engine) remove(run *stackRun) {
	e.mu.Lock()
	delete(e.runs, run.name)
	e.changeSets = slices.DeleteFunc(e.changeSets, func(cs *changeSet) bool { return cs.run == run })
	for name, x := range e.exports {
		if x.stackID == run.id {
			delete(e.exports, name)
		}
	}
	e.mu.Unlock()
	if st, ok := e.cf.stacks.Get(run.name); ok {
		st.Deleted = e.cf.now().UTC()
		st.Status = "DELETE_COMPLETE"
		st.Resources = nil
		e.cf.stacks.Put(st)
	}
}

// publishOutputs evaluates the stack's outputs and exports.
func (e *Engine) publishOutputs(run *stackRun) error {
	vals, err := run.tmpl.EvalOutputs(e.env(run))
	if err != nil {
		return &reasonError{err.Error()}
	}
	outs := make([]Output, len(vals))
	names := map[string]string{}
	for i, v := range vals {
		outs[i] = Output(v)
		if v.ExportName != "" {
			names[v.ExportName] = v.Value
		}
	}
	e.mu.Lock()
	for name := range names {
		if x, ok := e.exports[name]; ok && x.stackID != run.id {
			e.mu.Unlock()
			return &reasonError{fmt.Sprintf("Export with name %s is already exported by stack %s.", name, x.stackID)}
		}
	}
	for name, x := range e.exports {
		if x.stackID == run.id {
			delete(e.exports, name)
		}
	}
	for name, v := range names {
		e.exports[name] = export{value: v, stackID: run.id}
	}
	e.mu.Unlock()
	e.cf.stacks.Update(run.name, func(st *Stack) { st.Outputs = outs })
	return nil
}
