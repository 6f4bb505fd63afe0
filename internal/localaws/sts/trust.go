package sts

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// stringList is a policy element that is one string or a list of them.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		return json.Unmarshal(b, (*[]string)(l))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*l = []string{s}
	return nil
}

// principal is a statement's Principal: "*" or a map of kinds (AWS, Service,
// Federated) to one or more principals.
type principal struct {
	any   bool
	kinds map[string]stringList
}

func (p *principal) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		p.any = s == "*"
		return nil
	}
	return json.Unmarshal(b, &p.kinds)
}

type statement struct {
	Effect    string     `json:"Effect"`
	Principal *principal `json:"Principal"`
	Action    stringList `json:"Action"`
	// Elements the evaluation does not model: a statement with one never allows
	// (deny by default) and, in a Deny, always denies.
	NotPrincipal json.RawMessage `json:"NotPrincipal"`
	NotAction    json.RawMessage `json:"NotAction"`
	Condition    json.RawMessage `json:"Condition"`
}

// statements is a policy's Statement: one statement or a list of them.
type statements []statement

func (l *statements) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		return json.Unmarshal(b, (*[]statement)(l))
	}
	var s statement
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*l = []statement{s}
	return nil
}

// TrustAllows evaluates a role's trust policy for sts:AssumeRole by caller: an explicit
// Deny that applies wins, then an Allow whose Principal.AWS names the caller, and
// nothing else allows (deny by default; an unreadable policy allows nobody).
//
// Principal.AWS names the caller when it is "*", the caller's exact ARN, the ARN of the
// role whose session calls, or — for the account's IAM users, who hold administrator
// rights here — the account (its ID or arn:aws:iam::ACCOUNT:root), as on AWS a trust
// policy naming the account delegates to the account's own permission policies. Role
// sessions carry no permission to assume other roles, so the account principal does
// not admit them. Service principals (ec2.amazonaws.com) name services, never a caller.
func TrustAllows(policy string, caller protocol.Caller, account string) bool {
	var doc struct {
		Statement statements `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(policy), &doc); err != nil {
		return false
	}
	allowed := false
	for _, st := range doc.Statement {
		unmodelled := st.NotPrincipal != nil || st.NotAction != nil || st.Condition != nil
		applies := st.Principal != nil && names(st.Principal, caller, account) && assumesRole(st.Action)
		switch st.Effect {
		case "Deny":
			if applies || unmodelled {
				return false
			}
		case "Allow":
			allowed = allowed || applies && !unmodelled
		}
	}
	return allowed
}

// assumesRole tells whether a statement's actions include sts:AssumeRole (action
// names are case-insensitive; * and ? are wildcards).
func assumesRole(actions stringList) bool {
	for _, a := range actions {
		if protocol.GlobMatch(strings.ToLower(a), "sts:assumerole") {
			return true
		}
	}
	return false
}

func names(p *principal, caller protocol.Caller, account string) bool {
	if p.any {
		return true
	}
	for _, v := range p.kinds["AWS"] {
		switch {
		case v == "*", v == caller.ARN:
			return true
		case caller.Role != "" && v == "arn:aws:iam::"+account+":role/"+caller.Role:
			return true
		case caller.Role == "" && caller.Account == account && (v == account || v == "arn:aws:iam::"+account+":root"):
			return true
		}
	}
	return false
}
