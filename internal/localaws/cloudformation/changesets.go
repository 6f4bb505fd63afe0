package cloudformation

// This file holds change sets of existing stacks: CreateChangeSet works out what an
// update would add, modify and remove (as UpdateStack reads its input, refusing the same
// mistakes), DescribeChangeSet and ListChangeSets show it, ExecuteChangeSet runs it as
// UpdateStack would, and DeleteChangeSet drops it. eksctl updates node group stacks this
// way (`eksctl upgrade nodegroup`).

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// changeSet is a proposed update of a stack.
type changeSet struct {
	id, name, description string
	run                   *stackRun
	plan                  plan
	created               time.Time
	status, reason        string // CREATE_COMPLETE or FAILED
	execution             string // AVAILABLE, UNAVAILABLE, EXECUTE_IN_PROGRESS, EXECUTE_COMPLETE, EXECUTE_FAILED
	changes               []resourceChange
	// executed is set once the change set runs: as in AWS, it then leaves the stack's list
	// (and its name may be used again, as eksctl does twice within a second on upgrade),
	// but its ARN still describes it.
	executed bool
}

type resourceChange struct {
	Action      string `xml:"Action"`
	LogicalID   string `xml:"LogicalResourceId"`
	PhysicalID  string `xml:"PhysicalResourceId,omitempty"`
	Type        string `xml:"ResourceType"`
	Replacement string `xml:"Replacement,omitempty"`
}

// noChanges is why a change set that changes nothing fails, in CloudFormation's words.
const noChanges = "The submitted information didn't contain changes. Submit different information to create a change set."

// changesOf works out what moving run to p adds, modifies and removes. A resource
// whose template entry or evaluated properties differ is modified; replacement is
// "Conditional", as the provisioner decides it when the update runs.
func (e *Engine) changesOf(run *stackRun, p plan) []resourceChange {
	e.mu.Lock()
	made, current := maps.Clone(run.made), run.tmpl
	e.mu.Unlock()
	var out []resourceChange
	env := e.env(&stackRun{name: run.name, id: run.id, params: p.params, conds: p.conds, made: made})
	for _, logical := range p.tmpl.Order() {
		tr := p.tmpl.Resources[logical]
		if tr.Condition != "" && !p.conds[tr.Condition] {
			continue
		}
		m := made[logical]
		if m == nil {
			out = append(out, resourceChange{Action: "Add", LogicalID: logical, Type: tr.Type})
			continue
		}
		props, _, _, err := p.tmpl.EvalResource(logical, env)
		if err != nil || !reflect.DeepEqual(props, m.props) || !reflect.DeepEqual(current.Resources[logical], tr) {
			out = append(out, resourceChange{Action: "Modify", LogicalID: logical, PhysicalID: m.res.PhysicalID, Type: tr.Type, Replacement: "Conditional"})
		}
	}
	for logical, m := range made {
		if tr := p.tmpl.Resources[logical]; tr == nil || (tr.Condition != "" && !p.conds[tr.Condition]) {
			out = append(out, resourceChange{Action: "Remove", LogicalID: logical, PhysicalID: m.res.PhysicalID, Type: m.typ})
		}
	}
	slices.SortStableFunc(out, func(a, b resourceChange) int { return strings.Compare(a.LogicalID, b.LogicalID) })
	return out
}

func (c *CloudFormation) createChangeSet(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	name, aerr := p.Required("ChangeSetName")
	if aerr != nil {
		return nil, aerr
	}
	typ, _ := p.Str("ChangeSetType")
	desc, _ := p.Str("Description")
	for _, ignored := range []string{"ClientToken", "IncludeNestedStacks", "OnStackFailure", "ImportExistingResources"} {
		p.Ignore(ignored)
	}
	in, aerr := readStackInput(p, true)
	if aerr != nil {
		return nil, aerr
	}
	if typ != "" && typ != "UPDATE" {
		return nil, protocol.ValidationError("ChangeSetType %s: the local CloudFormation makes change sets of existing stacks only (UPDATE); create a stack with CreateStack", typ)
	}
	e := c.engine
	if e == nil {
		return nil, noEngine()
	}
	cs := &changeSet{name: name, description: desc, created: c.now().UTC(), status: "CREATE_COMPLETE", execution: "AVAILABLE"}
	run, pl, aerr := e.prepareUpdate(r.Context, in)
	switch {
	case aerr != nil && aerr.Message == "No updates are to be performed.":
		// As AWS: the change set exists, FAILED, saying there is nothing to change.
		if run, _, aerr = e.live(in.name); aerr != nil {
			return nil, aerr
		}
		cs.status, cs.reason, cs.execution = "FAILED", noChanges, "UNAVAILABLE"
	case aerr != nil:
		return nil, aerr
	default:
		cs.plan, cs.changes = pl, e.changesOf(run, pl)
	}
	cs.run = run
	cs.id = fmt.Sprintf("arn:aws:cloudformation:%s:%s:changeSet/%s/%s", e.cfg.Region, e.cfg.AccountID, name, newEventID())
	e.mu.Lock()
	defer e.mu.Unlock()
	if slices.ContainsFunc(e.changeSets, func(o *changeSet) bool { return o.run == run && o.name == name && !o.executed }) {
		return nil, protocol.Errorf(400, "AlreadyExistsException", "ChangeSet %s already exists", name)
	}
	e.changeSets = append(e.changeSets, cs)
	return struct {
		XMLName struct{} `xml:"CreateChangeSetResult"`
		ID      string   `xml:"Id"`
		StackID string   `xml:"StackId"`
	}{ID: cs.id, StackID: run.id}, nil
}

// findChangeSet finds a change set by ARN, or by name and stack.
func (c *CloudFormation) findChangeSet(p *protocol.Params) (*changeSet, *protocol.Error) {
	name, aerr := p.Required("ChangeSetName")
	if aerr != nil {
		return nil, aerr
	}
	stack, _ := p.Str("StackName")
	if c.engine == nil {
		return nil, noEngine()
	}
	e := c.engine
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cs := range e.changeSets {
		if cs.id == name || (!cs.executed && cs.name == name && (cs.run.name == stack || cs.run.id == stack)) {
			return cs, nil
		}
	}
	return nil, protocol.Errorf(404, "ChangeSetNotFound", "ChangeSet [%s] does not exist", name)
}

type changeSetXML struct {
	XMLName         struct{}         `xml:"DescribeChangeSetResult"`
	ChangeSetName   string           `xml:"ChangeSetName"`
	ChangeSetID     string           `xml:"ChangeSetId"`
	StackID         string           `xml:"StackId"`
	StackName       string           `xml:"StackName"`
	Description     string           `xml:"Description,omitempty"`
	Parameters      []parameterXML   `xml:"Parameters>member"`
	CreationTime    string           `xml:"CreationTime"`
	ExecutionStatus string           `xml:"ExecutionStatus"`
	Status          string           `xml:"Status"`
	StatusReason    string           `xml:"StatusReason,omitempty"`
	Changes         []changeEntryXML `xml:"Changes>member"`
}

type changeEntryXML struct {
	Type           string         `xml:"Type"`
	ResourceChange resourceChange `xml:"ResourceChange"`
}

func (c *CloudFormation) describeChangeSet(r *protocol.Request) (any, *protocol.Error) {
	r.Params.Ignore("NextToken")
	r.Params.Ignore("IncludePropertyValues")
	cs, aerr := c.findChangeSet(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	c.engine.mu.Lock()
	defer c.engine.mu.Unlock()
	out := changeSetXML{ChangeSetName: cs.name, ChangeSetID: cs.id, StackID: cs.run.id, StackName: cs.run.name, Description: cs.description,
		CreationTime: formatTime(cs.created), ExecutionStatus: cs.execution, Status: cs.status, StatusReason: cs.reason}
	if cs.plan.tmpl != nil {
		shown := shownParameters(cs.plan.tmpl, cs.plan.params)
		for _, k := range sortedKeys(shown) {
			out.Parameters = append(out.Parameters, parameterXML{k, shown[k]})
		}
	}
	for _, ch := range cs.changes {
		out.Changes = append(out.Changes, changeEntryXML{Type: "Resource", ResourceChange: ch})
	}
	return out, nil
}

func (c *CloudFormation) executeChangeSet(r *protocol.Request) (any, *protocol.Error) {
	r.Params.Ignore("ClientRequestToken")
	r.Params.Ignore("DisableRollback")
	r.Params.Ignore("RetainExceptOnCreate")
	cs, aerr := c.findChangeSet(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	e := c.engine
	e.mu.Lock()
	execution := cs.execution
	e.mu.Unlock()
	if execution != "AVAILABLE" {
		return nil, protocol.Errorf(400, "InvalidChangeSetStatus", "ChangeSet [%s] cannot be executed in its current execution status of [%s]", cs.id, execution)
	}
	finish := func() {
		st, _ := c.stacks.Get(cs.run.name)
		e.mu.Lock()
		cs.execution = "EXECUTE_COMPLETE"
		if st.Status != "UPDATE_COMPLETE" {
			cs.execution = "EXECUTE_FAILED"
		}
		e.mu.Unlock()
	}
	if aerr := e.startUpdate(cs.run, cs.plan, finish); aerr != nil {
		return nil, aerr
	}
	// Executing one change set removes the stack's change sets from its list, as in AWS:
	// the others no longer apply to the updated stack, and this one is kept for its ARN only.
	e.mu.Lock()
	cs.execution, cs.executed = "EXECUTE_IN_PROGRESS", true
	e.changeSets = slices.DeleteFunc(e.changeSets, func(o *changeSet) bool { return o != cs && o.run == cs.run })
	e.mu.Unlock()
	return struct {
		XMLName struct{} `xml:"ExecuteChangeSetResult"`
	}{}, nil
}

func (c *CloudFormation) deleteChangeSet(r *protocol.Request) (any, *protocol.Error) {
	cs, aerr := c.findChangeSet(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	e := c.engine
	e.mu.Lock()
	defer e.mu.Unlock()
	if cs.execution == "EXECUTE_IN_PROGRESS" {
		return nil, protocol.Errorf(400, "InvalidChangeSetStatus", "ChangeSet [%s] cannot be deleted while it is being executed", cs.id)
	}
	e.changeSets = slices.DeleteFunc(e.changeSets, func(o *changeSet) bool { return o == cs })
	return struct {
		XMLName struct{} `xml:"DeleteChangeSetResult"`
	}{}, nil
}

type changeSetSummaryXML struct {
	StackID         string `xml:"StackId"`
	StackName       string `xml:"StackName"`
	ChangeSetID     string `xml:"ChangeSetId"`
	ChangeSetName   string `xml:"ChangeSetName"`
	ExecutionStatus string `xml:"ExecutionStatus"`
	Status          string `xml:"Status"`
	StatusReason    string `xml:"StatusReason,omitempty"`
	CreationTime    string `xml:"CreationTime"`
	Description     string `xml:"Description,omitempty"`
}

func (c *CloudFormation) listChangeSets(r *protocol.Request) (any, *protocol.Error) {
	stack, aerr := r.Params.Required("StackName")
	if aerr != nil {
		return nil, aerr
	}
	token, aerr := readToken(r.Params)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := r.Params.Finish(); aerr != nil {
		return nil, aerr
	}
	var out []changeSetSummaryXML
	if e := c.engine; e != nil {
		e.mu.Lock()
		for _, cs := range e.changeSets {
			if !cs.executed && (cs.run.name == stack || cs.run.id == stack) {
				out = append(out, changeSetSummaryXML{StackID: cs.run.id, StackName: cs.run.name, ChangeSetID: cs.id, ChangeSetName: cs.name,
					ExecutionStatus: cs.execution, Status: cs.status, StatusReason: cs.reason, CreationTime: formatTime(cs.created), Description: cs.description})
			}
		}
		e.mu.Unlock()
	}
	page, next, _ := protocol.Page(out, token, pageSize)
	return struct {
		XMLName   struct{}              `xml:"ListChangeSetsResult"`
		Summaries []changeSetSummaryXML `xml:"Summaries>member"`
		NextToken string                `xml:"NextToken,omitempty"`
	}{Summaries: page, NextToken: next}, nil
}
