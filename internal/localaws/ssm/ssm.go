// Package ssm is the local AWS's Systems Manager Parameter Store, as far as node groups
// use it: GetParameter and GetParameters of the public parameters that name the
// EKS-optimized AMIs (the ones eksctl and users read), served from EC2's release catalog
// on SSM's JSON 1.1 protocol. Of the local AWS it imports the wire layer (protocol) and
// ec2 (the catalog).
package ssm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// targetPrefix is what X-Amz-Target carries before the operation's name.
const targetPrefix = "AmazonSSM."

// maxBody bounds a request body.
const maxBody = 1 << 20

// SSM answers the public EKS AMI parameters of a release catalog. Requests must carry a
// SigV4 Authorization header; the signature itself is not checked. Safe for
// concurrent use.
type SSM struct {
	region   string
	releases *ec2.ReleaseCatalog

	mu    sync.Mutex
	calls int
}

// New serves the parameters of the releases in a region, so that the images SSM names
// are the ones EC2's DescribeImages lists: pass the EC2 endpoint's Releases().
func New(region string, releases *ec2.ReleaseCatalog) *SSM {
	if releases == nil {
		releases = ec2.NewReleaseCatalog()
	}
	return &SSM{region: region, releases: releases}
}

// Calls counts the authenticated requests received.
func (s *SSM) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// operations is SSM's table: each operation's handler over the request's fields.
var operations = map[string]func(s *SSM, in fields) (any, *protocol.Error){
	"GetParameter":  (*SSM).getParameter,
	"GetParameters": (*SSM).getParameters,
}

// ServeHTTP answers the operations of SSM's table.
func (s *SSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Amzn-Requestid", protocol.NewRequestID())
	if !protocol.Signed(r) {
		protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationTokenException", Message: "Missing Authentication Token"})
		return
	}
	target := r.Header.Get("X-Amz-Target")
	name, ok := strings.CutPrefix(target, targetPrefix)
	op := operations[name]
	if r.Method != http.MethodPost || !ok || op == nil {
		protocol.WriteJSONError(w, protocol.Errorf(http.StatusBadRequest, "UnknownOperationException",
			"The operation %q (X-Amz-Target) is not one the local SSM answers: %s", target, strings.Join(slices.Sorted(maps.Keys(operations)), ", ")))
		return
	}
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	in, aerr := readFields(http.MaxBytesReader(w, r.Body, maxBody))
	if aerr != nil {
		protocol.WriteJSONError(w, aerr)
		return
	}
	out, aerr := op(s, in)
	if aerr != nil {
		protocol.WriteJSONError(w, aerr)
		return
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(out); err != nil {
		protocol.WriteJSONError(w, protocol.Errorf(http.StatusInternalServerError, "InternalServerError", "encoding the answer failed"))
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write(buf.Bytes())
}

// fields are a request's members by name.
type fields map[string]json.RawMessage

// readFields reads a JSON object request body; an empty body is no members.
func readFields(body io.Reader) (fields, *protocol.Error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, protocol.Errorf(http.StatusRequestEntityTooLarge, "SerializationException", "The request body could not be read or exceeds %d bytes", maxBody)
	}
	in := fields{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return in, nil
	}
	if json.Unmarshal(raw, &in) != nil {
		return nil, protocol.Errorf(http.StatusBadRequest, "SerializationException", "The request body is not a JSON object")
	}
	return in, nil
}

// read decodes the members an operation takes into out's fields and refuses others.
func (in fields) read(known map[string]any) *protocol.Error {
	for name, raw := range in {
		dst, ok := known[name]
		if !ok {
			return validation("Member '%s' is not a parameter of this operation", name)
		}
		if json.Unmarshal(raw, dst) != nil {
			return protocol.Errorf(http.StatusBadRequest, "SerializationException", "The value of '%s' has the wrong type", name)
		}
	}
	return nil
}

func validation(format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, "ValidationException", format, args...)
}

// parameterJSON is a parameter as GetParameter answers it.
type parameterJSON struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"` // epoch seconds, as the JSON protocol writes times
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
}

func (s *SSM) answer(name string, p parameter) parameterJSON {
	return parameterJSON{
		// Public parameters live in no account: their ARNs have none.
		ARN:      fmt.Sprintf("arn:aws:ssm:%s::parameter%s", s.region, name),
		DataType: "text", LastModifiedDate: float64(p.modified.Unix()), Name: name, Type: "String", Value: p.value, Version: p.version,
	}
}

func (s *SSM) getParameter(in fields) (any, *protocol.Error) {
	var name string
	var decrypt bool
	if aerr := in.read(map[string]any{"Name": &name, "WithDecryption": &decrypt}); aerr != nil {
		return nil, aerr
	}
	if name == "" {
		return nil, validation("1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	p, ok := s.lookup(s.canonical(name))
	if !ok {
		return nil, protocol.Errorf(http.StatusBadRequest, "ParameterNotFound", "Parameter %s not found.", name)
	}
	return map[string]any{"Parameter": s.answer(s.canonical(name), p)}, nil
}

func (s *SSM) getParameters(in fields) (any, *protocol.Error) {
	var names []string
	var decrypt bool
	if aerr := in.read(map[string]any{"Names": &names, "WithDecryption": &decrypt}); aerr != nil {
		return nil, aerr
	}
	if len(names) < 1 || len(names) > 10 {
		return nil, validation("1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	params, invalid := []parameterJSON{}, []string{}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if p, ok := s.lookup(s.canonical(n)); ok {
			params = append(params, s.answer(s.canonical(n), p))
		} else {
			invalid = append(invalid, n)
		}
	}
	return map[string]any{"Parameters": params, "InvalidParameters": invalid}, nil
}
