package iam

// This file holds the checks of policy documents (trust policies, inline and managed
// policies) that IAM makes before it stores one, with MalformedPolicyDocument naming
// the fault. IAM's grammar is larger; these are the faults a template or a script
// makes in practice.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// docKind is what a policy document is for.
type docKind int

const (
	// trustPolicy is a role's trust policy: statements name principals, not resources.
	trustPolicy docKind = iota
	// permissionsPolicy is an inline or managed policy: statements name resources, not
	// principals.
	permissionsPolicy
)

// maxPolicyLength bounds a policy document as IAM's API does.
const maxPolicyLength = 131072

func malformed(format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, "MalformedPolicyDocument", format, args...)
}

// actionRE is an action: a service prefix and an action name, wildcards allowed.
var actionRE = regexp.MustCompile(`^([a-zA-Z0-9-]+:[a-zA-Z0-9*?]+|\*)$`)

// checkPolicy refuses a document that is not a policy of kind.
func checkPolicy(doc string, kind docKind) *protocol.Error {
	if len(doc) > maxPolicyLength {
		return constraint("policyDocument", doc[:64]+"…", "Member must have length less than or equal to 131072")
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(doc))
	if err := dec.Decode(&top); err != nil || dec.More() || top == nil {
		return malformed("Syntax errors in policy: the document is not one JSON object.")
	}
	for k := range top {
		if !slices.Contains([]string{"Version", "Id", "Statement"}, k) {
			return malformed("Syntax errors in policy: unknown field %s (a policy has Version, Id and Statement).", k)
		}
	}
	if v, ok := top["Version"]; ok {
		var version string
		if json.Unmarshal(v, &version) != nil || version != "2012-10-17" && version != "2008-10-17" {
			return malformed("The policy's Version %s is not valid: use 2012-10-17.", v)
		}
	}
	raw, ok := top["Statement"]
	if !ok {
		return malformed("Missing required field Statement")
	}
	var statements []map[string]json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		var one map[string]json.RawMessage
		if json.Unmarshal(raw, &one) != nil {
			return malformed("Syntax errors in policy: Statement is not an object or a list of objects.")
		}
		statements = append(statements, one)
	} else if json.Unmarshal(raw, &statements) != nil || len(statements) == 0 {
		return malformed("Syntax errors in policy: Statement is not an object or a list of objects.")
	}
	for n, s := range statements {
		if aerr := checkStatement(s, kind); aerr != nil {
			aerr.Message += " (Statement " + itoa(n+1) + ")"
			return aerr
		}
	}
	return nil
}

// checkStatement refuses a statement without an effect, an action, or the principal
// (trust) or resource (permissions) its kind requires.
func checkStatement(s map[string]json.RawMessage, kind docKind) *protocol.Error {
	if s == nil {
		return malformed("Syntax errors in policy: a statement is null.")
	}
	var effect string
	if e, ok := s["Effect"]; !ok {
		return malformed("Missing required field Effect")
	} else if json.Unmarshal(e, &effect) != nil || effect != "Allow" && effect != "Deny" {
		return malformed("Invalid effect: %s", e)
	}
	actions, hasAction := s["Action"]
	if !hasAction {
		actions, hasAction = s["NotAction"]
	}
	if !hasAction {
		return malformed("Missing required field Action")
	}
	list, ok := stringOrList(actions)
	if !ok || len(list) == 0 {
		return malformed("Syntax errors in policy: Action is not a string or a list of strings.")
	}
	for _, a := range list {
		if !actionRE.MatchString(a) {
			return malformed("Actions/Conditions must be prefaced by a vendor, e.g., iam, sdb, ec2, etc. (%q)", a)
		}
	}
	return checkSubjects(s, kind)
}

// checkSubjects refuses a statement without the principal (trust) or resource
// (permissions) its kind requires, or with the other.
func checkSubjects(s map[string]json.RawMessage, kind docKind) *protocol.Error {
	_, hasPrincipal := s["Principal"]
	if _, not := s["NotPrincipal"]; not {
		hasPrincipal = true
	}
	_, hasResource := s["Resource"]
	if _, not := s["NotResource"]; not {
		hasResource = true
	}
	switch {
	case kind == trustPolicy && !hasPrincipal:
		return malformed("Missing required field Principal")
	case kind == trustPolicy && hasResource:
		return malformed("Has prohibited field Resource")
	case kind == permissionsPolicy && hasPrincipal:
		return malformed("Policy document should not specify a principal.")
	case kind == permissionsPolicy && !hasResource:
		return malformed("Policy statement must contain resources.")
	}
	return nil
}

// stringOrList reads a JSON string or list of strings.
func stringOrList(raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var list []string
	return list, json.Unmarshal(raw, &list) == nil
}
