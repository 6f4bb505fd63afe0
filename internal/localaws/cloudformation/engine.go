package cloudformation

// This file holds the stack engine: it runs what CreateStack, UpdateStack and
// DeleteStack ask for in the background, resource by resource in dependency order,
// through the provisioners of the resource package (which call the account's own
// services through the SDK), and writes every change of status into the stack store
// as an event, in CloudFormation's wording, so that DescribeStackEvents tells the
// story as AWS would.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
)

// EngineConfig configures the stack engine.
type EngineConfig struct {
	// Clients make the stacks' resources: the account's own services.
	Clients resource.Clients
	// Provisioners, when set, replace resource.Provisioners(Clients) (tests).
	Provisioners map[string]resource.Provisioner
	// SSM resolves the SSM parameters that parameters of type
	// AWS::SSM::Parameter::Value<…> name; nil refuses such parameters.
	SSM func(ctx context.Context, name string) (string, error)
	// Zones are what Fn::GetAZs answers.
	Zones []string
	// Region and AccountID are the pseudo parameters AWS::Region and AWS::AccountId.
	Region, AccountID string
	Log               *slog.Logger
}

// Engine runs stacks' operations. Safe for concurrent use.
type Engine struct {
	cfg    EngineConfig
	cf     *CloudFormation
	types  map[string]resource.Provisioner
	ctx    context.Context
	ops    sync.WaitGroup
	consol func(ctx context.Context, instanceID string) string
	// groupInstances lists an Auto Scaling group's instances (tests replace it).
	groupInstances func(ctx context.Context, group string) []string

	mu         sync.Mutex
	runs       map[string]*stackRun // by stack name, live stacks only
	exports    map[string]export    // by export name
	changeSets []*changeSet
}

type export struct{ value, stackID string }

// stackRun is what the engine keeps of a live stack beyond what the store shows.
type stackRun struct {
	id, name     string
	tmpl         *template.Template
	given        map[string]string // the parameters as given
	params       map[string]string // bound: defaults applied, SSM resolved
	tags         map[string]string
	capabilities []string
	onFailure    string // ROLLBACK, DELETE or DO_NOTHING
	timeout      time.Duration
	conds        map[string]bool
	made         map[string]*made
	waiting      map[string]*waiter
	deleting     bool               // DeleteStack was called: a cancelled operation leaves the rest to it
	cancel       context.CancelFunc // the running operation's; nil when idle
	done         chan struct{}      // closed when the running operation ends
}

// made is a resource the stack holds: its type, what it is, and the properties it
// was made or last updated with.
type made struct {
	typ   string
	res   resource.Result
	props map[string]any
}

// WithEngine gives c a stack engine whose operations run until ctx ends, and returns c.
// Call it before serving.
func (c *CloudFormation) WithEngine(ctx context.Context, cfg EngineConfig) *CloudFormation {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, cf: c, types: cfg.Provisioners, ctx: ctx, runs: map[string]*stackRun{}, exports: map[string]export{}}
	if e.types == nil {
		e.types = resource.Provisioners(cfg.Clients)
	}
	e.consol, e.groupInstances = e.consoleReason, e.describeGroupInstances
	c.engine, c.log = e, cfg.Log
	return c
}

// Wait returns once every running stack operation has ended (after the engine's
// context ends).
func (e *Engine) Wait() { e.ops.Wait() }

// deleting tells whether DeleteStack took the stack over.
func (e *Engine) deleting(run *stackRun) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return run.deleting
}

func (e *Engine) supported(typ string) bool { _, ok := e.types[typ]; return ok }

// env is the evaluation environment of a stack's template: its parameters, pseudo
// parameters, conditions and the resources made so far.
func (e *Engine) env(run *stackRun) *template.Env {
	return &template.Env{
		Parameters: run.params, AccountID: e.cfg.AccountID, Region: e.cfg.Region, StackName: run.name, StackID: run.id,
		Partition: "aws", URLSuffix: "amazonaws.com", Zones: e.cfg.Zones, Conditions: run.conds,
		Resource: func(logical string) (string, map[string]string, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			m, ok := run.made[logical]
			if !ok {
				return "", nil, false
			}
			return m.res.PhysicalID, m.res.Attributes, true
		},
		Import: func(name string) (string, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			x, ok := e.exports[name]
			return x.value, ok
		},
	}
}

// newEventID draws an event ID, as CloudFormation's UUIDs look.
func newEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// stackEvent records a change of the stack's own status.
func (e *Engine) stackEvent(run *stackRun, status, reason string) {
	now := e.cf.now().UTC()
	e.cf.stacks.Update(run.name, func(st *Stack) {
		st.Status, st.StatusReason = status, reason
		st.Events = append(st.Events, Event{ID: newEventID(), LogicalID: run.name, PhysicalID: run.id, Type: "AWS::CloudFormation::Stack",
			Status: status, StatusReason: reason, Time: now})
	})
	e.cfg.Log.Info("stack", "stack", run.name, "status", status, "reason", reason)
}

// resourceEvent records a change of a resource's status, and the resource as the
// store shows it (a DELETE_COMPLETE resource leaves the list).
func (e *Engine) resourceEvent(run *stackRun, logical, typ, physical, status, reason string) {
	now := e.cf.now().UTC()
	e.cf.stacks.Update(run.name, func(st *Stack) {
		st.Events = append(st.Events, Event{ID: logical + "-" + status + "-" + now.Format(timeFormat), LogicalID: logical,
			PhysicalID: physical, Type: typ, Status: status, StatusReason: reason, Time: now})
		i := slices.IndexFunc(st.Resources, func(r Resource) bool { return r.LogicalID == logical })
		if i >= 0 && physical != "" && st.Resources[i].PhysicalID != "" && st.Resources[i].PhysicalID != physical {
			return // an event of a replaced resource, deleted after its replacement took its place
		}
		if status == "DELETE_COMPLETE" {
			if i >= 0 {
				st.Resources = slices.Delete(st.Resources, i, i+1)
			}
			return
		}
		r := Resource{LogicalID: logical, PhysicalID: physical, Type: typ, Status: status, StatusReason: reason, Updated: now}
		if i < 0 {
			st.Resources = append(st.Resources, r)
			return
		}
		if r.PhysicalID == "" {
			r.PhysicalID = st.Resources[i].PhysicalID
		}
		st.Resources[i] = r
	})
	if strings.HasSuffix(status, "_FAILED") {
		e.cfg.Log.Warn("stack resource failed", "stack", run.name, "resource", logical, "type", typ, "status", status, "reason", reason)
	}
}

// handlerMessage turns a provisioner's error into the reason an event shows: an AWS
// API error's own message, as CloudFormation quotes it.
func handlerMessage(err error) string {
	var se *reasonError
	if errors.As(err, &se) {
		return se.msg
	}
	// The provisioners word their own failures as CloudFormation does.
	if msg := err.Error(); strings.HasPrefix(msg, "Resource handler returned message:") || strings.HasPrefix(msg, "Properties validation failed") {
		return msg
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("Resource handler returned message: %q (Service: %s, Status Code: 400, HandlerErrorCode: %s)", ae.ErrorMessage(), serviceOf(err), ae.ErrorCode())
	}
	return fmt.Sprintf("Resource handler returned message: %q", err.Error())
}

func serviceOf(err error) string {
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		return oe.ServiceID
	}
	return "unknown"
}

// resolved is a resource's properties and policies, evaluated.
type resolved struct {
	props, creation, update map[string]any
}

// resolve evaluates a resource's properties and policies against what the stack has
// made so far.
func (e *Engine) resolve(run *stackRun, logical string) (resolved, error) {
	props, cp, up, err := run.tmpl.EvalResource(logical, e.env(run))
	if err != nil {
		return resolved{}, err
	}
	if props == nil {
		props = map[string]any{}
	}
	return resolved{props, cp, up}, nil
}

// call is the provisioner call for one resource of run.
func (e *Engine) call(run *stackRun, logical, typ string, r resolved) *resource.Call {
	tags := maps.Clone(run.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags["aws:cloudformation:stack-name"], tags["aws:cloudformation:stack-id"], tags["aws:cloudformation:logical-id"] = run.name, run.id, logical
	c := &resource.Call{StackName: run.name, StackID: run.id, LogicalID: logical, Region: e.cfg.Region, AccountID: e.cfg.AccountID,
		Type: typ, Properties: r.props, CreationPolicy: r.creation, UpdatePolicy: r.update, Tags: tags}
	c.Event = func(st, reason string) { e.resourceEvent(run, logical, typ, "", st, reason) }
	c.Signals = &boxSignals{box: e.cf.box, stackID: run.id, logical: logical, reason: e.consol,
		members: func(ctx context.Context) []string { return e.members(ctx, run, logical) }}
	return c
}

// isAutoScalingGroup tells whether a resource's signals come from a group's instances.
func isAutoScalingGroup(typ string) bool { return typ == "AWS::AutoScaling::AutoScalingGroup" }

// members lists the instances of a stack's Auto Scaling group resource.
func (e *Engine) members(ctx context.Context, run *stackRun, logical string) []string {
	e.mu.Lock()
	m := run.made[logical]
	e.mu.Unlock()
	if m == nil || !isAutoScalingGroup(m.typ) {
		return nil
	}
	return e.groupInstances(ctx, m.res.PhysicalID)
}

func (e *Engine) describeGroupInstances(ctx context.Context, group string) []string {
	if e.cfg.Clients.AutoScaling == nil {
		return nil
	}
	out, err := e.cfg.Clients.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil || len(out.AutoScalingGroups) == 0 {
		return nil
	}
	var ids []string
	for _, in := range out.AutoScalingGroups[0].Instances {
		ids = append(ids, aws.ToString(in.InstanceId))
	}
	return ids
}

// failureLine is how nodeadm writes, on the instance's console, why its join failed
// before it signals FAILURE.
const failureLine = "cfn-signal: FAILURE: "

// consoleReason is the last failure line of an instance's console, through EC2
// GetConsoleOutput: the node's own reason for a FAILURE or a missing signal.
func (e *Engine) consoleReason(ctx context.Context, instanceID string) string {
	if e.cfg.Clients.EC2 == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := e.cfg.Clients.EC2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(instanceID), Latest: aws.Bool(true)})
	if err != nil || out.Output == nil {
		return ""
	}
	text, err := decodeConsole(*out.Output)
	if err != nil {
		return ""
	}
	reason := ""
	for line := range strings.SplitSeq(text, "\n") {
		if i := strings.Index(line, failureLine); i >= 0 {
			reason = strings.TrimSpace(line[i+len(failureLine):])
		}
	}
	if len(reason) > 500 {
		reason = reason[:500]
	}
	return reason
}

// duration reads an ISO 8601 duration as CloudFormation's policies write them (PT5M,
// PT1H30M, PT45S).
func duration(s string) (time.Duration, error) {
	rest, ok := strings.CutPrefix(strings.ToUpper(s), "PT")
	if !ok || rest == "" {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT15M", s)
	}
	var d time.Duration
	for rest != "" {
		i := strings.IndexAny(rest, "HMS")
		if i <= 0 {
			return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT15M", s)
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT15M", s)
		}
		d += time.Duration(n) * map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}[rest[i]]
		rest = rest[i+1:]
	}
	return d, nil
}

// resourceSignal reads a CreationPolicy's ResourceSignal: how many signals, within
// how long (CloudFormation's defaults: 1 within PT5M).
func resourceSignal(cp map[string]any) (count int, timeout time.Duration, ok bool, err error) {
	rs, ok := cp["ResourceSignal"].(map[string]any)
	if !ok {
		return 0, 0, false, nil
	}
	count, timeout = 1, 5*time.Minute
	if v, ok := rs["Count"].(string); ok {
		if count, err = strconv.Atoi(v); err != nil || count < 0 {
			return 0, 0, true, fmt.Errorf("CreationPolicy.ResourceSignal.Count: %q is not a count", v)
		}
	}
	if v, ok := rs["Timeout"].(string); ok {
		if timeout, err = duration(v); err != nil {
			return 0, 0, true, fmt.Errorf("CreationPolicy.ResourceSignal.Timeout: %w", err)
		}
	}
	return count, timeout, true, nil
}
