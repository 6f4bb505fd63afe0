package localcloud

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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

var instanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

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
	calls     int
	fail      injectedFailure
}

type injectedFailure struct {
	n, status  int
	code, text string
}

// NewEC2 returns an empty inventory of an account.
func NewEC2(accountID string) *EC2 {
	return &EC2{AccountID: accountID, now: time.Now, instances: map[string]*InstanceRecord{}}
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
	e.instances[inst.ID] = rec
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
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, ok := e.instances[id]
	if !ok {
		return fmt.Errorf("no instance %s", id)
	}
	rec.State = state
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
	for _, id := range slices.Sorted(maps.Keys(e.instances)) {
		out = append(out, *e.instances[id].clone())
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
	return &c
}

// shown is the instance as DescribeInstances reports it now: a terminated instance has
// no addresses, names or network interfaces any more.
func (r *InstanceRecord) shown() *InstanceRecord {
	c := r.clone()
	if c.State == "terminated" {
		c.PrivateIPv4, c.PrivateDNSName, c.MAC, c.SubnetID, c.VPCID = "", "", "", "", ""
		c.IPv6, c.SecondaryPrivateIPv4s, c.PublicIPv4, c.PublicDNSName = nil, nil, "", ""
	}
	return c
}

func (r *InstanceRecord) privateIPv4s() []string {
	if r.PrivateIPv4 == "" {
		return nil
	}
	return append([]string{r.PrivateIPv4}, r.SecondaryPrivateIPv4s...)
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
}

func (f ec2Filter) matches(r *InstanceRecord) bool {
	for _, have := range ec2Filters[f.name](r) {
		for _, want := range f.values {
			if globMatch(want, have) {
				return true
			}
		}
	}
	return false
}

// globMatch matches EC2 filter values: * is any run of characters, ? any one character,
// and a backslash escapes the character after it. It runs in O(len(pattern)·len(s)).
func globMatch(pattern, s string) bool {
	type tok struct {
		r    rune
		kind byte // 'c' a character, '?' any one, '*' any run
	}
	var toks []tok
	escaped := false
	for _, c := range pattern {
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
	str := []rune(s)
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

// apiError is an error answer of a Query API.
type apiError struct {
	status        int
	code, message string
}

func invalidParameter(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf(format, args...)}
}

type describeInstancesRequest struct {
	ids        []string
	filters    []ec2Filter
	maxResults int
	after      string // the last instance ID of the previous page
	dryRun     bool
}

// maxListIndex bounds the N of InstanceId.N, Filter.N and Value.N.
const maxListIndex = 1000

// listIndex parses the N of a Query list member, 1 to maxListIndex in canonical form.
func listIndex(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= maxListIndex && strconv.Itoa(n) == s
}

// valuesInOrder returns a map's values ordered by their list index.
func valuesInOrder[V any](m map[int]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// describeParams collects DescribeInstances parameters; lists are keyed by their index.
type describeParams struct {
	req     describeInstancesRequest
	ids     map[int]string
	filters map[int]*rawFilter
}

type rawFilter struct {
	name   *string
	values map[int]string
}

func parseDescribeInstances(form url.Values) (describeInstancesRequest, *apiError) {
	p := describeParams{ids: map[int]string{}, filters: map[int]*rawFilter{}}
	for _, key := range slices.Sorted(maps.Keys(form)) {
		if err := p.set(key, form.Get(key)); err != nil {
			return p.req, err
		}
	}
	return p.finish()
}

// set takes one parameter.
func (p *describeParams) set(key, value string) *apiError {
	switch key {
	case "Action", "Version":
		return nil
	case "DryRun", "IncludeManagedResources":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return invalidParameter("Value (%s) for parameter %s is invalid.", value, key)
		}
		if key == "DryRun" {
			p.req.dryRun = b
		}
		return nil
	case "MaxResults":
		n, err := strconv.Atoi(value)
		if err != nil || n < 5 || n > 1000 {
			return invalidParameter("Value ( %s ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", value)
		}
		p.req.maxResults = n
		return nil
	case "NextToken":
		raw, err := base64.RawURLEncoding.DecodeString(value)
		if err != nil || !instanceIDRE.Match(raw) {
			return invalidParameter("Invalid value '%s' for nextToken", value)
		}
		p.req.after = string(raw)
		return nil
	}
	if rest, ok := strings.CutPrefix(key, "InstanceId."); ok {
		if n, ok := listIndex(rest); ok {
			p.ids[n] = value
			return nil
		}
	}
	if rest, ok := strings.CutPrefix(key, "Filter."); ok && p.setFilter(rest, value) {
		return nil
	}
	return &apiError{http.StatusBadRequest, "UnknownParameter", fmt.Sprintf("The parameter %s is not recognized", key)}
}

// setFilter takes N.Name or N.Value.M of a Filter parameter, telling whether it was one.
func (p *describeParams) setFilter(member, value string) bool {
	idx, member, _ := strings.Cut(member, ".")
	n, ok := listIndex(idx)
	vidx, isValue := strings.CutPrefix(member, "Value.")
	m, vok := listIndex(vidx)
	if !ok || member != "Name" && (!isValue || !vok) {
		return false
	}
	f := p.filters[n]
	if f == nil {
		f = &rawFilter{values: map[int]string{}}
		p.filters[n] = f
	}
	if member == "Name" {
		f.name = &value
	} else {
		f.values[m] = value
	}
	return true
}

// finish checks the collected lists and puts them in order.
func (p *describeParams) finish() (describeInstancesRequest, *apiError) {
	req := p.req
	for _, id := range valuesInOrder(p.ids) {
		if !instanceIDRE.MatchString(id) {
			return req, &apiError{http.StatusBadRequest, "InvalidInstanceID.Malformed", fmt.Sprintf("Invalid id: %q", id)}
		}
		if !slices.Contains(req.ids, id) {
			req.ids = append(req.ids, id)
		}
	}
	for _, f := range valuesInOrder(p.filters) {
		switch {
		case f.name == nil:
			return req, invalidParameter("The filter 'null' is invalid")
		case ec2Filters[*f.name] == nil:
			return req, invalidParameter("The filter '%s' is invalid", *f.name)
		case len(f.values) == 0:
			return req, invalidParameter("The filter '%s' has no values", *f.name)
		}
		req.filters = append(req.filters, ec2Filter{name: *f.name, values: valuesInOrder(f.values)})
	}
	if req.maxResults != 0 && len(req.ids) > 0 {
		return req, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults"}
	}
	return req, nil
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
	for i, id := range candidates {
		if req.after != "" && id <= req.after {
			continue
		}
		r := e.instances[id].shown()
		if !slices.ContainsFunc(req.filters, func(f ec2Filter) bool { return !f.matches(r) }) {
			page = append(page, r)
		}
		if req.maxResults > 0 && len(page) == req.maxResults && i < len(candidates)-1 {
			return page, base64.RawURLEncoding.EncodeToString([]byte(id)), nil
		}
	}
	return page, "", nil
}

// sigV4Signed tells whether a request carries a SigV4 Authorization header.
func sigV4Signed(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// maxQueryBody bounds a Query protocol request body.
const maxQueryBody = 1 << 20

// queryForm reads a Query protocol request's parameters, from a POSTed form or the URL.
func queryForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxQueryBody)
	if err := r.ParseForm(); err != nil {
		return nil, false
	}
	return r.Form, true
}

func writeXML(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// ec2Error is one error of an EC2 error document.
type ec2Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

type ec2ErrorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []ec2Error `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

func writeEC2Error(w http.ResponseWriter, requestID string, e *apiError) {
	writeXML(w, e.status, ec2ErrorResponse{RequestID: requestID, Errors: []ec2Error{{e.code, e.message}}})
}

// queryRequest starts answering a Query-protocol request: it gives the response a
// request ID and returns the request's form, or answers with unsigned (no SigV4
// Authorization header) or a malformed-query error through writeErr and returns false.
func queryRequest(w http.ResponseWriter, r *http.Request, unsigned *apiError, writeErr func(http.ResponseWriter, string, *apiError)) (string, url.Values, bool) {
	reqID := newRequestID()
	w.Header().Set("X-Amzn-Requestid", reqID)
	if !sigV4Signed(r) {
		writeErr(w, reqID, unsigned)
		return reqID, nil, false
	}
	form, ok := queryForm(w, r)
	if !ok {
		writeErr(w, reqID, &apiError{http.StatusBadRequest, "MalformedQueryString", "The request is not a Query protocol request"})
		return reqID, nil, false
	}
	return reqID, form, true
}

// ServeHTTP implements DescribeInstances.
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
	if action := form.Get("Action"); action != "DescribeInstances" {
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

// itemSet is an EC2 list: a wrapper element holding one item element per member.
type itemSet[T any] struct {
	Items []T `xml:"item"`
}

type describeInstancesResponse struct {
	XMLName      xml.Name                   `xml:"DescribeInstancesResponse"`
	Xmlns        string                     `xml:"xmlns,attr"`
	RequestID    string                     `xml:"requestId"`
	Reservations itemSet[ec2ReservationXML] `xml:"reservationSet"`
	NextToken    string                     `xml:"nextToken,omitempty"`
}

type ec2ReservationXML struct {
	ReservationID string                  `xml:"reservationId"`
	OwnerID       string                  `xml:"ownerId"`
	Groups        itemSet[struct{}]       `xml:"groupSet"`
	Instances     itemSet[ec2InstanceXML] `xml:"instancesSet"`
}

type ec2InstanceXML struct {
	InstanceID string `xml:"instanceId"`
	ImageID    string `xml:"imageId"`
	State      struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	PrivateDNSName string `xml:"privateDnsName"`
	DNSName        string `xml:"dnsName"`
	Reason         string `xml:"reason"`
	AMILaunchIndex int    `xml:"amiLaunchIndex"`
	InstanceType   string `xml:"instanceType"`
	LaunchTime     string `xml:"launchTime"`
	Placement      struct {
		AvailabilityZone string `xml:"availabilityZone"`
		Tenancy          string `xml:"tenancy"`
	} `xml:"placement"`
	SubnetID           string `xml:"subnetId,omitempty"`
	VPCID              string `xml:"vpcId,omitempty"`
	PrivateIPAddress   string `xml:"privateIpAddress,omitempty"`
	IPAddress          string `xml:"ipAddress,omitempty"`
	Architecture       string `xml:"architecture"`
	RootDeviceType     string `xml:"rootDeviceType"`
	IAMInstanceProfile *struct {
		ARN string `xml:"arn"`
		ID  string `xml:"id"`
	} `xml:"iamInstanceProfile,omitempty"`
	NetworkInterfaces itemSet[ec2NetworkInterfaceXML] `xml:"networkInterfaceSet"`
	StateReason       *struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	} `xml:"stateReason,omitempty"`
}

type ec2AssociationXML struct {
	PublicIP      string `xml:"publicIp"`
	PublicDNSName string `xml:"publicDnsName"`
	IPOwnerID     string `xml:"ipOwnerId"`
}

type ec2NetworkInterfaceXML struct {
	NetworkInterfaceID string `xml:"networkInterfaceId"`
	SubnetID           string `xml:"subnetId"`
	VPCID              string `xml:"vpcId"`
	OwnerID            string `xml:"ownerId"`
	Status             string `xml:"status"`
	MACAddress         string `xml:"macAddress"`
	PrivateIPAddress   string `xml:"privateIpAddress"`
	PrivateDNSName     string `xml:"privateDnsName"`
	SourceDestCheck    bool   `xml:"sourceDestCheck"`
	Attachment         struct {
		AttachmentID        string `xml:"attachmentId"`
		DeviceIndex         int    `xml:"deviceIndex"`
		Status              string `xml:"status"`
		AttachTime          string `xml:"attachTime"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
		NetworkCardIndex    int    `xml:"networkCardIndex"`
	} `xml:"attachment"`
	Association   *ec2AssociationXML       `xml:"association,omitempty"`
	PrivateIPs    itemSet[ec2PrivateIPXML] `xml:"privateIpAddressesSet"`
	IPv6Addresses itemSet[ec2IPv6XML]      `xml:"ipv6AddressesSet"`
	InterfaceType string                   `xml:"interfaceType"`
}

type ec2PrivateIPXML struct {
	PrivateIPAddress string             `xml:"privateIpAddress"`
	PrivateDNSName   string             `xml:"privateDnsName"`
	Primary          bool               `xml:"primary"`
	Association      *ec2AssociationXML `xml:"association,omitempty"`
}

type ec2IPv6XML struct {
	IPv6Address   string `xml:"ipv6Address"`
	IsPrimaryIPv6 bool   `xml:"isPrimaryIpv6"`
}

const ec2TimeFormat = "2006-01-02T15:04:05.000Z"

func reservationXML(r *InstanceRecord) ec2ReservationXML {
	suffix := strings.TrimPrefix(r.ID, "i-")
	var x ec2InstanceXML
	x.InstanceID, x.ImageID, x.InstanceType = r.ID, r.ImageID, r.Type
	x.State.Code, x.State.Name = instanceStateCodes[r.State], r.State
	x.PrivateDNSName, x.DNSName = r.PrivateDNSName, r.PublicDNSName
	x.LaunchTime = r.LaunchTime.UTC().Format(ec2TimeFormat)
	x.Placement.AvailabilityZone, x.Placement.Tenancy = r.AvailabilityZone, "default"
	x.SubnetID, x.VPCID, x.PrivateIPAddress, x.IPAddress = r.SubnetID, r.VPCID, r.PrivateIPv4, r.PublicIPv4
	x.Architecture, x.RootDeviceType = "x86_64", "ebs"
	if r.Role != "" {
		x.IAMInstanceProfile = &struct {
			ARN string `xml:"arn"`
			ID  string `xml:"id"`
		}{instanceProfileARN(r.AccountID, r.Role), instanceProfileID(r.Role)}
	}
	if r.State == "terminated" || r.State == "stopped" {
		x.Reason = "User initiated"
		x.StateReason = &struct {
			Code    string `xml:"code"`
			Message string `xml:"message"`
		}{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
	}
	if r.PrivateIPv4 != "" {
		var nic ec2NetworkInterfaceXML
		nic.NetworkInterfaceID = "eni-" + suffix
		nic.SubnetID, nic.VPCID, nic.OwnerID, nic.Status = r.SubnetID, r.VPCID, r.AccountID, "in-use"
		nic.MACAddress, nic.PrivateIPAddress, nic.PrivateDNSName = r.MAC, r.PrivateIPv4, r.PrivateDNSName
		nic.SourceDestCheck, nic.InterfaceType = true, "interface"
		nic.Attachment.AttachmentID, nic.Attachment.Status = "eni-attach-"+suffix, "attached"
		nic.Attachment.AttachTime, nic.Attachment.DeleteOnTermination = x.LaunchTime, true
		var public *ec2AssociationXML
		if r.PublicIPv4 != "" {
			public = &ec2AssociationXML{PublicIP: r.PublicIPv4, PublicDNSName: r.PublicDNSName, IPOwnerID: "amazon"}
			nic.Association = public
		}
		for i, a := range r.privateIPv4s() {
			ip := ec2PrivateIPXML{PrivateIPAddress: a, Primary: i == 0}
			if addr, err := netip.ParseAddr(a); err == nil {
				ip.PrivateDNSName = PrivateDNSName(addr, r.Region)
			}
			if i == 0 {
				ip.PrivateDNSName, ip.Association = r.PrivateDNSName, public
			}
			nic.PrivateIPs.Items = append(nic.PrivateIPs.Items, ip)
		}
		for _, a := range r.IPv6 {
			nic.IPv6Addresses.Items = append(nic.IPv6Addresses.Items, ec2IPv6XML{IPv6Address: a})
		}
		x.NetworkInterfaces.Items = []ec2NetworkInterfaceXML{nic}
	}
	res := ec2ReservationXML{ReservationID: "r-" + suffix, OwnerID: r.AccountID}
	res.Instances.Items = []ec2InstanceXML{x}
	return res
}

// IAM answers IAM GetInstanceProfile (Query protocol) for the account's instance
// profiles: one named after each role of the EC2 inventory's instances (as instances'
// iamInstanceProfile ARNs name them), and those added with AddInstanceProfile. Requests
// must carry a SigV4 Authorization header, not checked further. Safe for concurrent use.
type IAM struct {
	AccountID string
	ec2       *EC2

	mu       sync.Mutex
	profiles map[string]string // profile name → role, "" for none
	calls    int
}

// NewIAM returns the IAM endpoint of an account; instances may be nil.
func NewIAM(accountID string, instances *EC2) *IAM {
	return &IAM{AccountID: accountID, ec2: instances, profiles: map[string]string{}}
}

var iamNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

// AddInstanceProfile registers an instance profile holding a role ("" for none).
func (i *IAM) AddInstanceProfile(name, role string) error {
	if !iamNameRE.MatchString(name) || role != "" && !iamNameRE.MatchString(role) {
		return fmt.Errorf("instance profile %q or role %q is not a valid IAM name", name, role)
	}
	i.mu.Lock()
	i.profiles[name] = role
	i.mu.Unlock()
	return nil
}

// Calls counts the authenticated requests received.
func (i *IAM) Calls() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls
}

func (i *IAM) profile(name string) (role string, ok bool) {
	i.mu.Lock()
	role, ok = i.profiles[name]
	i.mu.Unlock()
	if ok {
		return role, true
	}
	if i.ec2 != nil && i.ec2.hasRole(name) {
		return name, true
	}
	return "", false
}

type iamErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

const iamXMLNS = "https://iam.amazonaws.com/doc/2010-05-08/"

func writeIAMError(w http.ResponseWriter, requestID string, e *apiError) {
	out := iamErrorResponse{Xmlns: iamXMLNS, RequestID: requestID}
	out.Error.Type, out.Error.Code, out.Error.Message = "Sender", e.code, e.message
	writeXML(w, e.status, out)
}

type iamRoleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	ARN                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type getInstanceProfileResponse struct {
	XMLName xml.Name `xml:"GetInstanceProfileResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		InstanceProfile struct {
			InstanceProfileID string `xml:"InstanceProfileId"`
			Roles             struct {
				Members []iamRoleXML `xml:"member"`
			} `xml:"Roles"`
			InstanceProfileName string `xml:"InstanceProfileName"`
			Path                string `xml:"Path"`
			ARN                 string `xml:"Arn"`
			CreateDate          string `xml:"CreateDate"`
		} `xml:"InstanceProfile"`
	} `xml:"GetInstanceProfileResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// ec2AssumeRolePolicy is the trust policy of an instance role, URL-encoded as IAM returns it.
var ec2AssumeRolePolicy = url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)

// iamCreateDate is when the local account's IAM entities were created.
var iamCreateDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)

// ServeHTTP implements GetInstanceProfile.
func (i *IAM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}, writeIAMError)
	if !ok {
		return
	}
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	if action := form.Get("Action"); action != "GetInstanceProfile" {
		writeIAMError(w, reqID, &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s", action, form.Get("Version"))})
		return
	}
	name := form.Get("InstanceProfileName")
	if !iamNameRE.MatchString(name) {
		writeIAMError(w, reqID, &apiError{http.StatusBadRequest, "ValidationError",
			fmt.Sprintf("1 validation error detected: Value '%s' at 'instanceProfileName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name)})
		return
	}
	role, found := i.profile(name)
	if !found {
		writeIAMError(w, reqID, &apiError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("Instance Profile %s cannot be found.", name)})
		return
	}
	out := getInstanceProfileResponse{Xmlns: iamXMLNS, RequestID: reqID}
	p := &out.Result.InstanceProfile
	p.InstanceProfileID, p.InstanceProfileName, p.Path = instanceProfileID(name), name, "/"
	p.ARN, p.CreateDate = instanceProfileARN(i.AccountID, name), iamCreateDate
	if role != "" {
		p.Roles.Members = []iamRoleXML{{
			Path: "/", RoleName: role, RoleID: RoleID(role), ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", i.AccountID, role),
			CreateDate: iamCreateDate, AssumeRolePolicyDocument: ec2AssumeRolePolicy,
		}}
	}
	writeXML(w, http.StatusOK, out)
}
