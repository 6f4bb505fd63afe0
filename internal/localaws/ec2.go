package localaws

// This file holds EC2's instance model: the inventory of launched instances, their
// states and what DescribeInstances filters on, and the EC2 endpoint's handler.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// InstanceRecord is what EC2 knows of a launched instance: its metadata and what only
// the EC2 API reports.
type InstanceRecord struct {
	Instance
	// State is one of pending, running, stopping, stopped, shutting-down, terminated.
	State      string
	LaunchTime time.Time
	// SecondaryPrivateIPv4s are further private addresses of the primary network interface.
	SecondaryPrivateIPv4s []string
	// PublicIPv4 and PublicDNSName are empty for an instance without a public address.
	PublicIPv4    string
	PublicDNSName string

	// nics are the attached interfaces, in a record shown to callers.
	nics []NetworkInterface
	// Tags are the instance's tags (WithTags).
	Tags map[string]string
}

// LaunchOption sets what Instance does not describe on a launched instance.
type LaunchOption func(*InstanceRecord)

// WithPublicIPv4 gives the instance a public IPv4 address and EC2's public DNS name for it.
func WithPublicIPv4(addr string) LaunchOption {
	return func(r *InstanceRecord) { r.PublicIPv4 = addr }
}

// WithSecondaryPrivateIPv4s adds private addresses to the primary network interface.
func WithSecondaryPrivateIPv4s(addrs ...string) LaunchOption {
	return func(r *InstanceRecord) { r.SecondaryPrivateIPv4s = append(r.SecondaryPrivateIPv4s, addrs...) }
}

// instanceStateCodes are EC2's codes of the instance states (the low byte of code).
var instanceStateCodes = map[string]int{
	"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80,
}

var (
	instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	eniIDRE      = regexp.MustCompile(`^eni-([0-9a-f]{8}|[0-9a-f]{17})$`)
)

// EC2 is the local account's instance inventory and its EC2 endpoint: ServeHTTP answers
// DescribeInstances over the EC2 Query protocol, as aws-sdk-go-v2's ec2 client sends it.
// Requests must carry a SigV4 Authorization header; the signature itself is not checked
// (as with EKS). Terminated instances stay visible, as on AWS for about an hour, until
// Remove; like AWS, they no longer show addresses, names or network interfaces. Safe for
// concurrent use.
type EC2 struct {
	AccountID string
	now       func() time.Time

	mu        sync.Mutex
	instances map[string]*InstanceRecord
	enis      map[string]*NetworkInterface
	subnets   map[string]*subnetState
	tokens    map[string]tokenUse // CreateNetworkInterface's client tokens
	// dhcpDomains are the custom DHCP options domain-names, by VPC (dhcp.go).
	dhcpDomains map[string]string
	calls       int
	fail        injectedFailure

	// hookMu orders the changes that reach the hooks; taken before mu, never while
	// holding it.
	hookMu  sync.Mutex
	hooks   NetworkHooks
	hookLog *slog.Logger
}

type injectedFailure struct {
	n, status  int
	code, text string
}

// NewEC2 returns an empty inventory of an account.
func NewEC2(accountID string) *EC2 {
	return &EC2{AccountID: accountID, now: time.Now, instances: map[string]*InstanceRecord{},
		enis: map[string]*NetworkInterface{}, subnets: map[string]*subnetState{}, tokens: map[string]tokenUse{},
		dhcpDomains: map[string]string{}, hookLog: slog.New(slog.DiscardHandler)}
}

// Launch adds a running instance. Its ID must be an EC2 instance ID not yet launched;
// InstanceDefaults fills what else it leaves out.
func (e *EC2) Launch(inst Instance, opts ...LaunchOption) error {
	if inst.ID == "" {
		return errors.New("launching an instance without an ID")
	}
	if !instanceIDRE.MatchString(inst.ID) {
		return fmt.Errorf("instance ID %q is not i- and 8 or 17 hex digits", inst.ID)
	}
	if inst.AccountID == "" {
		inst.AccountID = e.AccountID
	}
	if inst.Type == "" {
		inst.Type = "m5.large"
	}
	if err := InstanceDefaults(&inst); err != nil {
		return err
	}
	rec := &InstanceRecord{Instance: inst, State: "running", LaunchTime: e.now().UTC().Truncate(time.Second)}
	for _, o := range opts {
		o(rec)
	}
	rec = rec.clone()
	for _, a := range rec.SecondaryPrivateIPv4s {
		if addr, err := netip.ParseAddr(a); err != nil || !addr.Is4() {
			return fmt.Errorf("instance %s: secondary private IPv4 %q is not an IPv4 address", inst.ID, a)
		}
	}
	for _, a := range rec.IPv6 {
		if addr, err := netip.ParseAddr(a); err != nil || !addr.Is6() || addr.Is4In6() {
			return fmt.Errorf("instance %s: %q is not an IPv6 address", inst.ID, a)
		}
	}
	if rec.PublicIPv4 != "" {
		addr, err := netip.ParseAddr(rec.PublicIPv4)
		if err != nil || !addr.Is4() {
			return fmt.Errorf("instance %s: public IPv4 %q is not an IPv4 address", inst.ID, rec.PublicIPv4)
		}
		rec.PublicDNSName = PublicDNSName(addr, rec.Region)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.instances[inst.ID]; dup {
		return fmt.Errorf("instance %s is already launched", inst.ID)
	}
	used := e.usedAddrs()
	for _, a := range rec.privateIPv4s() {
		if holder, taken := used[netip.MustParseAddr(a)]; taken {
			return fmt.Errorf("instance %s: private IPv4 %s is in use by %s", inst.ID, a, holder)
		}
	}
	e.instances[inst.ID] = rec
	e.launchPrimaryInterface(rec)
	return nil
}

// PublicDNSName is EC2's public DNS name for an address: ec2-A-B-C-D.compute-1.amazonaws.com
// in us-east-1, ec2-A-B-C-D.REGION.compute.amazonaws.com elsewhere.
func PublicDNSName(addr netip.Addr, region string) string {
	host := "ec2-" + strings.ReplaceAll(addr.String(), ".", "-")
	if region == "us-east-1" {
		return host + ".compute-1.amazonaws.com"
	}
	return host + "." + region + ".compute.amazonaws.com"
}

// SetState moves an instance to an EC2 instance state.
func (e *EC2) SetState(id, state string) error {
	if _, ok := instanceStateCodes[state]; !ok {
		return fmt.Errorf("unknown instance state %q", state)
	}
	e.hookMu.Lock()
	defer e.hookMu.Unlock()
	e.mu.Lock()
	rec, ok := e.instances[id]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("no instance %s", id)
	}
	was := rec.State
	rec.State = state
	e.mu.Unlock()
	if state == "terminated" && was != "terminated" {
		e.terminateInterfaces(context.Background(), id)
	}
	return nil
}

// Remove forgets an instance, as EC2 does some time after it terminated.
func (e *EC2) Remove(id string) {
	e.mu.Lock()
	delete(e.instances, id)
	e.mu.Unlock()
}

// Instances returns every instance, ordered by ID.
func (e *EC2) Instances() []InstanceRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]InstanceRecord, 0, len(e.instances))
	attached := e.interfacesByInstance()
	for _, id := range slices.Sorted(maps.Keys(e.instances)) {
		out = append(out, *viewWith(e.instances[id], attached[id]))
	}
	return out
}

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

// hasRole tells whether any instance has the role.
func (e *EC2) hasRole(role string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rec := range e.instances {
		if rec.Role == role {
			return true
		}
	}
	return false
}

func (r *InstanceRecord) clone() *InstanceRecord {
	c := *r
	c.VPCIPv4CIDRs = slices.Clone(r.VPCIPv4CIDRs)
	c.IPv6 = slices.Clone(r.IPv6)
	c.UserData = slices.Clone(r.UserData)
	c.SecondaryPrivateIPv4s = slices.Clone(r.SecondaryPrivateIPv4s)
	c.nics = slices.Clone(r.nics)
	c.Tags = maps.Clone(r.Tags)
	return &c
}

// viewWith is an instance as callers see it: with its attached interfaces (by device
// index), the primary interface's further addresses as SecondaryPrivateIPv4s. Callers
// that show many instances find every instance's interfaces in one pass
// (interfacesByInstance) instead of one pass over every interface per instance.
func viewWith(r *InstanceRecord, attached []*NetworkInterface) *InstanceRecord {
	c := r.clone()
	c.nics = nil
	for _, n := range attached {
		c.nics = append(c.nics, n.clone())
		if n.Attachment.DeviceIndex == 0 {
			c.SecondaryPrivateIPv4s = slices.Clone(n.PrivateIPv4s[1:])
		}
	}
	return c
}

// shown is the instance as DescribeInstances reports it now: a terminated instance has
// no addresses, names or network interfaces any more.
func (r *InstanceRecord) shown() *InstanceRecord {
	c := r.clone()
	if c.State == "terminated" {
		c.PrivateIPv4, c.PrivateDNSName, c.MAC, c.SubnetID, c.VPCID = "", "", "", "", ""
		c.IPv6, c.SecondaryPrivateIPv4s, c.PublicIPv4, c.PublicDNSName = nil, nil, "", ""
		c.nics = nil
	}
	return c
}

func (r *InstanceRecord) privateIPv4s() []string {
	if r.PrivateIPv4 == "" {
		return nil
	}
	if r.nics == nil {
		return append([]string{r.PrivateIPv4}, r.SecondaryPrivateIPv4s...)
	}
	var out []string
	for _, n := range r.nics {
		out = append(out, n.PrivateIPv4s...)
	}
	return out
}

func instanceProfileARN(account, role string) string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", account, role)
}

// instanceProfileID is the unique ID of the instance profile named after a role.
func instanceProfileID(name string) string {
	sum := sha256.Sum256([]byte("instance-profile/" + name))
	return "AIPA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
}

func one(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// ec2Filters are the DescribeInstances filters understood: each returns the values an
// instance has for the filter's name.
var ec2Filters = map[string]func(r *InstanceRecord) []string{
	"instance-id":         func(r *InstanceRecord) []string { return one(r.ID) },
	"instance-state-name": func(r *InstanceRecord) []string { return one(r.State) },
	"instance-state-code": func(r *InstanceRecord) []string { return one(strconv.Itoa(instanceStateCodes[r.State])) },
	"instance-type":       func(r *InstanceRecord) []string { return one(r.Type) },
	"image-id":            func(r *InstanceRecord) []string { return one(r.ImageID) },
	"availability-zone":   func(r *InstanceRecord) []string { return one(r.AvailabilityZone) },
	"owner-id":            func(r *InstanceRecord) []string { return one(r.AccountID) },
	"vpc-id":              func(r *InstanceRecord) []string { return one(r.VPCID) },
	"subnet-id":           func(r *InstanceRecord) []string { return one(r.SubnetID) },
	"private-dns-name":    func(r *InstanceRecord) []string { return one(r.PrivateDNSName) },
	"private-ip-address":  func(r *InstanceRecord) []string { return one(r.PrivateIPv4) },
	"dns-name":            func(r *InstanceRecord) []string { return one(r.PublicDNSName) },
	"ip-address":          func(r *InstanceRecord) []string { return one(r.PublicIPv4) },
	"network-interface.addresses.private-ip-address": func(r *InstanceRecord) []string { return r.privateIPv4s() },
	"network-interface.ipv6-addresses.ipv6-address":  func(r *InstanceRecord) []string { return r.IPv6 },
	"iam-instance-profile.arn": func(r *InstanceRecord) []string {
		if r.Role == "" {
			return nil
		}
		return one(instanceProfileARN(r.AccountID, r.Role))
	},
}

type ec2Filter struct {
	name   string
	values []string
	// exact holds the values without a wildcard or an escape, each of which matches
	// only itself; globs holds the others. newEC2Filter sets both: a request may name
	// hundreds of values (nodejoin's batched instance lookups do) and every instance is
	// checked against each, so the literal ones are one map lookup instead of one glob
	// match each.
	exact map[string]struct{}
	globs []string
}

// newEC2Filter is a filter with its values sorted into literals and patterns.
func newEC2Filter(name string, values []string) ec2Filter {
	f := ec2Filter{name: name, values: values, exact: make(map[string]struct{}, len(values))}
	for _, v := range values {
		if strings.ContainsAny(v, `*?\`) {
			f.globs = append(f.globs, v)
		} else {
			f.exact[v] = struct{}{}
		}
	}
	return f
}

// accepts reports whether a value matches one of the filter's values (a filter made
// by newEC2Filter).
func (f ec2Filter) accepts(have string) bool {
	if _, ok := f.exact[have]; ok {
		return true
	}
	return slices.ContainsFunc(f.globs, func(want string) bool { return globMatch(want, have) })
}

func (f ec2Filter) matches(r *InstanceRecord) bool {
	return slices.ContainsFunc(ec2Filters[f.name](r), f.accepts)
}

// globMatch matches EC2 filter values: * is any run of characters, ? any one character,
// and a backslash escapes the character after it. It runs in O(len(pattern)·len(s)).
// runesOf decodes a string into runes, with each byte that is not part of valid UTF-8
// as a value of its own above the Unicode range. []rune(s) would turn every such byte
// into U+FFFD, and a pattern would then match bytes it does not contain.
func runesOf(s string) []rune {
	out := make([]rune, 0, len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			r = unicode.MaxRune + 1 + rune(s[0])
		}
		out = append(out, r)
		s = s[size:]
	}
	return out
}

func globMatch(pattern, s string) bool {
	type tok struct {
		r    rune
		kind byte // 'c' a character, '?' any one, '*' any run
	}
	var toks []tok
	escaped := false
	for _, c := range runesOf(pattern) {
		switch {
		case escaped:
			toks, escaped = append(toks, tok{c, 'c'}), false
		case c == '\\':
			escaped = true
		case c == '*' || c == '?':
			toks = append(toks, tok{0, byte(c)})
		default:
			toks = append(toks, tok{c, 'c'})
		}
	}
	if escaped {
		toks = append(toks, tok{'\\', 'c'})
	}
	str := runesOf(s)
	p, i, star, mark := 0, 0, -1, 0
	for i < len(str) {
		switch {
		case p < len(toks) && (toks[p].kind == '?' || toks[p].kind == 'c' && toks[p].r == str[i]):
			p++
			i++
		case p < len(toks) && toks[p].kind == '*':
			star, mark = p, i
			p++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(toks) && toks[p].kind == '*' {
		p++
	}
	return p == len(toks)
}

// describeInstances selects one page of instances, as they are shown now.
func (e *EC2) describeInstances(req describeInstancesRequest) ([]*InstanceRecord, string, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	candidates := req.ids
	if len(candidates) > 0 {
		var missing []string
		for _, id := range candidates {
			if _, ok := e.instances[id]; !ok {
				missing = append(missing, id)
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			return nil, "", &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", missing[0])}
		default:
			return nil, "", &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(missing, ", "))}
		}
	} else {
		candidates = slices.Sorted(maps.Keys(e.instances))
	}
	var page []*InstanceRecord
	attached := e.interfacesByInstance()
	for i, id := range candidates {
		if req.after != "" && id <= req.after {
			continue
		}
		r := viewWith(e.instances[id], attached[id]).shown()
		if !slices.ContainsFunc(req.filters, func(f ec2Filter) bool { return !f.matches(r) }) {
			page = append(page, r)
		}
		if req.maxResults > 0 && len(page) == req.maxResults && i < len(candidates)-1 {
			return page, base64.RawURLEncoding.EncodeToString([]byte(id)), nil
		}
	}
	return page, "", nil
}

// ServeHTTP implements DescribeInstances and the network operations (eni_query.go).
func (e *EC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials"}, writeEC2Error)
	if !ok {
		return
	}
	e.mu.Lock()
	e.calls++
	fail := e.fail
	if e.fail.n > 0 {
		e.fail.n--
	}
	e.mu.Unlock()
	if fail.n > 0 {
		writeEC2Error(w, reqID, &apiError{fail.status, fail.code, fail.text})
		return
	}
	action := form.Get("Action")
	if op := e.ops()[action]; op != nil {
		out, aerr := op(r.Context(), newParams(form), reqID)
		if aerr != nil {
			writeEC2Error(w, reqID, aerr)
			return
		}
		writeXML(w, http.StatusOK, out)
		return
	}
	if action != "DescribeInstances" {
		writeEC2Error(w, reqID, &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)})
		return
	}
	req, aerr := parseDescribeInstances(form)
	if aerr == nil && req.dryRun {
		aerr = &apiError{http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."}
	}
	if aerr != nil {
		writeEC2Error(w, reqID, aerr)
		return
	}
	page, next, aerr := e.describeInstances(req)
	if aerr != nil {
		writeEC2Error(w, reqID, aerr)
		return
	}
	out := describeInstancesResponse{Xmlns: "http://ec2.amazonaws.com/doc/2016-11-15/", RequestID: reqID, NextToken: next}
	for _, rec := range page {
		out.Reservations.Items = append(out.Reservations.Items, reservationXML(rec))
	}
	writeXML(w, http.StatusOK, out)
}
