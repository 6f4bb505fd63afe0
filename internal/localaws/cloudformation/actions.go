package cloudformation

// This file holds the write actions (CreateStack, UpdateStack, DeleteStack) and the
// template actions (ValidateTemplate, GetTemplate), with ListExports, over the stack
// engine. Everything a template or its parameters get wrong is refused before any
// resource is made.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

var stackNamePattern = regexp.MustCompile(`^[a-zA-Z][-a-zA-Z0-9]{0,127}$`)

func noEngine() *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, "ValidationError", "This local CloudFormation runs no stacks (it was started without a stack engine)")
}

// stackInput is what CreateStack and UpdateStack share.
type stackInput struct {
	name           string
	body           string
	usePrevious    bool
	given          map[string]string
	previous       []string // parameters given with UsePreviousValue
	tags           map[string]string
	tagsGiven      bool
	capabilities   []string
	onFailure      string
	timeoutMinutes int64
}

// readCreateOptions reads what only CreateStack takes: what to do on a failure, and
// the timeout.
func (in *stackInput) readCreateOptions(p *protocol.Params) *protocol.Error {
	disable, aerr := p.Bool("DisableRollback")
	if aerr != nil {
		return aerr
	}
	in.onFailure, _ = p.Str("OnFailure")
	switch {
	case in.onFailure != "" && disable != nil:
		return protocol.ValidationError("You can specify either DisableRollback or OnFailure, but not both.")
	case disable != nil && *disable:
		in.onFailure = "DO_NOTHING"
	case in.onFailure == "":
		in.onFailure = "ROLLBACK"
	case !slices.Contains([]string{"ROLLBACK", "DELETE", "DO_NOTHING"}, in.onFailure):
		return protocol.ValidationError("1 validation error detected: Value '%s' at 'onFailure' failed to satisfy constraint: Member must satisfy enum value set: [DO_NOTHING, ROLLBACK, DELETE]", in.onFailure)
	}
	t, aerr := p.Int("TimeoutInMinutes")
	if aerr != nil {
		return aerr
	}
	if t != nil {
		if *t < 1 {
			return protocol.ValidationError("1 validation error detected: Value '%d' at 'timeoutInMinutes' failed to satisfy constraint: Member must have value greater than or equal to 1", *t)
		}
		in.timeoutMinutes = *t
	}
	p.Ignore("EnableTerminationProtection")
	return nil
}

// readParameters reads Parameters and Tags.
func (in *stackInput) readParameters(p *protocol.Params) *protocol.Error {
	for i, m := range p.List("Parameters") {
		key, _ := m.Str("ParameterKey")
		if key == "" {
			return protocol.ValidationError("Parameters[%d]: ParameterKey is required", i+1)
		}
		prev, aerr := m.Bool("UsePreviousValue")
		if aerr != nil {
			return aerr
		}
		value, hasValue := m.Str("ParameterValue")
		m.Ignore("ResolvedValue")
		if prev != nil && *prev {
			if hasValue {
				return protocol.ValidationError("Invalid input for parameter key %s. Cannot specify usePreviousValue as true and non empty value for a parameter", key)
			}
			in.previous = append(in.previous, key)
			continue
		}
		in.given[key] = value
	}
	for _, m := range p.List("Tags") {
		k, _ := m.Str("Key")
		v, _ := m.Str("Value")
		in.tags[k] = v
		in.tagsGiven = true
	}
	return nil
}

func readStackInput(p *protocol.Params, update bool) (*stackInput, *protocol.Error) {
	in := &stackInput{given: map[string]string{}, tags: map[string]string{}}
	var aerr *protocol.Error
	if in.name, aerr = p.Required("StackName"); aerr != nil {
		return nil, aerr
	}
	in.body, _ = p.Str("TemplateBody")
	if url, ok := p.Str("TemplateURL"); ok && url != "" {
		return nil, protocol.ValidationError("TemplateURL %s: the local CloudFormation has no S3 to read it from; pass the template itself (--template-body file://template.yaml)", url)
	}
	if update {
		b, aerr := p.Bool("UsePreviousTemplate")
		if aerr != nil {
			return nil, aerr
		}
		in.usePrevious = b != nil && *b
	}
	if aerr := in.readParameters(p); aerr != nil {
		return nil, aerr
	}
	in.capabilities = p.StrList("Capabilities")
	if !update {
		if aerr := in.readCreateOptions(p); aerr != nil {
			return nil, aerr
		}
	} else {
		p.Ignore("DisableRollback")
	}
	// Accepted and recorded nowhere: the local account has no SNS, no service roles
	// that differ from the engine's own, and no retries to deduplicate.
	for _, name := range []string{"RoleARN", "NotificationARNs", "ClientRequestToken", "ResourceTypes", "RollbackConfiguration", "StackPolicyBody", "RetainExceptOnCreate"} {
		p.Ignore(name)
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if !stackNamePattern.MatchString(in.name) && !strings.HasPrefix(in.name, "arn:") {
		return nil, protocol.ValidationError("1 validation error detected: Value '%s' at 'stackName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]*", in.name)
	}
	return in, nil
}

// prepare reads, validates and binds a template for a stack: every refusal happens
// here, before anything is made.
func (e *Engine) prepare(ctx context.Context, in *stackInput, body string, name, id string) (plan, *protocol.Error) {
	if body == "" {
		return plan{}, protocol.ValidationError("Either Template URL or Template Body must be specified.")
	}
	t, err := template.Parse([]byte(body))
	if err != nil {
		return plan{}, protocol.ValidationError("%s", err.Error())
	}
	if err := t.Validate(e.supported); err != nil {
		return plan{}, protocol.ValidationError("%s", err.Error())
	}
	ssm := func(name string) (string, error) {
		if e.cfg.SSM == nil {
			return "", fmt.Errorf("parameter %s: this local CloudFormation resolves no SSM parameters", name)
		}
		return e.cfg.SSM(ctx, name)
	}
	params, err := t.BindParameters(in.given, ssm)
	if err != nil {
		return plan{}, protocol.ValidationError("%s", err.Error())
	}
	sum := t.Summary()
	for _, c := range sum.Capabilities {
		if !slices.Contains(in.capabilities, c) && (c != "CAPABILITY_IAM" || !slices.Contains(in.capabilities, "CAPABILITY_NAMED_IAM")) {
			return plan{}, protocol.Errorf(http.StatusBadRequest, "InsufficientCapabilitiesException", "Requires capabilities : [%s]", c)
		}
	}
	run := &stackRun{name: name, id: id, tmpl: t, params: params}
	env := e.env(run)
	conds, err := t.EvalConditions(env)
	if err != nil {
		return plan{}, protocol.ValidationError("%s", err.Error())
	}
	return plan{tmpl: t, given: in.given, params: params, conds: conds, tags: in.tags}, nil
}

type stackIDResult struct {
	XMLName struct{} `xml:"CreateStackResult"`
	StackID string   `xml:"StackId"`
}

type updateStackResult struct {
	XMLName struct{} `xml:"UpdateStackResult"`
	StackID string   `xml:"StackId"`
}

func (c *CloudFormation) createStack(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readStackInput(r.Params, false)
	if aerr != nil {
		return nil, aerr
	}
	e := c.engine
	if e == nil {
		return nil, noEngine()
	}
	if _, ok := c.stacks.Get(in.name); ok {
		return nil, protocol.Errorf(http.StatusBadRequest, "AlreadyExistsException", "Stack [%s] already exists", in.name)
	}
	created := c.now().UTC()
	id := c.stacks.stackID(in.name, created)
	p, aerr := e.prepare(r.Context, in, in.body, in.name, id)
	if aerr != nil {
		return nil, aerr
	}
	run := &stackRun{id: id, name: in.name, capabilities: in.capabilities, onFailure: in.onFailure,
		timeout: time.Duration(in.timeoutMinutes) * time.Minute, made: map[string]*made{}, waiting: map[string]*waiter{}}
	e.mu.Lock()
	if e.runs[in.name] != nil {
		e.mu.Unlock()
		return nil, protocol.Errorf(http.StatusBadRequest, "AlreadyExistsException", "Stack [%s] already exists", in.name)
	}
	e.runs[in.name] = run
	e.mu.Unlock()
	c.stacks.Put(Stack{Name: in.name, ID: id, Status: "CREATE_IN_PROGRESS", Created: created})
	e.apply(run, p)
	e.start(run, func(ctx context.Context) { e.create(ctx, run) })
	return stackIDResult{StackID: id}, nil
}

func (c *CloudFormation) updateStack(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readStackInput(r.Params, true)
	if aerr != nil {
		return nil, aerr
	}
	e := c.engine
	if e == nil {
		return nil, noEngine()
	}
	run, p, aerr := e.prepareUpdate(r.Context, in)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := e.startUpdate(run, p, nil); aerr != nil {
		return nil, aerr
	}
	return updateStackResult{StackID: run.id}, nil
}

// prepareUpdate is what UpdateStack and CreateChangeSet share: the stack, and the plan
// the input makes of it (previous template and values filled in), refused when it
// changes nothing.
func (e *Engine) prepareUpdate(ctx context.Context, in *stackInput) (*stackRun, plan, *protocol.Error) {
	run, st, aerr := e.live(in.name)
	if aerr != nil {
		return nil, plan{}, aerr
	}
	if !updatable(st.Status) {
		return nil, plan{}, protocol.ValidationError("Stack:%s is in %s state and can not be updated.", st.ID, st.Status)
	}
	old := e.planOf(run)
	body := in.body
	if in.usePrevious {
		if body != "" {
			return nil, plan{}, protocol.ValidationError("You cannot specify both usePreviousTemplate and Template Body")
		}
		body = string(old.tmpl.Body)
	}
	for _, k := range in.previous {
		v, ok := old.given[k]
		if !ok {
			return nil, plan{}, protocol.ValidationError("Invalid input for parameter key %s. Cannot specify usePreviousValue as true for a parameter key not in the previous template", k)
		}
		in.given[k] = v
	}
	if !in.tagsGiven {
		in.tags = maps.Clone(old.tags)
	}
	in.capabilities = append(in.capabilities, run.capabilities...)
	p, aerr := e.prepare(ctx, in, body, run.name, run.id)
	if aerr != nil {
		return nil, plan{}, aerr
	}
	if string(p.tmpl.Body) == string(old.tmpl.Body) && maps.Equal(p.params, old.params) && maps.Equal(p.tags, old.tags) {
		return nil, plan{}, protocol.ValidationError("No updates are to be performed.")
	}
	return run, p, nil
}

func updatable(status string) bool {
	return slices.Contains([]string{"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE"}, status)
}

// startUpdate starts moving a stack to plan p, unless it is busy; done, when set, is
// called when the update ends.
func (e *Engine) startUpdate(run *stackRun, p plan, done func()) *protocol.Error {
	st, _ := e.cf.stacks.Get(run.name)
	e.mu.Lock()
	busy := run.cancel != nil || run.deleting
	e.mu.Unlock()
	if busy || !updatable(st.Status) {
		return protocol.ValidationError("Stack:%s is in %s state and can not be updated.", st.ID, st.Status)
	}
	e.cf.stacks.Update(run.name, func(st *Stack) { st.Updated = e.cf.now().UTC() })
	e.stackEvent(run, "UPDATE_IN_PROGRESS", "User Initiated")
	e.start(run, func(ctx context.Context) {
		e.update(ctx, run, p)
		if done != nil {
			done()
		}
	})
	return nil
}

// live finds a live stack by name or ID.
func (e *Engine) live(nameOrID string) (*stackRun, Stack, *protocol.Error) {
	st, ok := e.cf.stacks.Get(nameOrID)
	if !ok || !st.Deleted.IsZero() {
		return nil, Stack{}, stackNotFound(nameOrID)
	}
	e.mu.Lock()
	run := e.runs[st.Name]
	e.mu.Unlock()
	if run == nil {
		return nil, Stack{}, stackNotFound(nameOrID)
	}
	return run, st, nil
}

func (c *CloudFormation) deleteStack(r *protocol.Request) (any, *protocol.Error) {
	name, aerr := r.Params.Required("StackName")
	if aerr != nil {
		return nil, aerr
	}
	r.Params.StrList("RetainResources")
	r.Params.Ignore("RoleARN")
	r.Params.Ignore("ClientRequestToken")
	r.Params.Ignore("DeletionMode")
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	e := c.engine
	if e == nil {
		return nil, noEngine()
	}
	run, st, _ := e.live(name)
	if run == nil {
		return nil, nil // deleting a stack that does not exist succeeds, as in AWS
	}
	if st.Status == "DELETE_IN_PROGRESS" {
		return nil, nil
	}
	e.mu.Lock()
	for xname, x := range e.exports {
		if x.stackID == run.id {
			for _, other := range e.runs {
				if other != run && other.tmpl != nil && strings.Contains(string(other.tmpl.Body), xname) {
					e.mu.Unlock()
					return nil, protocol.ValidationError("Export %s cannot be deleted as it is in use by %s", xname, other.name)
				}
			}
		}
	}
	cancel, done := run.cancel, run.done
	run.deleting = true
	e.mu.Unlock()
	e.stackEvent(run, "DELETE_IN_PROGRESS", "User Initiated")
	// A stack still being created or updated stops where it is, then goes.
	if cancel != nil {
		cancel()
	}
	e.ops.Add(1)
	go func() {
		defer e.ops.Done()
		if done != nil {
			<-done
		}
		e.start(run, func(ctx context.Context) { e.destroy(ctx, run) })
	}()
	return nil, nil
}
