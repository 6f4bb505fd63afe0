package cloudformation

// This file holds UpdateStack's operation: resources added, changed in place,
// replaced or removed as the new template and parameters say, and on a failure the
// stack rolled back to what it was.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
)

// plan is what a stack is made from: a template and its bound parameters.
type plan struct {
	tmpl          *template.Template
	given, params map[string]string
	conds         map[string]bool
	tags          map[string]string
}

func (e *Engine) planOf(run *stackRun) plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	return plan{run.tmpl, run.given, run.params, run.conds, run.tags}
}

func (e *Engine) apply(run *stackRun, p plan) {
	e.mu.Lock()
	run.tmpl, run.given, run.params, run.conds, run.tags = p.tmpl, p.given, p.params, p.conds, p.tags
	e.mu.Unlock()
	e.cf.stacks.Update(run.name, func(st *Stack) {
		st.Description, st.Parameters, st.Tags = p.tmpl.Description, shownParameters(p.tmpl, p.params), maps.Clone(p.tags)
	})
}

// replacedResource is a resource an update replaced, deleted once the update completes
// (or restored if it rolls back).
type replacedResource struct {
	logical string
	old     *made
}

// update moves a stack to the plan p; UpdateStack has recorded UPDATE_IN_PROGRESS.
func (e *Engine) update(ctx context.Context, run *stackRun, p plan) {
	old := e.planOf(run)
	e.mu.Lock()
	before := maps.Clone(run.made)
	e.mu.Unlock()
	e.apply(run, p)
	created, updated, replaced, failed := e.changeResources(ctx, run, p, old)
	if failed == "" {
		if err := e.publishOutputs(run); err != nil {
			failed = "Outputs"
		}
	}
	if failed == "" {
		e.stackEvent(run, "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "")
		for _, logical := range slices.Backward(old.tmpl.Order()) {
			if m := before[logical]; m != nil && (p.tmpl.Resources[logical] == nil || !run.active(logical)) {
				_ = e.deleteOne(e.ctx, run, logical, m, old.tmpl.Resources[logical], true)
			}
		}
		for _, r := range slices.Backward(replaced) {
			_ = e.deleteOne(e.ctx, run, r.logical, r.old, nil, false)
		}
		e.stackEvent(run, "UPDATE_COMPLETE", "")
		return
	}
	if e.deleting(run) || e.ctx.Err() != nil {
		return
	}
	e.rollbackUpdate(run, old, before, failed, created, updated, replaced)
}

// changeResources makes, changes or replaces the resources of the plan p, in order,
// until one fails: what it created, updated in place and replaced, and the one that
// failed ("" for none).
func (e *Engine) changeResources(ctx context.Context, run *stackRun, p, old plan) (created, updated []string, replaced []replacedResource, failed string) {
	for _, logical := range p.tmpl.Order() {
		if !run.active(logical) {
			continue
		}
		e.mu.Lock()
		m := run.made[logical]
		e.mu.Unlock()
		if m == nil {
			if err := e.createOne(ctx, run, logical); err != nil {
				failed = logical
				break
			}
			created = append(created, logical)
			continue
		}
		r, err := e.resolve(run, logical)
		if err != nil {
			e.resourceEvent(run, logical, m.typ, m.res.PhysicalID, "UPDATE_FAILED", err.Error())
			failed = logical
			break
		}
		tr := p.tmpl.Resources[logical]
		if m.typ == tr.Type && reflect.DeepEqual(m.props, r.props) && reflect.DeepEqual(old.tmpl.Resources[logical], tr) {
			continue
		}
		was, err := e.updateOne(ctx, run, logical, m, r)
		if err != nil {
			failed = logical
			break
		}
		if was != nil {
			replaced = append(replaced, replacedResource{logical, was})
		} else {
			updated = append(updated, logical)
		}
	}
	return created, updated, replaced, failed
}

// rollbackUpdate puts a stack whose update failed back as it was.
func (e *Engine) rollbackUpdate(run *stackRun, old plan, before map[string]*made, failed string, created, updated []string, replaced []replacedResource) {
	e.stackEvent(run, "UPDATE_ROLLBACK_IN_PROGRESS", fmt.Sprintf("The following resource(s) failed to update: [%s]. ", failed))
	ctx := e.ctx
	current := func(logical string) *made {
		e.mu.Lock()
		defer e.mu.Unlock()
		return run.made[logical]
	}
	e.apply(run, old)
	ok := true
	for _, logical := range slices.Backward(append(slices.Clone(updated), failed)) {
		m, was := current(logical), before[logical]
		if m == nil || was == nil || slices.ContainsFunc(replaced, func(r replacedResource) bool { return r.logical == logical }) {
			continue
		}
		back, err := e.resolve(run, logical)
		if err != nil {
			ok = false
			continue
		}
		back.props = was.props
		if _, err := e.updateOne(ctx, run, logical, m, back); err != nil {
			ok = false
		}
	}
	// A replacement is dropped and the resource it replaced takes its place again.
	var dropped []replacedResource
	for _, r := range replaced {
		if m := current(r.logical); m != nil {
			dropped = append(dropped, replacedResource{r.logical, m})
		}
		e.mu.Lock()
		run.made[r.logical] = r.old
		e.mu.Unlock()
		e.setEntry(run, r.logical, r.old.res.PhysicalID)
	}
	e.stackEvent(run, "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "")
	for _, logical := range slices.Backward(created) {
		if m := current(logical); m != nil {
			if e.deleteOne(ctx, run, logical, m, nil, true) != nil {
				ok = false
			}
		}
	}
	for _, r := range dropped {
		if e.deleteOne(ctx, run, r.logical, r.old, nil, false) != nil {
			ok = false
		}
	}
	if !ok {
		e.stackEvent(run, "UPDATE_ROLLBACK_FAILED", "The following resource(s) failed to roll back.")
		return
	}
	_ = e.publishOutputs(run)
	e.stackEvent(run, "UPDATE_ROLLBACK_COMPLETE", "")
}

// updateOne changes one resource in place or, when the provisioner says the change
// needs it, replaces it; it returns the replaced resource, if any.
func (e *Engine) updateOne(ctx context.Context, run *stackRun, logical string, m *made, r resolved) (*made, error) {
	tr := run.tmpl.Resources[logical]
	typ := m.typ
	if tr != nil {
		typ = tr.Type
	}
	fail := func(err error) (*made, error) {
		e.resourceEvent(run, logical, typ, m.res.PhysicalID, "UPDATE_FAILED", handlerMessage(err))
		return nil, err
	}
	e.resourceEvent(run, logical, typ, m.res.PhysicalID, "UPDATE_IN_PROGRESS", "")
	if tr == nil {
		return fail(fmt.Errorf("resource %s is not in the template", logical))
	}
	c := e.call(run, logical, typ, r)
	if isAutoScalingGroup(typ) {
		e.expect(run, logical, typ, "UPDATE_IN_PROGRESS")
		defer e.unexpect(run, logical)
	}
	if typ == m.typ {
		res, err := e.types[typ].Update(ctx, c, m.res, m.props)
		switch {
		case err == nil:
			e.mu.Lock()
			run.made[logical] = &made{typ: typ, res: res, props: r.props}
			e.mu.Unlock()
			e.resourceEvent(run, logical, typ, res.PhysicalID, "UPDATE_COMPLETE", "")
			return nil, nil
		case !errors.Is(err, resource.ErrReplace):
			return fail(err)
		}
	}
	e.resourceEvent(run, logical, typ, m.res.PhysicalID, "UPDATE_IN_PROGRESS", "Requested update requires the creation of a new physical resource; hence creating one.")
	res, err := e.types[typ].Create(ctx, c)
	if err != nil {
		return fail(err)
	}
	e.mu.Lock()
	run.made[logical] = &made{typ: typ, res: res, props: r.props}
	e.mu.Unlock()
	e.setEntry(run, logical, res.PhysicalID)
	e.resourceEvent(run, logical, typ, res.PhysicalID, "UPDATE_IN_PROGRESS", "Resource creation Initiated")
	e.resourceEvent(run, logical, typ, res.PhysicalID, "UPDATE_COMPLETE", "")
	return m, nil
}

// setEntry makes the store's resource entry name a new physical resource, so that the
// replaced one's events leave it alone.
func (e *Engine) setEntry(run *stackRun, logical, physical string) {
	e.cf.stacks.Update(run.name, func(st *Stack) {
		for i := range st.Resources {
			if st.Resources[i].LogicalID == logical {
				st.Resources[i].PhysicalID = physical
			}
		}
	})
}

// shownParameters are a stack's parameters as DescribeStacks shows them: NoEcho
// values masked.
func shownParameters(t *template.Template, params map[string]string) map[string]string {
	out := make(map[string]string, len(params))
	for k, v := range params {
		if p := t.Parameters[k]; p != nil && p.NoEcho {
			v = "****"
		}
		out[k] = v
	}
	return out
}
