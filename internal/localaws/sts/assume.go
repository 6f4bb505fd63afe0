package sts

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// AssumeRole's limits, as AWS has them: DurationSeconds from 15 minutes to 12 hours
// (local roles allow the most), one hour when a role session assumes a role (role
// chaining).
const (
	minDuration      = 900
	maxDuration      = 43200
	defaultDuration  = 3600
	chainMaxDuration = 3600
)

var sessionNameRE = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

type assumeRoleResult struct {
	XMLName     xml.Name `xml:"AssumeRoleResult"`
	Credentials struct {
		AccessKeyID     string `xml:"AccessKeyId"`
		SecretAccessKey string `xml:"SecretAccessKey"`
		SessionToken    string `xml:"SessionToken"`
		Expiration      string `xml:"Expiration"`
	} `xml:"Credentials"`
	AssumedRoleUser struct {
		AssumedRoleID string `xml:"AssumedRoleId"`
		Arn           string `xml:"Arn"`
	} `xml:"AssumedRoleUser"`
}

// validation is STS's ValidationError naming the parameter as AWS does (its
// lower-camel member name).
func validation(member, value, constraint string) *protocol.Error {
	v := "null"
	if value != "" {
		v = "'" + value + "'"
	}
	return protocol.ValidationError("1 validation error detected: Value %s at '%s' failed to satisfy constraint: %s", v, member, constraint)
}

// assumeRole issues a session of a role of the account whose trust policy allows the
// verified caller to assume it.
func (s *STS) assumeRole(req *protocol.Request) (any, *protocol.Error) {
	caller, ok := protocol.CallerFrom(req.Context)
	if !ok {
		return nil, errMissingAuth
	}
	p := req.Params
	roleARN, _ := p.Str("RoleArn")
	session, _ := p.Str("RoleSessionName")
	dur, perr := p.Int("DurationSeconds")
	if perr != nil {
		return nil, perr
	}
	if e := p.Finish(); e != nil {
		return nil, e
	}
	switch {
	case roleARN == "":
		return nil, validation("roleArn", "", "Member must not be null")
	case len(roleARN) < 20 || len(roleARN) > 2048:
		return nil, validation("roleArn", roleARN, "Member must have length between 20 and 2048")
	case session == "":
		return nil, validation("roleSessionName", "", "Member must not be null")
	case !sessionNameRE.MatchString(session):
		return nil, validation("roleSessionName", session, `Member must have length between 2 and 64 and satisfy regular expression pattern: [\w+=,.@-]*`)
	}
	seconds := int64(defaultDuration)
	if dur != nil {
		seconds = *dur
	}
	if seconds < minDuration || seconds > maxDuration {
		return nil, validation("durationSeconds", fmt.Sprint(seconds), "Member must have value between 900 and 43200")
	}
	denied := protocol.Errorf(http.StatusForbidden, "AccessDenied", "User: %s is not authorized to perform: sts:AssumeRole on resource: %s", caller.ARN, roleARN)
	role, ok := s.roleOfARN(roleARN)
	if !ok {
		return nil, denied
	}
	roleID, ok := s.roleID(role)
	if !ok {
		return nil, denied
	}
	policy, ok := s.trustPolicy(role)
	if !ok || !TrustAllows(policy, caller, s.AccountID) {
		return nil, denied
	}
	if caller.Session() && seconds > chainMaxDuration {
		return nil, protocol.ValidationError("The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.")
	}
	c, err := s.issue(session, role, roleID, time.Duration(seconds)*time.Second)
	if err != nil {
		return nil, protocol.Errorf(http.StatusInternalServerError, "InternalFailure", "issuing credentials failed")
	}
	var out assumeRoleResult
	out.Credentials.AccessKeyID, out.Credentials.SecretAccessKey, out.Credentials.SessionToken = c.AccessKeyID, c.SecretAccessKey, c.Token
	out.Credentials.Expiration = c.Expiration.UTC().Format(time.RFC3339)
	out.AssumedRoleUser.AssumedRoleID = roleID + ":" + session
	out.AssumedRoleUser.Arn = AssumedRoleARN(s.AccountID, role, session)
	return out, nil
}

// roleOfARN returns the role name of an ARN of this account's role
// (arn:aws:iam::ACCOUNT:role/PATH/NAME); false for another account's, or not a role's.
func (s *STS) roleOfARN(arn string) (string, bool) {
	rest, ok := strings.CutPrefix(arn, "arn:aws:iam::"+s.AccountID+":role/")
	if !ok || rest == "" || strings.HasSuffix(rest, "/") {
		return "", false
	}
	return rest[strings.LastIndex(rest, "/")+1:], true
}

// trustPolicy is a role's trust policy: TrustPolicies', or one trusting the account.
func (s *STS) trustPolicy(role string) (string, bool) {
	if s.TrustPolicies != nil {
		return s.TrustPolicies(role)
	}
	return `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + s.AccountID + `:root"},"Action":"sts:AssumeRole"}]}`, true
}
