package localaws

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

// NewSTS returns an STS for an account.
func NewSTS(accountID string) *STS {
	return &STS{AccountID: accountID, now: time.Now, issued: map[string]issuedCredentials{}}
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

// InstanceCredentials issues credentials for an instance's role (CredentialSource).
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

type stsError struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}

func writeSTSError(w http.ResponseWriter, status int, code, msg string) {
	var e stsError
	e.Error.Type, e.Error.Code, e.Error.Message = "Sender", code, msg
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_ = xml.NewEncoder(w).Encode(e)
}

type callerIdentity struct {
	XMLName xml.Name `xml:"GetCallerIdentityResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		Arn     string `xml:"Arn"`
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
	} `xml:"GetCallerIdentityResult"`
}

// RoleID is a fixed unique ID for a role name: the ID an STS without RoleIDs reports
// in UserId.
func RoleID(role string) string {
	return "AROA" + strings.ToUpper(hex.EncodeToString([]byte(role)))[:min(17, 2*len(role))]
}

// ServeHTTP answers presigned GetCallerIdentity requests.
func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method != http.MethodGet || q.Get("Action") != "GetCallerIdentity" {
		writeSTSError(w, http.StatusBadRequest, "InvalidAction", "only presigned GetCallerIdentity is implemented")
		return
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		writeSTSError(w, http.StatusBadRequest, "IncompleteSignature", "malformed X-Amz-Credential or X-Amz-Algorithm")
		return
	}
	s.mu.Lock()
	s.calls++
	c, ok := s.issued[cred[0]]
	s.mu.Unlock()
	now := s.now()
	switch {
	case !ok:
		writeSTSError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	case !now.Before(c.Expiration):
		writeSTSError(w, http.StatusForbidden, "ExpiredToken", "The security token included in the request is expired")
		return
	case !hmac.Equal([]byte(q.Get("X-Amz-Security-Token")), []byte(c.Token)):
		writeSTSError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	// The role was deleted since (and perhaps re-created): its sessions are invalid.
	if id, ok := s.roleID(c.role); !ok || id != c.roleID {
		writeSTSError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	date, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || now.After(date.Add(identity.Lifetime)) || date.After(now.Add(5*time.Minute)) {
		writeSTSError(w, http.StatusForbidden, "SignatureDoesNotMatch", "Signature expired or not yet valid")
		return
	}
	want := presignedSignature(c.SecretAccessKey, cred[2], cred[3], r)
	if !hmac.Equal([]byte(want), []byte(q.Get("X-Amz-Signature"))) {
		writeSTSError(w, http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.")
		return
	}
	var out callerIdentity
	out.Xmlns = "https://sts.amazonaws.com/doc/2011-06-15/"
	out.Result.Arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", s.AccountID, c.role, c.instanceID)
	out.Result.UserID = c.roleID + ":" + c.instanceID
	out.Result.Account = s.AccountID
	w.Header().Set("Content-Type", "text/xml")
	_ = xml.NewEncoder(w).Encode(out)
}
