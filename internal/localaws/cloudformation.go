package localaws

// This file holds the CloudFormation endpoint, as far as instances use it: SignalResource,
// what cfn-signal sends at the end of a self-managed node group's user data.

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

const cfnXMLNS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

var writeCFNError = writeQueryError(cfnXMLNS)

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
// the Query protocol, Version 2010-05-15). It holds no stacks: any stack name is
// accepted. A signal from the same instance for the same resource replaces its earlier
// one. Requests must carry a SigV4 Authorization header or cfn-signal's CFN_V1 one
// (signed with the instance identity document), neither checked further. Safe for
// concurrent use.
type CloudFormation struct {
	now func() time.Time

	mu      sync.Mutex
	signals []Signal
}

// NewCloudFormation returns the endpoint with no signals.
func NewCloudFormation() *CloudFormation {
	return &CloudFormation{now: time.Now}
}

// Signals returns the signals received, oldest first.
func (c *CloudFormation) Signals() []Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Signal(nil), c.signals...)
}

// ServeHTTP answers SignalResource.
func (c *CloudFormation) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	w.Header().Set("X-Amzn-Requestid", reqID)
	if !sigV4Signed(r) && !strings.HasPrefix(r.Header.Get("Authorization"), "CFN_V1 ") {
		writeCFNError(w, reqID, &apiError{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."})
		return
	}
	form, ok := queryForm(w, r)
	if !ok {
		writeCFNError(w, reqID, &apiError{http.StatusBadRequest, "MalformedQueryString", "The request is not a Query protocol request"})
		return
	}
	action := form.Get("Action")
	if action != "SignalResource" {
		writeCFNError(w, reqID, &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)})
		return
	}
	root := parseFormTree(form)
	var s Signal
	s.StackName, _ = root.str("StackName")
	s.LogicalResourceID, _ = root.str("LogicalResourceId")
	s.UniqueID, _ = root.str("UniqueId")
	s.Status, _ = root.str("Status")
	for _, p := range []struct{ name, v string }{{"stackName", s.StackName}, {"logicalResourceId", s.LogicalResourceID}, {"uniqueId", s.UniqueID}, {"status", s.Status}} {
		if p.v == "" {
			writeCFNError(w, reqID, validationError("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", p.name))
			return
		}
	}
	if s.Status != "SUCCESS" && s.Status != "FAILURE" {
		writeCFNError(w, reqID, validationError("1 validation error detected: Value '%s' at 'status' failed to satisfy constraint: Member must satisfy enum value set: [SUCCESS, FAILURE]", s.Status))
		return
	}
	if u := root.unknown(); u != "" {
		writeCFNError(w, reqID, validationError("The parameter %s is not recognized", u))
		return
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
	out := queryResponse{XMLName: xml.Name{Local: "SignalResourceResponse"}, Xmlns: cfnXMLNS}
	out.ResponseMetadata.RequestID = reqID
	writeXML(w, http.StatusOK, out)
}
