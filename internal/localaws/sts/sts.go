// Package sts is the local AWS's STS: it issues instances' role credentials (handed
// out by their instance metadata) and AssumeRole sessions (trust.go evaluates roles'
// trust policies), knows every credential of the account (Lookup, which the edge
// verifies signatures with), and answers GetCallerIdentity: signed (the AWS CLI,
// eksctl) with the verified caller, or presigned (the requests inside node identity
// tokens), verifying their SigV4 signatures itself. Of the local AWS it imports the
// wire layer (protocol) only.
package sts

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// STS issues temporary credentials to instances (handed out by their IMDS) and to
// AssumeRole callers whom the role's trust policy allows. It answers GetCallerIdentity
// with the verified caller of a signed request, and a presigned one — the request
// inside a node identity token — only when its SigV4 signature verifies against
// credentials of the account (Lookup) that have not expired.
type STS struct {
	AccountID string
	// CredentialLifetime defaults to six hours, as EC2 role credentials last.
	CredentialLifetime time.Duration
	// RoleIDs, when set, gives a role's current unique ID (IAM's RoleId), false when the
	// role does not exist; credentials carry the ID of their role when issued and stop
	// working once it changes (the role was deleted). Default RoleID, a fixed ID per name.
	RoleIDs func(role string) (string, bool)
	// TrustPolicies, when set, gives a role's trust policy document (JSON), false when
	// it has none; default DefaultTrustPolicy.
	TrustPolicies func(role string) (string, bool)
	// Users, when set, knows the account's long-term credentials (its IAM users), which
	// Lookup answers for after the sessions STS issued.
	Users protocol.CredentialLookup
	now   func() time.Time

	service *protocol.Service

	mu     sync.Mutex
	issued map[string]issuedCredentials // access key ID →
	calls  int
}

// Calls counts the GetCallerIdentity requests received (benchmarks report them).
func (s *STS) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// issuedCredentials are a role session's credentials: an instance's (session is the
// instance ID) or an AssumeRole session's.
type issuedCredentials struct {
	Credentials
	session, role, roleID string
}

func (s *STS) roleID(role string) (string, bool) {
	if s.RoleIDs != nil {
		return s.RoleIDs(role)
	}
	return RoleID(role), true
}

// Credentials are an instance role's temporary credentials.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	Token           string
	Expiration      time.Time
}

// xmlns is the namespace of STS's answers.
const xmlns = "https://sts.amazonaws.com/doc/2011-06-15/"

// New returns an STS for an account.
func New(accountID string) *STS {
	s := &STS{AccountID: accountID, now: time.Now, issued: map[string]issuedCredentials{}}
	s.service = &protocol.Service{
		Dialect: protocol.Query, WriteError: protocol.QueryErrorWriter(xmlns), Wrap: protocol.QueryWrap(xmlns),
		// Signed requests are verified by ServeHTTP (or the edge), presigned ones by
		// getCallerIdentity; AssumeRole refuses a request without a verified caller.
		Authorized: func(*http.Request) bool { return true },
		Actions:    map[string]protocol.Handler{"GetCallerIdentity": s.getCallerIdentity, "AssumeRole": s.assumeRole},
	}
	return s
}

func randomString(n int, upper bool) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	s := hex.EncodeToString(b)[:n]
	if upper {
		s = strings.ToUpper(s)
	}
	return s, nil
}

// InstanceCredentials issues credentials for an instance's role.
func (s *STS) InstanceCredentials(instanceID, role string) (Credentials, error) {
	life := s.CredentialLifetime
	if life == 0 {
		life = 6 * time.Hour
	}
	roleID, ok := s.roleID(role)
	if !ok {
		return Credentials{}, fmt.Errorf("role %s does not exist", role)
	}
	return s.issue(instanceID, role, roleID, life)
}

// issue draws a session's credentials and records them.
func (s *STS) issue(session, role, roleID string, life time.Duration) (Credentials, error) {
	akid, err := randomString(16, true)
	if err != nil {
		return Credentials{}, err
	}
	secret, err := randomString(40, false)
	if err != nil {
		return Credentials{}, err
	}
	token, err := randomString(64, false)
	if err != nil {
		return Credentials{}, err
	}
	c := Credentials{AccessKeyID: "ASIA" + akid, SecretAccessKey: secret, Token: token, Expiration: s.now().Add(life)}
	s.mu.Lock()
	s.issued[c.AccessKeyID] = issuedCredentials{Credentials: c, session: session, role: role, roleID: roleID}
	s.mu.Unlock()
	return c, nil
}

// Lookup finds the credential of an access key: a session STS issued, while its role
// is the one it was issued for (not deleted since), or one of Users. Expired sessions
// are found too: the verifier tells them apart (ExpiredToken).
func (s *STS) Lookup(akid string) (protocol.Credential, bool) {
	s.mu.Lock()
	c, ok := s.issued[akid]
	s.mu.Unlock()
	if !ok {
		if s.Users != nil {
			return s.Users(akid)
		}
		return protocol.Credential{}, false
	}
	if id, ok := s.roleID(c.role); !ok || id != c.roleID {
		return protocol.Credential{}, false
	}
	return protocol.Credential{
		Secret: c.SecretAccessKey, SessionToken: c.Token, Expiration: c.Expiration,
		Caller: protocol.Caller{ARN: AssumedRoleARN(s.AccountID, c.role, c.session), UserID: c.roleID + ":" + c.session,
			Account: s.AccountID, AccessKey: akid, Role: c.role},
	}, true
}

// AssumedRoleARN is the ARN of a role session.
func AssumedRoleARN(account, role, session string) string {
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, role, session)
}

type callerIdentity struct {
	XMLName xml.Name `xml:"GetCallerIdentityResult"`
	Arn     string   `xml:"Arn"`
	UserID  string   `xml:"UserId"`
	Account string   `xml:"Account"`
}

// RoleID is a fixed unique ID for a role name: the ID an STS without RoleIDs reports
// in UserId.
func RoleID(role string) string {
	return "AROA" + strings.ToUpper(hex.EncodeToString([]byte(role)))[:min(17, 2*len(role))]
}

// ServeHTTP answers the actions of STS's table. A request signed in its Authorization
// header that did not come through the edge (STS's own endpoint) is verified here.
func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := protocol.CallerFrom(r.Context()); !ok && r.Header.Get("Authorization") != "" {
		caller, err := protocol.VerifyRequest(r, s.Lookup, s.now())
		if err != nil {
			id := protocol.NewRequestID()
			w.Header().Set("X-Amzn-Requestid", id)
			protocol.QueryErrorWriter(xmlns)(w, id, err.In(protocol.QueryShape))
			return
		}
		r = r.WithContext(protocol.WithCaller(r.Context(), caller))
	}
	s.service.ServeHTTP(w, r)
}

// errMissingAuth refuses an action without a verified caller.
var errMissingAuth = &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationToken", Message: "Request is missing Authentication Token"}

// getCallerIdentity answers who signed the request: the verified caller of a signed
// request, or, for a presigned GET, the owner of the credentials its signature
// verifies against.
func (s *STS) getCallerIdentity(req *protocol.Request) (any, *protocol.Error) {
	if caller, ok := protocol.CallerFrom(req.Context); ok {
		s.count()
		return callerIdentity{Arn: caller.ARN, UserID: caller.UserID, Account: caller.Account}, nil
	}
	if req.HTTP.Method != http.MethodGet || !req.HTTP.URL.Query().Has("X-Amz-Credential") {
		return nil, errMissingAuth
	}
	return s.presignedCallerIdentity(req.HTTP)
}

func (s *STS) count() {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
}

// presignedCallerIdentity answers a presigned GetCallerIdentity: only when its
// signature verifies against credentials of the account that have not expired, and
// within a node identity token's lifetime of its signing.
func (s *STS) presignedCallerIdentity(r *http.Request) (any, *protocol.Error) {
	q := r.URL.Query()
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "IncompleteSignature", Message: "malformed X-Amz-Credential or X-Amz-Algorithm"}
	}
	s.count()
	c, ok := s.Lookup(cred[0])
	now := s.now()
	switch {
	case !ok:
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."}
	case !c.Expiration.IsZero() && !now.Before(c.Expiration):
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "ExpiredToken", Message: "The security token included in the request is expired"}
	case !hmac.Equal([]byte(q.Get("X-Amz-Security-Token")), []byte(c.SessionToken)):
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."}
	}
	date, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || now.After(date.Add(identity.Lifetime)) || date.After(now.Add(5*time.Minute)) {
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "SignatureDoesNotMatch", Message: "Signature expired or not yet valid"}
	}
	want := protocol.PresignedSignature(c.Secret, cred[2], cred[3], r)
	if !hmac.Equal([]byte(want), []byte(q.Get("X-Amz-Signature"))) {
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match the signature you provided."}
	}
	return callerIdentity{Arn: c.Caller.ARN, UserID: c.Caller.UserID, Account: s.AccountID}, nil
}
