package eks

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// AccessPolicyBackend is what a Backend does for STANDARD access entries: change their
// username and groups, and associate EKS access policies with them.
type AccessPolicyBackend interface {
	UpdateAccessEntry(ctx context.Context, cluster, principalARN string, in *eksapi.UpdateAccessEntryRequest) (eksapi.AccessEntry, error)
	AssociateAccessPolicy(ctx context.Context, cluster, principalARN string, in *eksapi.AssociateAccessPolicyRequest) (eksapi.AssociatedAccessPolicy, error)
	DisassociateAccessPolicy(ctx context.Context, cluster, principalARN, policyARN string) error
	// ListAssociatedAccessPolicies returns the policies sorted by ARN.
	ListAssociatedAccessPolicies(ctx context.Context, cluster, principalARN string) ([]eksapi.AssociatedAccessPolicy, error)
}

// principalARNRE is an IAM user's or role's ARN: what an access entry may name. An
// assumed-role session, a group or a root ARN is not a principal EKS takes.
var principalARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:(role|user)/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)

// reservedPrefixes are the prefixes EKS refuses in a STANDARD entry's groups and
// username, and nodejoin's own (its access-policy groups).
var reservedPrefixes = []string{"system:", "eks:", "aws:", "amazon:", "iam:", "nodejoin:"}

func reserved(s string) string {
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(strings.ToLower(s), p) {
			return p
		}
	}
	return ""
}

// checkStandard checks a STANDARD entry's username and groups on the wire.
func checkStandard(username string, groups []string) error {
	if p := reserved(username); p != "" {
		return eksapi.InvalidParameter("username: %q starts with %s, which EKS reserves; choose another username", username, p)
	}
	if len(username) > 256 {
		return eksapi.InvalidParameter("username: at most 256 characters, not %d", len(username))
	}
	if len(groups) > 100 {
		return eksapi.InvalidParameter("kubernetesGroups: at most 100 groups, not %d", len(groups))
	}
	for i, g := range groups {
		if p := reserved(g); p != "" {
			return eksapi.InvalidParameter("kubernetesGroups[%d]: group %q starts with %s, which is reserved: an access entry reaches an administrator's rights through an access policy (AssociateAccessPolicy), never through a system: group such as system:masters", i, g, p)
		}
		if g == "" || len(g) > 256 {
			return eksapi.InvalidParameter("kubernetesGroups[%d]: a group has 1 to 256 characters", i)
		}
	}
	return nil
}

// createAccessEntry creates a node entry (EC2_LINUX, EC2_WINDOWS: an instance role, no
// username or groups) or a STANDARD one (the default type, as on EKS: an IAM user or
// role, with optional username and groups).
func (e *EKS) createAccessEntry(c *call) (any, error) {
	var in eksapi.CreateAccessEntryRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	if in.Type == "" {
		in.Type = eksapi.AccessEntryStandard
	}
	switch in.Type {
	case eksapi.AccessEntryStandard:
		if !principalARNRE.MatchString(in.PrincipalArn) {
			return nil, eksapi.InvalidParameter("principalArn: %q is not an IAM user or role ARN (arn:aws:iam::<account>:user/<name> or :role/<name>); for a role session, name its role", in.PrincipalArn)
		}
		if err := checkStandard(in.Username, in.KubernetesGroups); err != nil {
			return nil, err
		}
	case eksapi.AccessEntryEC2Linux, eksapi.AccessEntryEC2Windows:
		switch {
		case !roleARNRE.MatchString(in.PrincipalArn):
			return nil, eksapi.InvalidParameter("principalArn: %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>); node access entries admit instance roles", in.PrincipalArn)
		case len(in.KubernetesGroups) > 0:
			return nil, eksapi.InvalidParameter("kubernetesGroups: an access entry of type %s gets the node groups; it takes no kubernetesGroups", in.Type)
		case in.Username != "":
			return nil, eksapi.InvalidParameter("username: an access entry of type %s gets the node's username; it takes no username", in.Type)
		}
	default:
		return nil, eksapi.InvalidParameter("type: the local EKS supports access entries of type STANDARD, EC2_LINUX and EC2_WINDOWS, not %s", in.Type)
	}
	if err := validateTags(in.Tags); err != nil {
		return nil, err
	}
	ae, err := c.backend.CreateAccessEntry(c.ctx, c.params[0], &in)
	if err != nil {
		return nil, err
	}
	return accessEntryOut{ae}, nil
}

type accessEntryOut struct {
	AccessEntry eksapi.AccessEntry `json:"accessEntry"`
}

func (e *EKS) describeAccessEntry(c *call) (any, error) {
	ae, err := c.backend.DescribeAccessEntry(c.ctx, c.params[0], c.params[1])
	if err != nil {
		return nil, err
	}
	return accessEntryOut{ae}, nil
}

func (e *EKS) updateAccessEntry(c *call) (any, error) {
	var in eksapi.UpdateAccessEntryRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	if err := checkStandard(in.Username, in.KubernetesGroups); err != nil {
		return nil, err
	}
	ae, err := c.backend.UpdateAccessEntry(c.ctx, c.params[0], c.params[1], &in)
	if err != nil {
		return nil, err
	}
	return accessEntryOut{ae}, nil
}

// listAssociatedAccessPolicies lists an entry's policies; node entries have none, as on
// EKS. `eksctl get accessentry` asks it of every entry.
func (e *EKS) listAssociatedAccessPolicies(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	pols, err := c.backend.ListAssociatedAccessPolicies(c.ctx, c.params[0], c.params[1])
	if err != nil {
		return nil, err
	}
	arns := make([]string, len(pols))
	for i, pol := range pols {
		arns[i] = pol.PolicyArn
	}
	page, next := p.cut(arns)
	out := make([]eksapi.AssociatedAccessPolicy, 0, len(page))
	for _, pol := range pols {
		if slices.Contains(page, pol.PolicyArn) {
			out = append(out, pol)
		}
	}
	return struct {
		ClusterName              string                          `json:"clusterName"`
		PrincipalArn             string                          `json:"principalArn"`
		AssociatedAccessPolicies []eksapi.AssociatedAccessPolicy `json:"associatedAccessPolicies"`
		NextToken                string                          `json:"nextToken,omitempty"`
	}{c.params[0], c.params[1], out, next}, nil
}

// checkPolicyARN refuses anything but one of EKS's access policies, naming them.
func checkPolicyARN(arn string) error {
	name, ok := strings.CutPrefix(arn, eksapi.AccessPolicyARNPrefix)
	if !ok || !slices.Contains(eksapi.AccessPolicyNames, name) {
		return eksapi.NotFound("The specified policyArn could not be found: %q. The local EKS associates %s%s.", arn,
			eksapi.AccessPolicyARNPrefix, strings.Join(eksapi.AccessPolicyNames, ", "+eksapi.AccessPolicyARNPrefix))
	}
	return nil
}

func (e *EKS) associateAccessPolicy(c *call) (any, error) {
	var in eksapi.AssociateAccessPolicyRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	switch {
	case in.PolicyArn == "":
		return nil, eksapi.InvalidParameter("policyArn is required")
	case in.AccessScope == nil:
		return nil, eksapi.InvalidParameter("accessScope is required: {\"type\": \"cluster\"} or {\"type\": \"namespace\", \"namespaces\": [...]}")
	}
	if err := checkPolicyARN(in.PolicyArn); err != nil {
		return nil, err
	}
	switch in.AccessScope.Type {
	case "cluster":
		if len(in.AccessScope.Namespaces) > 0 {
			return nil, eksapi.InvalidParameter("accessScope.namespaces: a cluster scope names no namespaces")
		}
	case "namespace":
		if len(in.AccessScope.Namespaces) == 0 {
			return nil, eksapi.InvalidParameter("accessScope.namespaces: a namespace scope names at least one namespace")
		}
	default:
		return nil, eksapi.InvalidParameter("accessScope.type: want cluster or namespace, not %q", in.AccessScope.Type)
	}
	a, err := c.backend.AssociateAccessPolicy(c.ctx, c.params[0], c.params[1], &in)
	if err != nil {
		return nil, err
	}
	return struct {
		ClusterName            string                        `json:"clusterName"`
		PrincipalArn           string                        `json:"principalArn"`
		AssociatedAccessPolicy eksapi.AssociatedAccessPolicy `json:"associatedAccessPolicy"`
	}{c.params[0], c.params[1], a}, nil
}

func (e *EKS) disassociateAccessPolicy(c *call) (any, error) {
	if err := checkPolicyARN(c.params[2]); err != nil {
		return nil, err
	}
	if err := c.backend.DisassociateAccessPolicy(c.ctx, c.params[0], c.params[1], c.params[2]); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// listAccessPolicies names the policies the local EKS associates.
func (e *EKS) listAccessPolicies(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	names, next := p.cut(eksapi.AccessPolicyNames)
	out := make([]eksapi.AccessPolicy, 0, len(names))
	for _, n := range names {
		out = append(out, eksapi.AccessPolicy{Name: n, Arn: eksapi.AccessPolicyARNPrefix + n})
	}
	return struct {
		AccessPolicies []eksapi.AccessPolicy `json:"accessPolicies"`
		NextToken      string                `json:"nextToken,omitempty"`
	}{out, next}, nil
}

func (e *EKS) deleteAccessEntry(c *call) (any, error) {
	if err := c.backend.DeleteAccessEntry(c.ctx, c.params[0], c.params[1]); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// listAccessEntries lists the entries' principals; with associatedPolicyArn, only those
// of the entries that have the policy.
func (e *EKS) listAccessEntries(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	arns, err := c.backend.ListAccessEntries(c.ctx, c.params[0])
	if err != nil {
		return nil, err
	}
	if policy := c.query.Get("associatedPolicyArn"); policy != "" {
		if err := checkPolicyARN(policy); err != nil {
			return nil, err
		}
		var with []string
		for _, arn := range arns {
			pols, err := c.backend.ListAssociatedAccessPolicies(c.ctx, c.params[0], arn)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(pols, func(a eksapi.AssociatedAccessPolicy) bool { return a.PolicyArn == policy }) {
				with = append(with, arn)
			}
		}
		arns = with
	}
	out, next := p.cut(arns)
	if out == nil {
		out = []string{}
	}
	return struct {
		AccessEntries []string `json:"accessEntries"`
		NextToken     string   `json:"nextToken,omitempty"`
	}{out, next}, nil
}
