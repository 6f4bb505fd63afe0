// Package ec2 is the local AWS's EC2: the instance inventory, its attributes and
// console output, the VPC with its zones, subnets, security groups (the default one and
// those created) and their rules, elastic network interfaces and their addresses, DHCP
// options, instance types, images (the account's and the catalog of EKS-optimized AMI
// releases), tags and launch templates, served on EC2's Query protocol. Of the local
// AWS it imports the wire layer (protocol) and iam (instance profile names).
package ec2

import (
	"encoding/xml"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// xmlns is the namespace of EC2's answers.
const xmlns = "http://ec2.amazonaws.com/doc/2016-11-15/"

// timeFormat is how EC2 writes times.
const timeFormat = "2006-01-02T15:04:05.000Z"

// EC2 is the local account's instance inventory and its EC2 endpoint: ServeHTTP answers
// the actions of its table (actions) over the EC2 Query protocol, as aws-sdk-go-v2's ec2
// client sends them. Requests must carry a SigV4 Authorization header; the signature
// itself is not checked. Terminated instances stay visible, as on AWS for about an
// hour, until Remove; like AWS, they no longer show addresses, names or network
// interfaces. Safe for concurrent use.
type EC2 struct {
	AccountID string
	// Region is the region whose zones DescribeAvailabilityZones lists; New sets
	// us-west-2. Set it before serving.
	Region string
	now    func() time.Time

	mu        sync.Mutex
	instances map[string]*InstanceRecord
	enis      map[string]*NetworkInterface
	subnets   map[string]*subnetState
	tokens    map[string]tokenUse // CreateNetworkInterface's client tokens
	// dhcpDomains are the custom DHCP options domain-names, by VPC.
	dhcpDomains map[string]string
	// groups are the security groups by ID (the VPC's default one first made) and
	// rules their rules by ID (securitygroups.go).
	groups  map[string]*securityGroup
	rules   map[string]*sgRule
	ruleSeq int
	// console gives an instance's console output (console.go); nil for none.
	console func(instanceID string) ([]byte, bool)
	calls   int
	fail    injectedFailure

	// hookMu orders the changes that reach the hooks; taken before mu, never while
	// holding it.
	hookMu  sync.Mutex
	hooks   NetworkHooks
	hookLog *slog.Logger

	// templates, when set, serves the launch template actions on this endpoint.
	templates *LaunchTemplates
	// releases are the public EKS-optimized images DescribeImages lists beside the
	// account's own.
	releases *ReleaseCatalog
	once     sync.Once
	service  *protocol.Service
}

type injectedFailure struct {
	n, status  int
	code, text string
}

// New returns an empty inventory of an account.
func New(accountID string) *EC2 {
	e := &EC2{AccountID: accountID, Region: "us-west-2", now: time.Now, instances: map[string]*InstanceRecord{},
		enis: map[string]*NetworkInterface{}, subnets: map[string]*subnetState{}, tokens: map[string]tokenUse{},
		dhcpDomains: map[string]string{}, hookLog: slog.New(slog.DiscardHandler), releases: NewReleaseCatalog(),
		groups: map[string]*securityGroup{}, rules: map[string]*sgRule{}}
	e.addDefaultGroup()
	return e
}

// WithReleases makes DescribeImages list c's images (default NewReleaseCatalog()) and
// returns e. Call it before serving; SSM's public parameters should name the same
// catalog (Releases).
func (e *EC2) WithReleases(c *ReleaseCatalog) *EC2 {
	e.releases = c
	return e
}

// Releases is the catalog of EKS-optimized images DescribeImages lists.
func (e *EC2) Releases() *ReleaseCatalog { return e.releases }

// Calls counts the authenticated requests received.
func (e *EC2) Calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// FailNext makes the next n authenticated requests fail with an EC2 error, such as
// 503 RequestLimitExceeded or 500 InternalError, to exercise clients' error paths.
func (e *EC2) FailNext(n, status int, code string) {
	e.mu.Lock()
	e.fail = injectedFailure{n: n, status: status, code: code, text: "injected failure"}
	e.mu.Unlock()
}

// WithLaunchTemplates serves the launch template actions of lt on e's endpoint too, as
// EC2 does, and returns e. Call it before serving.
func (e *EC2) WithLaunchTemplates(lt *LaunchTemplates) *EC2 {
	e.templates = lt
	return e
}

// actions is EC2's table: each action's handler.
func (e *EC2) actions() map[string]protocol.Handler {
	t := map[string]protocol.Handler{
		"DescribeInstances":               e.describeInstances,
		"DescribeInstanceAttribute":       e.describeInstanceAttribute,
		"DescribeNetworkInterfaces":       e.describeNetworkInterfaces,
		"CreateNetworkInterface":          e.createNetworkInterfaceAction,
		"DeleteNetworkInterface":          e.deleteNetworkInterfaceAction,
		"AttachNetworkInterface":          e.attachNetworkInterfaceAction,
		"DetachNetworkInterface":          e.detachNetworkInterfaceAction,
		"AssignPrivateIpAddresses":        e.assignPrivateIPsAction,
		"UnassignPrivateIpAddresses":      e.unassignPrivateIPsAction,
		"ModifyNetworkInterfaceAttribute": e.modifyNetworkInterfaceAttributeAction,
		"CreateTags":                      e.createTagsAction,
		"DescribeSubnets":                 e.describeSubnets,
		"DescribeInstanceTypes":           e.describeInstanceTypes,
		"DescribeInstanceTypeOfferings":   e.describeInstanceTypeOfferings,
		"DescribeDhcpOptions":             e.describeDhcpOptions,
		"DescribeAvailabilityZones":       e.describeAvailabilityZones,
		"DescribeVpcs":                    e.describeVpcs,
		"DescribeSecurityGroups":          e.describeSecurityGroups,
		"DescribeSecurityGroupRules":      e.describeSecurityGroupRules,
		"CreateSecurityGroup":             e.createSecurityGroupAction,
		"DeleteSecurityGroup":             e.deleteSecurityGroupAction,
		"AuthorizeSecurityGroupIngress":   e.ruleAction(false, true),
		"AuthorizeSecurityGroupEgress":    e.ruleAction(true, true),
		"RevokeSecurityGroupIngress":      e.ruleAction(false, false),
		"RevokeSecurityGroupEgress":       e.ruleAction(true, false),
		"DeleteTags":                      e.deleteTagsAction,
		"GetConsoleOutput":                e.getConsoleOutput,
		"DescribeImages":                  e.describeImages,
		"DescribeTags":                    e.describeTags,
	}
	if e.templates != nil {
		maps.Copy(t, e.templates.actions())
	}
	return t
}

// ServeHTTP answers the actions of EC2's table.
func (e *EC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.once.Do(func() {
		e.service = &protocol.Service{
			Dialect: protocol.EC2, Actions: e.actions(), WriteError: protocol.WriteEC2Error, Admit: e.admit, Unsigned: errAuthFailure,
		}
	})
	e.service.ServeHTTP(w, r)
}

// admit counts a request, to EC2 or to its launch templates, and fails it when FailNext
// asked.
func (e *EC2) admit(r *protocol.Request) *protocol.Error {
	if e.templates != nil && e.templates.actions()[r.Action] != nil {
		e.templates.count()
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.fail.n == 0 {
		return nil
	}
	e.fail.n--
	return &protocol.Error{Status: e.fail.status, Code: e.fail.code, Message: e.fail.text}
}

// errAuthFailure answers a request without a SigV4 signature.
var errAuthFailure = &protocol.Error{Status: http.StatusUnauthorized, Code: "AuthFailure", Message: "AWS was not able to validate the provided access credentials"}

var errDryRun = &protocol.Error{Status: http.StatusPreconditionFailed, Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}

// dryRun reads DryRun: set, the request is refused with DryRunOperation once checked.
func dryRun(p *protocol.Params) (bool, *protocol.Error) {
	b, aerr := p.Bool("DryRun")
	return b != nil && *b, aerr
}

// returnResponse is the answer of actions whose output has no fields.
type returnResponse struct {
	XMLName   xml.Name
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

func returned(r *protocol.Request) returnResponse {
	return returnResponse{XMLName: xml.Name{Local: r.Action + "Response"}, Xmlns: xmlns, RequestID: r.ID, Return: true}
}

// describeInput is what every Describe* action reads first.
type describeInput struct {
	protocol.PageRequest
	dry     bool
	ids     []string
	filters []protocol.Filter
}

// readDescribe reads a Describe* action's parameters: DryRun, the IDs under idParam
// (idParam.N), Filter.N (known tells its names), the page (MaxResults from lo to hi,
// NextToken; hi 0 for an action that does not page) and the boolean flags it accepts
// but does not act on; any other parameter is refused.
func readDescribe(p *protocol.Params, idParam string, known func(string) bool, lo, hi int64, flags ...string) (describeInput, *protocol.Error) {
	var in describeInput
	var aerr *protocol.Error
	if in.dry, aerr = dryRun(p); aerr != nil {
		return in, aerr
	}
	var ids []string
	if idParam != "" {
		ids = p.StrList(idParam)
	}
	for _, id := range ids {
		if !slices.Contains(in.ids, id) {
			in.ids = append(in.ids, id)
		}
	}
	if in.filters, aerr = p.Filters(known); aerr != nil {
		return in, aerr
	}
	if hi > 0 {
		if in.PageRequest, aerr = p.ReadPage("MaxResults", lo, hi, 0); aerr != nil {
			return in, aerr
		}
	}
	for _, f := range flags {
		if _, aerr := p.Bool(f); aerr != nil {
			return in, aerr
		}
	}
	return in, p.Finish()
}

// describeSet is what a Describe* action lists: every resource's ID in order, each
// resource's tags and filter values, and the error for an ID that names none.
type describeSet[R any] struct {
	keys     []string
	get      func(id string) (R, bool)
	tags     func(R) map[string]string
	values   func(r R, filter string) []string
	notFound func(ids []string) *protocol.Error
	// requestOrder lists the resources requested by ID in the request's order, not in
	// ID order.
	requestOrder bool
}

// setOf is the describeSet of the resources of a map, in key order, whose filter
// values are values'; an ID that names none is refused with code and a message whose
// one verb is the first missing ID ("" code: every ID names one, as the map is all).
func setOf[R any](m map[string]R, values func(r R, filter string) []string, code, format string) describeSet[R] {
	return describeSet[R]{
		keys:   slices.Sorted(maps.Keys(m)),
		get:    func(id string) (R, bool) { r, ok := m[id]; return r, ok },
		values: values,
		notFound: func(ids []string) *protocol.Error {
			return protocol.Errorf(http.StatusBadRequest, code, format, ids[0])
		},
	}
}

// withTags sets how the resources' tags are read, for tag:KEY and tag-key filters.
func (s describeSet[R]) withTags(tags func(R) map[string]string) describeSet[R] {
	s.tags = tags
	return s
}

// page answers a Describe* request: the resources in.ids names (every one when none),
// those that match every filter, one page of them and the next page's token.
func (s describeSet[R]) page(in describeInput) ([]R, string, *protocol.Error) {
	keys := s.keys
	if len(in.ids) > 0 {
		var missing []string
		for _, id := range in.ids {
			if _, ok := s.get(id); !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return nil, "", s.notFound(missing)
		}
		keys = in.ids
		if !s.requestOrder {
			keys = slices.Sorted(slices.Values(in.ids))
		}
	}
	var matching []R
	for _, id := range keys {
		r, _ := s.get(id)
		var tags map[string]string
		if s.tags != nil {
			tags = s.tags(r)
		}
		if protocol.MatchesAll(in.filters, tags, func(name string) []string { return s.values(r, name) }) {
			matching = append(matching, r)
		}
	}
	page, next, _ := protocol.Page(matching, in.Token, in.Max)
	return page, next, nil
}

// describeOutput is a Describe* answer: a set of items under the set's element, and the
// next page's token.
type describeOutput[T any] struct {
	action, set     string
	requestID, next string
	items           []T
}

func newDescribeOutput[T any](r *protocol.Request, set string, items []T, next string) describeOutput[T] {
	return describeOutput[T]{action: r.Action, set: set, requestID: r.ID, next: next, items: items}
}

// MarshalXML writes <ActionResponse> with requestId, the set and nextToken.
func (o describeOutput[T]) MarshalXML(enc *xml.Encoder, _ xml.StartElement) error {
	start := xml.StartElement{Name: xml.Name{Local: o.action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: xmlns}}}
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	if err := enc.EncodeElement(o.requestID, xml.StartElement{Name: xml.Name{Local: "requestId"}}); err != nil {
		return err
	}
	if err := enc.EncodeElement(protocol.ItemSet[T]{Items: o.items}, xml.StartElement{Name: xml.Name{Local: o.set}}); err != nil {
		return err
	}
	if o.next != "" {
		if err := enc.EncodeElement(o.next, xml.StartElement{Name: xml.Name{Local: "nextToken"}}); err != nil {
			return err
		}
	}
	return enc.EncodeToken(start.End())
}

// one is a filter's values of a single-valued field: none when empty.
func one(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
