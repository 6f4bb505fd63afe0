package authn

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// User is the Kubernetes identity a caller maps to.
type User struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
	// Mapping is the Source of the role mapping that admitted the caller.
	Mapping string
	// Standard says a STANDARD access entry mapped the caller; Policies are the access
	// policies (ARNs) it granted, each as groups of Groups: what the webhook logs and
	// counts of such a mapping.
	Standard bool
	Policies []string
	// Instance is the instance whose node the user is ({{EC2PrivateDNSName}}), and
	// RequireInstanceProof whether its mapping requires the instance's proof
	// (InstanceProofs).
	Instance             *inventory.Instance
	RequireInstanceProof bool
}

// Instances looks instances up by ID (EC2 DescribeInstances on AWS);
// inventory.ErrNotFound when there is none.
type Instances interface {
	Instance(ctx context.Context, id string) (*inventory.Instance, error)
}

// RoleMapping is one entry of aws-auth's mapRoles, or one access entry.
type RoleMapping struct {
	// RoleARN is the principal: a role, or for a STANDARD entry also a user.
	RoleARN  string   `json:"rolearn"`
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
	// Source names where the mapping comes from, for logs and diagnostics.
	Source string `json:"-"`
	// Refused, when set, says why the mapping may not be used: its role is denied with
	// that reason rather than mapped (or mapped by nothing else).
	Refused string `json:"-"`
	// RoleID, when set, is the role's unique ID (AROA…) pinned when the mapping was first
	// used: a caller whose role has another ID (the role was deleted and re-created
	// under the same ARN) is denied. When it is empty and Pin is set, Map calls Pin to
	// record the role's current ID (from IAM) and compares with that.
	RoleID string                                    `json:"-"`
	Pin    func(ctx context.Context) (string, error) `json:"-"`
	// Standard marks a STANDARD access entry's mapping: the only kind that may map an
	// IAM user, and the only kind whose PolicyGroups are granted.
	Standard bool `json:"-"`
	// PolicyGroups are the groups of a STANDARD entry's access policies
	// (v1alpha1.AccessPolicyGroup), and Policies the policies' ARNs.
	PolicyGroups []string `json:"-"`
	Policies     []string `json:"-"`
	// AdminUsers are the usernames bound to cluster-admin, each with a binding that
	// binds it (aws-auth mappings carry them): a username rendered from a template
	// (such as {{SessionName}}, which the caller chooses) may not become one.
	AdminUsers map[string]string `json:"-"`
	// RequireInstanceProof requires the nodes it maps to prove they are their instance.
	RequireInstanceProof bool `json:"-"`
}

// ErrRoleIDUnknown reports that the role's unique ID could not be learnt to pin it: a
// retryable error, not a denial.
var ErrRoleIDUnknown = errors.New("the role's unique ID is unknown")

// kind is the caller's kind, a role when unset.
func (c *Caller) kind() string {
	if c.Kind == "" {
		return CallerRole
	}
	return c.Kind
}

// checkRoleID denies a caller whose role is not the one the mapping pinned.
func checkRoleID(ctx context.Context, c *Caller, m *RoleMapping) error {
	pinned := m.RoleID
	if c.Kind == CallerUser {
		// A user has no role ID to pin; a STANDARD entry names it by ARN only.
		return nil
	}
	if pinned == "" && m.Pin != nil {
		id, err := m.Pin(ctx)
		if err != nil {
			return fmt.Errorf("%w: pinning role %s for %s: %w", ErrRoleIDUnknown, c.CanonicalARN, m.Source, err)
		}
		pinned = id
	}
	if pinned != "" && c.UserID != pinned {
		return denied("role %s has unique ID %s, not %s, which %s pinned: the role was deleted and re-created; re-create the entry to admit the new role", c.CanonicalARN, c.UserID, pinned, m.Source)
	}
	return nil
}

// AWSAuth reads role mappings from the aws-auth ConfigMap. A malformed ConfigMap or
// entry is reported through Invalid and skipped, never an error: it must not lock out
// the nodes that access entries admit.
type AWSAuth struct {
	// Get returns kube-system/aws-auth, or nil when there is none.
	Get func(ctx context.Context) (*corev1.ConfigMap, error)
	// AdminGroups, when set, returns the groups bound to cluster-admin, each with the
	// ClusterRoleBinding that binds it; a mapping granting one is refused.
	AdminGroups func(ctx context.Context) (map[string]string, error)
	// AdminUsers, when set, returns the users bound to cluster-admin, each with the
	// ClusterRoleBinding that binds it; a mapping to one of these usernames is refused,
	// as one to a well-known administrator's username (adminUsernames) always is.
	AdminUsers func(ctx context.Context) (map[string]string, error)
	// Invalid, when set, is told of every malformed ConfigMap or entry that is skipped,
	// and every mapping that is refused.
	Invalid func(err error)
}

// ErrAWSAuthInvalid wraps the reports of a malformed aws-auth ConfigMap or entry.
var ErrAWSAuthInvalid = errors.New("aws-auth is invalid")

// Mappings parses mapRoles. A document that does not parse yields no mappings; an entry
// without a role ARN or username is skipped; an entry granting a group that is refused
// (see refusedGroup) is kept, marked Refused, so that its role is denied with the reason.
func (a AWSAuth) Mappings(ctx context.Context) ([]RoleMapping, error) {
	cm, err := a.Get(ctx)
	if err != nil || cm == nil {
		return nil, err
	}
	report := func(err error) {
		if a.Invalid != nil {
			a.Invalid(err)
		}
	}
	var maps []RoleMapping
	if _, err := strictyaml.Decode([]byte(cm.Data["mapRoles"]), "aws-auth mapRoles", &maps, strictyaml.Options{}); err != nil {
		report(fmt.Errorf("%w: mapRoles does not parse, so no role is mapped through it: %w", ErrAWSAuthInvalid, err))
		return nil, nil
	}
	var admin, adminUsers map[string]string
	if a.AdminGroups != nil {
		if admin, err = a.AdminGroups(ctx); err != nil {
			return nil, fmt.Errorf("reading the groups bound to cluster-admin: %w", err)
		}
	}
	if a.AdminUsers != nil {
		if adminUsers, err = a.AdminUsers(ctx); err != nil {
			return nil, fmt.Errorf("reading the users bound to cluster-admin: %w", err)
		}
	}
	out := make([]RoleMapping, 0, len(maps))
	for i, m := range maps {
		if m.RoleARN == "" || m.Username == "" {
			report(fmt.Errorf("%w: mapRoles[%d]: rolearn and username are required; entry skipped", ErrAWSAuthInvalid, i))
			continue
		}
		m.Source = fmt.Sprintf("aws-auth mapRoles[%d]", i)
		if strings.Contains(m.RoleARN, ":user/") {
			m.Refused = m.Source + " names an IAM user: mapRoles maps roles, and an IAM user is admitted through a STANDARD access entry only"
			report(fmt.Errorf("%w: %s", ErrAWSAuthInvalid, m.Refused))
		}
		for _, g := range m.Groups {
			if why := refusedGroup(g, admin); why != "" {
				m.Refused = fmt.Sprintf("%s grants group %s, %s", m.Source, g, why)
				report(fmt.Errorf("%w: %s", ErrAWSAuthInvalid, m.Refused))
				break
			}
		}
		if why := refusedUsername(m.Username, m.Groups, adminUsers); why != "" && m.Refused == "" {
			m.Refused = fmt.Sprintf("%s maps to username %s, %s", m.Source, m.Username, why)
			report(fmt.Errorf("%w: %s", ErrAWSAuthInvalid, m.Refused))
		}
		m.AdminUsers = adminUsers
		out = append(out, m)
	}
	return out, nil
}

// unmappedError is the denial of a principal that no mapping names.
type unmappedError struct{ arn, kind string }

func (e unmappedError) Error() string {
	if e.kind == CallerUser {
		return "user " + e.arn + " has no access entry"
	}
	return "role " + e.arn + " has no access entry or aws-auth mapping"
}

// RefusedError is the denial of a caller whose mapping exists but may not be used: a
// refused aws-auth mapping, a group no mapping of its kind may grant, a user named by
// anything but a STANDARD entry. The webhook counts these apart from other denials.
type RefusedError struct {
	// Source is "aws-auth" or "access-entry": the kind of mapping refused.
	Source string
	Reason string
}

func (e RefusedError) Error() string { return e.Reason }

// refused denies a caller because of mapping m (nil: a mapping of unknown kind).
func refused(m *RoleMapping, format string, args ...any) error {
	source := "access-entry"
	if m != nil && strings.HasPrefix(m.Source, "aws-auth") {
		source = "aws-auth"
	}
	return fmt.Errorf("%w: %w", ErrDenied, RefusedError{Source: source, Reason: fmt.Sprintf(format, args...)})
}

// nodeGroups are the only system: groups a role mapping may grant.
var nodeGroups = []string{"system:bootstrappers", "system:nodes"}

// refusedGroup says why group may not be granted through a role mapping, or "". admin
// maps the groups bound to cluster-admin to a binding that binds them.
func refusedGroup(group string, admin map[string]string) string {
	switch {
	case strings.Contains(group, "{{"):
		return "a template: aws-auth groups must be literal"
	case strings.HasPrefix(group, nodejoinv1alpha1.AccessPolicyGroupPrefix):
		return "which is reserved for the access policies of STANDARD access entries: associate an access policy with an access entry instead"
	case strings.HasPrefix(group, "system:") && !slices.Contains(nodeGroups, group):
		return "a system: group other than system:bootstrappers and system:nodes"
	case admin[group] != "":
		return "which is bound to cluster-admin by ClusterRoleBinding " + admin[group]
	}
	return ""
}

// nodeUsernames are the only system: usernames a role mapping may give: a node's name
// is its instance's private DNS name, resolved and checked by Map, never a name the
// mapping or the caller chooses.
var nodeUsernames = []string{nodejoinv1alpha1.NodeUsernameTemplate, "system:node:{{PrivateDNSName}}"}

// nodeUsernameGroups are the groups a mapping to a node's username may grant: the node
// groups, and eks:kube-proxy-windows, which EKS grants Windows nodes.
var nodeUsernameGroups = append(slices.Clone(nodeGroups), nodejoinv1alpha1.KubeProxyWindowsGroup)

// adminUsernames are well-known administrators' usernames, refused whether or not a
// ClusterRoleBinding names them: kubeadm's admin.conf and super-admin.conf users, which
// hold cluster-admin through system:masters or kubeadm:cluster-admins, and the
// cluster creator's username on EKS.
var adminUsernames = map[string]string{
	"kubernetes-admin":       "the username of kubeadm's admin.conf and of the EKS cluster creator, an administrator",
	"kubernetes-super-admin": "the username of kubeadm's super-admin.conf, an administrator",
}

// refusedUsername says why a role mapping may not map to username (as written, before
// templates are rendered) with groups, or "". adminUsers maps the users bound to
// cluster-admin to a binding that binds them.
func refusedUsername(username string, groups []string, adminUsers map[string]string) string {
	switch {
	case slices.Contains(nodeUsernames, username):
		for _, g := range groups {
			if !slices.Contains(nodeUsernameGroups, g) {
				return fmt.Sprintf("a node's username, which may be given only with the groups system:bootstrappers and system:nodes (and %s), not with group %s", nodejoinv1alpha1.KubeProxyWindowsGroup, g)
			}
		}
	case strings.HasPrefix(username, "system:node:"):
		return "a node's username that is not system:node:{{EC2PrivateDNSName}}: a node's name must be its instance's private DNS name, which only {{EC2PrivateDNSName}} checks"
	case strings.HasPrefix(username, "system:"):
		return "a system: username other than system:node:{{EC2PrivateDNSName}}"
	case adminUsernames[username] != "":
		return adminUsernames[username]
	case adminUsers[username] != "":
		return "which is bound to cluster-admin by ClusterRoleBinding " + adminUsers[username]
	}
	return ""
}

// checkUsername refuses a rendered username that a template made into a name the
// mapping may not give: a system: name (only the node username's template may make
// one), a well-known administrator's, or one bound to cluster-admin.
func checkUsername(m *RoleMapping, username string) error {
	switch {
	case strings.HasPrefix(username, "system:") && !m.Standard && !slices.Contains(nodeUsernames, m.Username):
		// (A STANDARD entry's username is refused any reserved prefix below.)
		return refused(m, "%s maps %s to username %s, a system: username that only system:node:{{EC2PrivateDNSName}} may give", m.Source, m.RoleARN, username)
	case adminUsernames[username] != "":
		return refused(m, "%s maps %s to username %s, %s", m.Source, m.RoleARN, username, adminUsernames[username])
	case m.AdminUsers[username] != "":
		return refused(m, "%s maps %s to username %s, which is bound to cluster-admin by ClusterRoleBinding %s", m.Source, m.RoleARN, username, m.AdminUsers[username])
	}
	return nil
}

var (
	instanceIDRE = regexp.MustCompile(`^i-(\w{8}|\w{17})$`)
	templateRE   = regexp.MustCompile(`\{\{[^}]*\}\}`)
)

// Map finds the caller's mapping and renders it. An IAM user is mapped by a STANDARD
// access entry only, and only such an entry's access policies add their groups.
// {{EC2PrivateDNSName}} is filled only
// when the session names an instance that is running and whose instance profile has the
// token's role: whoever can assume the node role can choose any session name, but cannot
// become an instance that does not carry the role or no longer runs.
func Map(ctx context.Context, c *Caller, mappings []RoleMapping, instances Instances) (*User, error) {
	m, err := findMapping(c, mappings)
	if err != nil {
		return nil, err
	}
	if err := checkRoleID(ctx, c, m); err != nil {
		return nil, err
	}
	var inst *inventory.Instance
	render := func(tmpl string) (string, error) {
		var err error
		out := templateRE.ReplaceAllStringFunc(tmpl, func(t string) string {
			switch t {
			case "{{AccountID}}":
				return c.Account
			case "{{SessionName}}":
				return strings.ReplaceAll(c.SessionName, "@", "-")
			case "{{SessionNameRaw}}":
				return c.SessionName
			case "{{AccessKeyID}}":
				return c.AccessKeyID
			case "{{EC2PrivateDNSName}}", "{{PrivateDNSName}}":
				if inst == nil {
					inst, err = instanceOf(ctx, c, instances)
				}
				if inst != nil {
					return inst.PrivateDNSName
				}
				return ""
			}
			if err == nil {
				err = denied("mapping of %s uses unknown template %s", m.RoleARN, t)
			}
			return ""
		})
		return out, err
	}
	username, err := render(m.Username)
	if err != nil {
		return nil, err
	}
	if err := checkUsername(m, username); err != nil {
		return nil, err
	}
	u := &User{
		Username: username,
		UID:      fmt.Sprintf("aws-iam-authenticator:%s:%s", c.Account, c.UserID),
		Mapping:  m.Source,
		Standard: m.Standard,
		Policies: m.Policies,
		Instance: inst, RequireInstanceProof: m.RequireInstanceProof,
		Extra: map[string][]string{
			"arn": {c.ARN}, "canonicalArn": {c.CanonicalARN}, "sessionName": {c.SessionName},
			"accessKeyId": {c.AccessKeyID}, "principalId": {c.UserID},
		},
	}
	for _, g := range m.Groups {
		rg, err := render(g)
		if err != nil {
			return nil, err
		}
		if err := checkGroup(m, rg); err != nil {
			return nil, err
		}
		u.Groups = append(u.Groups, rg)
	}
	if m.Standard {
		if nodejoinv1alpha1.ReservedPrefix(u.Username) != "" {
			return nil, refused(m, "%s maps %s to username %s: a STANDARD entry's username may not start with %s", m.Source, c.CanonicalARN, u.Username, nodejoinv1alpha1.ReservedPrefix(u.Username))
		}
		u.Groups = append(u.Groups, m.PolicyGroups...)
	}
	return u, nil
}

// findMapping is the caller's mapping (the last naming it), unless it may not be used.
func findMapping(c *Caller, mappings []RoleMapping) (*RoleMapping, error) {
	var m *RoleMapping
	for i := range mappings {
		if strings.EqualFold(mappings[i].RoleARN, c.CanonicalARN) {
			m = &mappings[i]
		}
	}
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: %w", ErrDenied, unmappedError{arn: c.CanonicalARN, kind: c.kind()})
	case m.Refused != "":
		return nil, refused(m, "the mapping of %s %s is refused: %s", c.kind(), c.CanonicalARN, m.Refused)
	case c.Kind == CallerUser && !m.Standard:
		return nil, refused(m, "%s maps user %s, but only a STANDARD access entry may map an IAM user", m.Source, c.CanonicalARN)
	}
	return m, nil
}

// checkGroup refuses a rendered group the mapping may not grant: an access policy's
// group (only a STANDARD entry's policies grant those, never its groups), a reserved
// prefix in a STANDARD entry's groups, a system: group other than the node groups.
func checkGroup(m *RoleMapping, group string) error {
	switch {
	case strings.HasPrefix(group, nodejoinv1alpha1.AccessPolicyGroupPrefix):
		return refused(m, "%s grants group %s, which only an access policy of a STANDARD access entry grants", m.Source, group)
	case m.Standard && nodejoinv1alpha1.ReservedPrefix(group) != "":
		return refused(m, "%s grants group %s: a STANDARD entry's groups may not start with %s", m.Source, group, nodejoinv1alpha1.ReservedPrefix(group))
	case strings.HasPrefix(group, "system:") && !slices.Contains(nodeGroups, group):
		return refused(m, "mapping of %s grants group %s, which nodejoin never grants through a role", m.RoleARN, group)
	}
	return nil
}

func instanceOf(ctx context.Context, c *Caller, instances Instances) (*inventory.Instance, error) {
	if !instanceIDRE.MatchString(c.SessionName) {
		return nil, denied("session name %q of %s is not an instance ID", c.SessionName, c.CanonicalARN)
	}
	if instances == nil {
		return nil, denied("no instance inventory to resolve {{EC2PrivateDNSName}}")
	}
	inst, err := instances.Instance(ctx, c.SessionName)
	if errors.Is(err, inventory.ErrNotFound) {
		return nil, denied("instance %s is unknown", c.SessionName)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up instance %s: %w", c.SessionName, err)
	}
	switch {
	case inst.State != "running":
		return nil, denied("instance %s is %s, not running", inst.ID, inst.State)
	case inst.PrivateDNSName == "":
		return nil, denied("instance %s has no private DNS name", inst.ID)
	}
	if err := sameRole(c, inst); err != nil {
		return nil, err
	}
	return inst, nil
}

// iamRoleARNRE is an IAM role ARN: partition, account, and the name after any path.
var iamRoleARNRE = regexp.MustCompile(`^arn:(` + nodejoinv1alpha1.PartitionPattern + `):iam::(\d{12}):role/(?:[\w+=,.@-]+/)*([\w+=,.@-]+)$`)

// sameRole checks that the instance's instance profile carries the token's role: the
// same partition, account and role name. An assumed-role ARN does not carry the role's
// path, so the path of the instance's role ARN is not compared; a role name is unique
// within its account whatever the path, so partition, account and name name one role.
// With only the instance's account known (a file inventory without roleArn), the account
// and the role name are compared; with neither, nothing can be and the token is denied.
func sameRole(c *Caller, inst *inventory.Instance) error {
	partition := ""
	if parts := strings.SplitN(c.CanonicalARN, ":", 3); len(parts) == 3 {
		partition = parts[1]
	}
	if inst.AccountID != "" && inst.AccountID != c.Account {
		return denied("instance %s belongs to account %s, not the token's account %s", inst.ID, inst.AccountID, c.Account)
	}
	switch {
	case inst.RoleARN != "":
		m := iamRoleARNRE.FindStringSubmatch(inst.RoleARN)
		if m == nil || m[1] != partition || m[2] != c.Account || m[3] != c.Role {
			return denied("instance %s has role %s, not the token's role %s", inst.ID, inst.RoleARN, c.CanonicalARN)
		}
	case inst.AccountID != "":
		if inst.Role != c.Role {
			return denied("instance %s has role %q, not the token's role %q", inst.ID, inst.Role, c.Role)
		}
	default:
		return denied("the inventory says neither the account nor the role ARN of instance %s, so the token's role %s cannot be matched", inst.ID, c.CanonicalARN)
	}
	return nil
}
