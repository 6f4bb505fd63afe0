// Package iam is the local AWS's IAM: instance profiles and their roles, answered on
// the Query protocol (GetInstanceProfile, GetRole), and each role's trust policy (which
// STS evaluates for AssumeRole). Of the local AWS it imports the wire layer (protocol)
// only; the roles of running instances come through RoleHolders.
package iam

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// IAM answers IAM GetInstanceProfile and GetRole (Query protocol) for the account's
// instance profiles and roles: a profile named after each role of the EC2 inventory's
// instances (as instances' iamInstanceProfile ARNs name them), and those added with
// AddInstanceProfile. Requests must carry a SigV4 Authorization header, not checked
// further. Safe for concurrent use.
//
// A role exists while an instance or a profile names it. As in AWS, it has a unique ID
// (RoleId, AROA…) drawn at random when it is created, here when it is first looked up;
// DeleteRole deletes it, so that the next use of the name creates a new role with a new
// ID, as deleting and re-creating a role under the same ARN does in AWS.
type IAM struct {
	AccountID string
	instances RoleHolders

	service *protocol.Service

	mu       sync.Mutex
	profiles map[string]string // profile name → role, "" for none
	roleIDs  map[string]string // role name → unique ID
	trust    map[string]string // role name → trust policy set with SetTrustPolicy
	calls    int
}

// RoleHolders tells whether an instance has a role: EC2's inventory.
type RoleHolders interface {
	HasRole(role string) bool
}

// New returns the IAM endpoint of an account; instances may be nil.
func New(accountID string, instances RoleHolders) *IAM {
	i := &IAM{AccountID: accountID, instances: instances, profiles: map[string]string{}, roleIDs: map[string]string{}, trust: map[string]string{}}
	i.service = &protocol.Service{
		Dialect: protocol.Query, WriteError: protocol.QueryErrorWriter(xmlns), Wrap: protocol.QueryWrap(xmlns), Admit: i.admit,
		Unsigned: &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationToken", Message: "Request is missing Authentication Token"},
		Actions: map[string]protocol.Handler{
			"GetInstanceProfile": i.getInstanceProfile,
			"GetRole":            i.getRole,
		},
		UnknownAction: func(r *protocol.Request) *protocol.Error {
			return protocol.Errorf(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version %s", r.Action, r.Form.Get("Version"))
		},
	}
	return i
}

func (i *IAM) admit(*protocol.Request) *protocol.Error {
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	return nil
}

// ServeHTTP answers the actions of IAM's table.
func (i *IAM) ServeHTTP(w http.ResponseWriter, r *http.Request) { i.service.ServeHTTP(w, r) }

// hasRole tells whether an instance has the role.
func (i *IAM) hasRole(role string) bool {
	return i.instances != nil && i.instances.HasRole(role)
}

// RoleID returns the unique ID of a role, creating the role when the name is in use
// but has no ID yet; false when no instance or profile names the role.
func (i *IAM) RoleID(role string) (string, bool) {
	if !i.roleExists(role) {
		return "", false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if id, ok := i.roleIDs[role]; ok {
		return id, true
	}
	suffix, err := randomString(17)
	if err != nil {
		return "", false
	}
	id := "AROA" + suffix
	i.roleIDs[role] = id
	return id, true
}

// DeleteRole deletes a role: its unique ID is forgotten, credentials issued for it stop
// working (STS refuses them), and the name's next use creates a new role with a new ID.
func (i *IAM) DeleteRole(role string) {
	i.mu.Lock()
	delete(i.roleIDs, role)
	i.mu.Unlock()
}

func (i *IAM) roleExists(role string) bool {
	i.mu.Lock()
	for _, r := range i.profiles {
		if r == role && role != "" {
			i.mu.Unlock()
			return true
		}
	}
	i.mu.Unlock()
	return role != "" && i.hasRole(role)
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
	if i.hasRole(name) {
		return name, true
	}
	return "", false
}

const xmlns = "https://iam.amazonaws.com/doc/2010-05-08/"

type roleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	ARN                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type instanceProfileResult struct {
	XMLName         xml.Name `xml:"GetInstanceProfileResult"`
	InstanceProfile struct {
		InstanceProfileID string `xml:"InstanceProfileId"`
		Roles             struct {
			Members []roleXML `xml:"member"`
		} `xml:"Roles"`
		InstanceProfileName string `xml:"InstanceProfileName"`
		Path                string `xml:"Path"`
		ARN                 string `xml:"Arn"`
		CreateDate          string `xml:"CreateDate"`
	} `xml:"InstanceProfile"`
}

// DefaultTrustPolicy is a role's trust policy unless SetTrustPolicy says otherwise: EC2
// may assume it (it is an instance role), and so may the account's administrators, as
// a trust policy naming the account's root allows on AWS.
func DefaultTrustPolicy(account string) string {
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"},` +
		`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + account + `:root"},"Action":"sts:AssumeRole"}]}`
}

// TrustPolicy returns a role's trust policy document (JSON); false when the role does
// not exist.
func (i *IAM) TrustPolicy(role string) (string, bool) {
	if !i.roleExists(role) {
		return "", false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if doc, ok := i.trust[role]; ok {
		return doc, true
	}
	return DefaultTrustPolicy(i.AccountID), true
}

// SetTrustPolicy replaces a role's trust policy with a JSON document.
func (i *IAM) SetTrustPolicy(role, doc string) error {
	if !json.Valid([]byte(doc)) {
		return fmt.Errorf("the trust policy of role %s is not a JSON document", role)
	}
	i.mu.Lock()
	i.trust[role] = doc
	i.mu.Unlock()
	return nil
}

// createDate is when the local account's IAM entities were created.
var createDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)

type roleResult struct {
	XMLName xml.Name `xml:"GetRoleResult"`
	Role    roleXML  `xml:"Role"`
}

// roleXML describes a role that exists.
func (i *IAM) role(name, id string) roleXML {
	policy, _ := i.TrustPolicy(name)
	return roleXML{
		Path: "/", RoleName: name, RoleID: id, ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", i.AccountID, name),
		CreateDate: createDate, AssumeRolePolicyDocument: url.QueryEscape(policy),
	}
}

func (i *IAM) getInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("InstanceProfileName")
	if err := checkName("instanceProfileName", name); err != nil {
		return nil, err
	}
	role, found := i.profile(name)
	if !found {
		return nil, protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "Instance Profile %s cannot be found.", name)
	}
	var out instanceProfileResult
	p := &out.InstanceProfile
	p.InstanceProfileID, p.InstanceProfileName, p.Path = InstanceProfileID(name), name, "/"
	p.ARN, p.CreateDate = InstanceProfileARN(i.AccountID, name), createDate
	if id, ok := i.RoleID(role); ok {
		p.Roles.Members = []roleXML{i.role(role, id)}
	}
	return out, nil
}

func (i *IAM) getRole(r *protocol.Request) (any, *protocol.Error) {
	name, _ := r.Params.Str("RoleName")
	if err := checkName("roleName", name); err != nil {
		return nil, err
	}
	id, ok := i.RoleID(name)
	if !ok {
		return nil, protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
	}
	return roleResult{Role: i.role(name, id)}, nil
}

// checkName refuses a name IAM's pattern does not allow, with IAM's ValidationError
// naming the parameter.
func checkName(param, name string) *protocol.Error {
	if iamNameRE.MatchString(name) {
		return nil
	}
	return protocol.ValidationError("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name, param)
}

// InstanceProfileRole returns the role of an instance profile named by name or ARN
// (arn:aws:iam::ACCOUNT:instance-profile/NAME), as a launch resolves it; false for a
// profile the account does not have.
func (i *IAM) InstanceProfileRole(nameOrARN string) (string, bool) {
	name := nameOrARN
	if strings.HasPrefix(nameOrARN, "arn:") {
		_, after, ok := strings.Cut(nameOrARN, ":instance-profile/")
		if !ok {
			return "", false
		}
		name = after[strings.LastIndex(after, "/")+1:]
	}
	return i.profile(name)
}

// InstanceProfileARN is the ARN of an account's instance profile.
func InstanceProfileARN(account, name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", account, name)
}

// InstanceProfileID is the unique ID of an instance profile.
func InstanceProfileID(name string) string {
	sum := sha256.Sum256([]byte("instance-profile/" + name))
	return "AIPA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return strings.ToUpper(hex.EncodeToString(b)[:n]), nil
}
