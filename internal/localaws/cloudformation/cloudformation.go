// Package cloudformation is the local AWS's CloudFormation: a stack engine that
// creates, updates and deletes stacks from templates (CreateStack, UpdateStack,
// DeleteStack; the template language is package template, the resource types package
// resource), the signals instances send (SignalResource, what cfn-signal calls) and
// the resources that wait for them, and the reads eksctl and the AWS CLI make of
// stacks over a stack store (Stacks). Of the local AWS it imports the wire layer
// (protocol) only: resources are made through the SDK.
package cloudformation

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

const xmlns = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// CloudFormation serves CloudFormation's Query protocol (Version 2010-05-15): the
// stack engine's writes (WithEngine; without one, writes are refused and the store is
// read only), the signals, and reads of its stack store. Requests must carry a SigV4
// Authorization header or cfn-signal's CFN_V1 one (signed with the instance identity
// document); the edge verifies SigV4. Safe for concurrent use.
type CloudFormation struct {
	now     func() time.Time
	service *protocol.Service
	stacks  *Stacks
	engine  *Engine
	box     *signalBox
	log     *slog.Logger
}

// New returns the endpoint with no stacks and no engine.
func New() *CloudFormation {
	c := &CloudFormation{now: time.Now, stacks: NewStacks("us-west-2", "000000000000"), box: newSignalBox(), log: slog.New(slog.DiscardHandler)}
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
			"DescribeStackResource":  c.describeStackResource,
			"ListStackResources":     c.listStackResources,
			"CreateStack":            c.createStack,
			"UpdateStack":            c.updateStack,
			"DeleteStack":            c.deleteStack,
			"ValidateTemplate":       c.validateTemplate,
			"GetTemplate":            c.getTemplate,
			"ListExports":            c.listExports,
			"CreateChangeSet":        c.createChangeSet,
			"DescribeChangeSet":      c.describeChangeSet,
			"ExecuteChangeSet":       c.executeChangeSet,
			"DeleteChangeSet":        c.deleteChangeSet,
			"ListChangeSets":         c.listChangeSets,
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
