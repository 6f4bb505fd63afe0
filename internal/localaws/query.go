package localaws

// This file holds the AWS Query protocol as EC2 and IAM speak it: form parsing and
// limits, DescribeInstances' parameters, request IDs, and error answers.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

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
		req.filters = append(req.filters, newEC2Filter(*f.name, valuesInOrder(f.values)))
	}
	if req.maxResults != 0 && len(req.ids) > 0 {
		return req, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults"}
	}
	return req, nil
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
