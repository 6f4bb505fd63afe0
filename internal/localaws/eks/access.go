package eks

import (
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// The local EKS's access entries admit nodes only: NodeAccessEntry objects.
func (e *EKS) createAccessEntry(c *call) (any, error) {
	var in eksapi.CreateAccessEntryRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	switch {
	case !roleARNRE.MatchString(in.PrincipalArn):
		return nil, eksapi.InvalidParameter("principalArn: %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>); node access entries admit instance roles", in.PrincipalArn)
	case in.Type != eksapi.AccessEntryEC2Linux && in.Type != eksapi.AccessEntryEC2Windows:
		t := in.Type
		if t == "" {
			t = "STANDARD (the default)"
		}
		return nil, eksapi.InvalidParameter("type: the local EKS supports access entries of type EC2_LINUX and EC2_WINDOWS (nodes), not %s", t)
	case len(in.KubernetesGroups) > 0:
		return nil, eksapi.InvalidParameter("kubernetesGroups: an access entry of type %s gets the node groups; it takes no kubernetesGroups", in.Type)
	case in.Username != "":
		return nil, eksapi.InvalidParameter("username: an access entry of type %s gets the node's username; it takes no username", in.Type)
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

// listAssociatedAccessPolicies answers for an entry that exists: node entries (EC2_LINUX,
// EC2_WINDOWS, the only types the local EKS holds) can have no access policy, as on EKS.
// `eksctl get accessentry` asks it of every entry.
func (e *EKS) listAssociatedAccessPolicies(c *call) (any, error) {
	if _, err := readPage(c.query); err != nil {
		return nil, err
	}
	ae, err := c.backend.DescribeAccessEntry(c.ctx, c.params[0], c.params[1])
	if err != nil {
		return nil, err
	}
	return struct {
		ClusterName              string     `json:"clusterName"`
		PrincipalArn             string     `json:"principalArn"`
		AssociatedAccessPolicies []struct{} `json:"associatedAccessPolicies"`
	}{ae.ClusterName, ae.PrincipalArn, []struct{}{}}, nil
}

func (e *EKS) deleteAccessEntry(c *call) (any, error) {
	if err := c.backend.DeleteAccessEntry(c.ctx, c.params[0], c.params[1]); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (e *EKS) listAccessEntries(c *call) (any, error) {
	if c.query.Get("associatedPolicyArn") != "" {
		return nil, eksapi.InvalidParameter("associatedPolicyArn: the local EKS's node access entries have no access policies")
	}
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	arns, err := c.backend.ListAccessEntries(c.ctx, c.params[0])
	if err != nil {
		return nil, err
	}
	out, next := p.cut(arns)
	return struct {
		AccessEntries []string `json:"accessEntries"`
		NextToken     string   `json:"nextToken,omitempty"`
	}{out, next}, nil
}
