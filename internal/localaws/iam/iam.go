// Package iam is the local AWS's IAM on the Query protocol: roles (CreateRole, GetRole,
// DeleteRole, their trust policies, tags, attached managed and inline policies),
// instance profiles (created, or named after the roles of running instances), and
// customer managed policies. STS evaluates a role's trust policy for AssumeRole (TrustPolicy)
// and Auto Scaling resolves a launch's instance profile to its role
// (InstanceProfileRole). Of the local AWS it imports the wire layer (protocol) only; the
// roles of running instances come through RoleHolders.
package iam

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// IAM is the account's IAM and its endpoint. ServeHTTP answers the actions of its
// table (Query protocol). Requests must carry a SigV4 Authorization header, not checked
// further (the edge verifies signatures). Safe for concurrent use.
//
// A role exists when CreateRole made it, or while an instance or an instance profile
// names it (the roles the sandbox gives instances are not created through the API). As
// in AWS, a role has a unique ID (RoleId, AROA…) drawn at random when it is created (for
// an implicit role, when it is first looked up); DeleteRole forgets it, so that the next
// use of the name has a new ID, as deleting and re-creating a role under the same ARN does
// in AWS. An instance profile exists when CreateInstanceProfile or AddInstanceProfile
// made it, or, named after the role, while an instance has that role.
type IAM struct {
	AccountID string
	instances RoleHolders
	now       func() time.Time

	service *protocol.Service

	mu       sync.Mutex
	roles    map[string]*role    // by name: created roles, and implicit ones with an ID or data
	profiles map[string]*profile // by name: created or registered profiles
	policies map[string]*policy  // customer managed policies, by ARN
	calls    int
}

// role is what IAM records of a role.
type role struct {
	name, path, id, description string
	maxSession                  int64
	// boundary is the permissions boundary policy's ARN, "" for none.
	boundary string
	// trust is the trust policy document; "" for DefaultTrustPolicy.
	trust string
	// created is set for a role made with CreateRole; zero for an implicit one.
	created time.Time
	tags    tagList
	// managed are the attached managed policies' ARNs, in attachment order.
	managed []string
	// inline are the inline policies' documents, by name.
	inline map[string]string
}

// profile is an instance profile made with CreateInstanceProfile or AddInstanceProfile.
type profile struct {
	name, path string
	role       string // "" for none
	created    time.Time
	tags       tagList
}

// RoleHolders tells whether an instance has a role: EC2's inventory.
type RoleHolders interface {
	HasRole(role string) bool
}

// New returns the IAM endpoint of an account; instances may be nil.
func New(accountID string, instances RoleHolders) *IAM {
	i := &IAM{AccountID: accountID, instances: instances, now: time.Now,
		roles: map[string]*role{}, profiles: map[string]*profile{}, policies: map[string]*policy{}}
	i.service = &protocol.Service{
		Dialect: protocol.Query, WriteError: protocol.QueryErrorWriter(xmlns), Wrap: protocol.QueryWrap(xmlns), Admit: i.admit,
		Unsigned: &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationToken", Message: "Request is missing Authentication Token"},
		Actions:  i.actions(),
		UnknownAction: func(r *protocol.Request) *protocol.Error {
			return protocol.Errorf(http.StatusBadRequest, "InvalidAction", "Could not find operation %s for version %s", r.Action, r.Form.Get("Version"))
		},
	}
	return i
}

// actions is IAM's table: each action's handler.
func (i *IAM) actions() map[string]protocol.Handler {
	return map[string]protocol.Handler{
		"CreateRole":                    i.createRole,
		"GetRole":                       i.getRole,
		"DeleteRole":                    i.deleteRole,
		"UpdateRole":                    i.updateRole,
		"UpdateAssumeRolePolicy":        i.updateAssumeRolePolicy,
		"TagRole":                       i.tagRole,
		"UntagRole":                     i.untagRole,
		"ListRoleTags":                  i.listRoleTags,
		"CreateInstanceProfile":         i.createInstanceProfile,
		"GetInstanceProfile":            i.getInstanceProfile,
		"DeleteInstanceProfile":         i.deleteInstanceProfile,
		"AddRoleToInstanceProfile":      i.addRoleToInstanceProfile,
		"RemoveRoleFromInstanceProfile": i.removeRoleFromInstanceProfile,
		"ListInstanceProfilesForRole":   i.listInstanceProfilesForRole,
		"AttachRolePolicy":              i.attachRolePolicy,
		"DetachRolePolicy":              i.detachRolePolicy,
		"ListAttachedRolePolicies":      i.listAttachedRolePolicies,
		"PutRolePolicy":                 i.putRolePolicy,
		"GetRolePolicy":                 i.getRolePolicy,
		"DeleteRolePolicy":              i.deleteRolePolicy,
		"ListRolePolicies":              i.listRolePolicies,
		"CreatePolicy":                  i.createPolicy,
		"GetPolicy":                     i.getPolicy,
		"DeletePolicy":                  i.deletePolicy,
	}
}

func (i *IAM) admit(*protocol.Request) *protocol.Error {
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	return nil
}

// ServeHTTP answers the actions of IAM's table.
func (i *IAM) ServeHTTP(w http.ResponseWriter, r *http.Request) { i.service.ServeHTTP(w, r) }

// Calls counts the authenticated requests received.
func (i *IAM) Calls() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls
}

// hasRole tells whether an instance has the role. It is asked before i.mu is taken:
// EC2's inventory has its own lock.
func (i *IAM) hasRole(role string) bool {
	return role != "" && i.instances != nil && i.instances.HasRole(role)
}

// existsLocked tells whether a role exists; held is hasRole(name). Locked.
func (i *IAM) existsLocked(name string, held bool) bool {
	if name == "" {
		return false
	}
	if r := i.roles[name]; r != nil && !r.created.IsZero() || held {
		return true
	}
	for _, p := range i.profiles {
		if p.role == name {
			return true
		}
	}
	return false
}

// record returns the record of a role that exists, adding one for an implicit role,
// with its unique ID drawn. Locked.
func (i *IAM) record(name string) *role {
	r := i.roles[name]
	if r == nil {
		r = &role{name: name, path: "/", inline: map[string]string{}}
		i.roles[name] = r
	}
	if r.id == "" {
		r.id = "AROA" + randomString(17)
	}
	return r
}

// RoleID returns the unique ID of a role, drawing it when the role has none yet; false
// when the role does not exist.
func (i *IAM) RoleID(name string) (string, bool) {
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.existsLocked(name, held) {
		return "", false
	}
	return i.record(name).id, true
}

// DeleteRole makes a role as if deleted and re-created under the same name: its unique
// ID is forgotten, credentials issued for it stop working (STS refuses them), and the
// name's next use has a new ID.
func (i *IAM) DeleteRole(name string) {
	i.mu.Lock()
	if r := i.roles[name]; r != nil {
		r.id = ""
	}
	i.mu.Unlock()
}

// nameRE is the pattern of IAM's names.
var nameRE = regexp.MustCompile(`^[\w+=,.@-]+$`)

// AddInstanceProfile registers an instance profile holding a role ("" for none), as if
// created with CreateInstanceProfile and AddRoleToInstanceProfile.
func (i *IAM) AddInstanceProfile(name, role string) error {
	if checkName("instanceProfileName", name, 128) != nil || role != "" && checkName("roleName", role, 64) != nil {
		return fmt.Errorf("instance profile %q or role %q is not a valid IAM name", name, role)
	}
	i.mu.Lock()
	i.profiles[name] = &profile{name: name, path: "/", role: role, created: i.now().UTC()}
	i.mu.Unlock()
	return nil
}

// profileRole returns the role of an instance profile ("" for none); false when the
// account has no such profile.
func (i *IAM) profileRole(name string) (string, bool) {
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if p := i.profiles[name]; p != nil {
		return p.role, true
	}
	// A role's own name is the instance profile of its instances, as for the roles
	// instances hold; for a created role this stands in for the instance profile EKS
	// makes for a managed node group's role (the local EKS names the role's name).
	_, created := i.roles[name]
	return name, held || created
}

// DefaultTrustPolicy is a role's trust policy unless CreateRole or SetTrustPolicy gave
// one: EC2 may assume it (it is an instance role), and so may the account's
// administrators, as a trust policy naming the account's root allows on AWS.
func DefaultTrustPolicy(account string) string {
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"},` +
		`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + account + `:root"},"Action":"sts:AssumeRole"}]}`
}

// TrustPolicy returns a role's trust policy document (JSON), the one STS's AssumeRole
// checks; false when the role does not exist.
func (i *IAM) TrustPolicy(name string) (string, bool) {
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.existsLocked(name, held) {
		return "", false
	}
	return i.trustLocked(name), true
}

// trustLocked is the trust policy of a role that exists. Locked.
func (i *IAM) trustLocked(name string) string {
	if r := i.roles[name]; r != nil && r.trust != "" {
		return r.trust
	}
	return DefaultTrustPolicy(i.AccountID)
}

// SetTrustPolicy replaces a role's trust policy with a JSON document.
func (i *IAM) SetTrustPolicy(name, doc string) error {
	if !json.Valid([]byte(doc)) {
		return fmt.Errorf("the trust policy of role %s is not a JSON document", name)
	}
	i.mu.Lock()
	r := i.roles[name]
	if r == nil {
		r = &role{name: name, path: "/", inline: map[string]string{}}
		i.roles[name] = r
	}
	r.trust = doc
	i.mu.Unlock()
	return nil
}

// InstanceProfileRole returns the role of an instance profile named by name or ARN
// (arn:aws:iam::ACCOUNT:instance-profile/PATH/NAME), as a launch resolves it; false for
// a profile the account does not have.
func (i *IAM) InstanceProfileRole(nameOrARN string) (string, bool) {
	name := nameOrARN
	if strings.HasPrefix(nameOrARN, "arn:") {
		_, after, ok := strings.Cut(nameOrARN, ":instance-profile/")
		if !ok {
			return "", false
		}
		name = after[strings.LastIndex(after, "/")+1:]
	}
	return i.profileRole(name)
}

// InstanceProfileARN is the ARN of an account's instance profile on path /.
func InstanceProfileARN(account, name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", account, name)
}

// InstanceProfileID is the unique ID of an instance profile: derived from its name, so
// that EC2 (which describes instances' profiles) and IAM agree on it.
func InstanceProfileID(name string) string {
	sum := sha256.Sum256([]byte("instance-profile/" + name))
	return "AIPA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
}

// arn is an IAM ARN of the account: kind role, instance-profile or policy, on a path.
func (i *IAM) arn(kind, path, name string) string {
	return fmt.Sprintf("arn:aws:iam::%s:%s%s%s", i.AccountID, kind, path, name)
}

// randomString returns n random upper-case hexadecimal digits.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b)[:n])
}
