// Package sts is the local AWS's STS: it issues instances' role credentials (handed
// out by their instance metadata) and answers presigned GetCallerIdentity requests,
// the requests inside node identity tokens, verifying their SigV4 signatures. Of the
// local AWS it imports the wire layer (protocol) only.
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

// STS issues temporary credentials to instances (handed out by their IMDS) and answers
// presigned GetCallerIdentity requests — the requests inside node identity tokens —
// only when their SigV4 signature verifies against credentials it issued and those have
// not expired.
type STS struct {
	AccountID string
	// CredentialLifetime defaults to six hours, as EC2 role credentials last.
	CredentialLifetime time.Duration
	// RoleIDs, when set, gives a role's current unique ID (IAM's RoleId), false when the
	// role does not exist; credentials carry the ID of their role when issued and stop
	// working once it changes (the role was deleted). Default RoleID, a fixed ID per name.
	RoleIDs func(role string) (string, bool)
	now     func() time.Time

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

type issuedCredentials struct {
	Credentials
	instanceID, role, roleID string
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
		Authorized: func(*http.Request) bool { return true },
		Actions:    map[string]protocol.Handler{"GetCallerIdentity": s.getCallerIdentity},
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
	life := s.CredentialLifetime
	if life == 0 {
		life = 6 * time.Hour
	}
	roleID, ok := s.roleID(role)
	if !ok {
		return Credentials{}, fmt.Errorf("role %s does not exist", role)
	}
	c := Credentials{AccessKeyID: "ASIA" + akid, SecretAccessKey: secret, Token: token, Expiration: s.now().Add(life)}
	s.mu.Lock()
	s.issued[c.AccessKeyID] = issuedCredentials{Credentials: c, instanceID: instanceID, role: role, roleID: roleID}
	s.mu.Unlock()
	return c, nil
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

// ServeHTTP answers the actions of STS's table.
func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.service.ServeHTTP(w, r) }

// getCallerIdentity answers a presigned GetCallerIdentity: only when its signature
// verifies against credentials STS issued, which have not expired.
func (s *STS) getCallerIdentity(req *protocol.Request) (any, *protocol.Error) {
	r := req.HTTP
	q := r.URL.Query()
	if r.Method != http.MethodGet {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidAction", "only presigned GetCallerIdentity is implemented")
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "IncompleteSignature", Message: "malformed X-Amz-Credential or X-Amz-Algorithm"}
	}
	s.mu.Lock()
	s.calls++
	c, ok := s.issued[cred[0]]
	s.mu.Unlock()
	now := s.now()
	switch {
	case !ok:
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."}
	case !now.Before(c.Expiration):
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "ExpiredToken", Message: "The security token included in the request is expired"}
	case !hmac.Equal([]byte(q.Get("X-Amz-Security-Token")), []byte(c.Token)):
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."}
	}
	// The role was deleted since (and perhaps re-created): its sessions are invalid.
	if id, ok := s.roleID(c.role); !ok || id != c.roleID {
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid."}
	}
	date, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || now.After(date.Add(identity.Lifetime)) || date.After(now.Add(5*time.Minute)) {
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "SignatureDoesNotMatch", Message: "Signature expired or not yet valid"}
	}
	want := protocol.PresignedSignature(c.SecretAccessKey, cred[2], cred[3], r)
	if !hmac.Equal([]byte(want), []byte(q.Get("X-Amz-Signature"))) {
		return nil, &protocol.Error{Status: http.StatusForbidden, Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match the signature you provided."}
	}
	return callerIdentity{
		Arn:     fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", s.AccountID, c.role, c.instanceID),
		UserID:  c.roleID + ":" + c.instanceID,
		Account: s.AccountID,
	}, nil
}
