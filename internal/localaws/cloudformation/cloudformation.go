// Package cloudformation is the local AWS's CloudFormation: SignalResource, what
// cfn-signal sends at the end of a self-managed node group's user data, and the reads
// eksctl and the AWS CLI make of stacks (ListStacks, DescribeStacks,
// DescribeStackResources, DescribeStackEvents) over a stack store (Stacks). Of the
// local AWS it imports the wire layer (protocol) only.
package cloudformation

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

const xmlns = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// Signal is one SignalResource call: a stack's logical resource (such as NodeGroup)
// signalled SUCCESS or FAILURE by one instance (UniqueID, its instance ID).
type Signal struct {
	StackName         string    `json:"stackName"`
	LogicalResourceID string    `json:"logicalResourceId"`
	UniqueID          string    `json:"uniqueId"`
	Status            string    `json:"status"`
	Time              time.Time `json:"time"`
}

// CloudFormation records the signals instances send (cfn-signal's SignalResource over
// the Query protocol, Version 2010-05-15) and answers reads of its stack store, empty
// until a stack engine puts stacks in it; SignalResource accepts any stack name. A signal from the same instance for the same resource replaces its earlier
// one. Requests must carry a SigV4 Authorization header or cfn-signal's CFN_V1 one
// (signed with the instance identity document), neither checked further. Safe for
// concurrent use.
type CloudFormation struct {
	now     func() time.Time
	service *protocol.Service
	stacks  *Stacks

	mu      sync.Mutex
	signals []Signal
}

// New returns the endpoint with no signals.
func New() *CloudFormation {
	c := &CloudFormation{now: time.Now, stacks: NewStacks("us-west-2", "000000000000")}
	c.service = &protocol.Service{
		Dialect: protocol.Query, WriteError: protocol.QueryErrorWriter(xmlns), Wrap: protocol.QueryWrap(xmlns),
		Authorized: func(r *http.Request) bool {
			return protocol.Signed(r) || strings.HasPrefix(r.Header.Get("Authorization"), "CFN_V1 ")
		},
		Unsigned: &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."},
		Actions: map[string]protocol.Handler{
			"SignalResource":         c.signalResource,
			"ListStacks":             c.listStacks,
			"DescribeStacks":         c.describeStacks,
			"DescribeStackResources": c.describeStackResources,
			"DescribeStackEvents":    c.describeStackEvents,
		},
	}
	return c
}

// WithStacks serves the stacks of s (default an empty store of us-west-2 and account
// 000000000000) and returns c. Call it before serving.
func (c *CloudFormation) WithStacks(s *Stacks) *CloudFormation {
	c.stacks = s
	return c
}

// Stacks is the stack store the reads answer from.
func (c *CloudFormation) Stacks() *Stacks { return c.stacks }

// ServeHTTP answers the actions of CloudFormation's table.
func (c *CloudFormation) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.service.ServeHTTP(w, r) }

// Signals returns the signals received, oldest first.
func (c *CloudFormation) Signals() []Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Signal(nil), c.signals...)
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
	s.Time = c.now().UTC()
	c.mu.Lock()
	replaced := false
	for i, old := range c.signals {
		if old.StackName == s.StackName && old.LogicalResourceID == s.LogicalResourceID && old.UniqueID == s.UniqueID {
			c.signals[i], replaced = s, true
		}
	}
	if !replaced {
		c.signals = append(c.signals, s)
	}
	c.mu.Unlock()
	return nil, nil
}
