package resource

// This file holds AWS::EKS::AccessEntry.

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// accessEntryType is AWS::EKS::AccessEntry. Ref is <cluster>|<principal ARN>, as AWS's.
type accessEntryType struct{ cl Clients }

type accessPolicy struct {
	arn   string
	scope ekstypes.AccessScope
}

type accessEntryProps struct {
	in       eks.CreateAccessEntryInput
	policies []accessPolicy
}

func readAccessEntry(c *Call, props map[string]any) (accessEntryProps, error) {
	p := newPropReader(c)
	p.known(props, "#", "AccessPolicies", "ClusterName", "KubernetesGroups", "PrincipalArn", "Tags", "Type", "Username")
	p.required(props, "#", "ClusterName", "PrincipalArn")
	out := accessEntryProps{in: eks.CreateAccessEntryInput{ClusterName: p.strPtr(props, "#", "ClusterName"),
		PrincipalArn: p.strPtr(props, "#", "PrincipalArn"), Type: p.strPtr(props, "#", "Type"), Username: p.strPtr(props, "#", "Username"),
		KubernetesGroups: p.strList(props, "#", "KubernetesGroups")}}
	for _, t := range p.ec2Tags(props, "#", "Tags") {
		if out.in.Tags == nil {
			out.in.Tags = map[string]string{}
		}
		out.in.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for i, ap := range p.objList(props, "#", "AccessPolicies") {
		at := fmt.Sprintf("#/AccessPolicies/%d", i)
		p.known(ap, at, "AccessScope", "PolicyArn")
		p.required(ap, at, "AccessScope", "PolicyArn")
		pol := accessPolicy{arn: p.str(ap, at, "PolicyArn")}
		if s := p.obj(ap, at, "AccessScope"); s != nil {
			p.known(s, at+"/AccessScope", "Namespaces", "Type")
			p.required(s, at+"/AccessScope", "Type")
			pol.scope = ekstypes.AccessScope{Type: ekstypes.AccessScopeType(p.str(s, at+"/AccessScope", "Type")), Namespaces: p.strList(s, at+"/AccessScope", "Namespaces")}
		}
		out.policies = append(out.policies, pol)
	}
	return out, p.err
}

func (t *accessEntryType) Create(ctx context.Context, c *Call) (Result, error) {
	ap, err := readAccessEntry(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	// The stack's tags are the entry's too; the aws: ones are EKS's reserved keys.
	for k, v := range c.Tags {
		if _, given := ap.in.Tags[k]; !given && !strings.HasPrefix(k, "aws:") {
			if ap.in.Tags == nil {
				ap.in.Tags = map[string]string{}
			}
			ap.in.Tags[k] = v
		}
	}
	out, err := t.cl.EKS.CreateAccessEntry(ctx, &ap.in)
	if err != nil {
		return Result{}, serviceFailure("Eks", err)
	}
	res := Result{PhysicalID: aws.ToString(ap.in.ClusterName) + "|" + aws.ToString(ap.in.PrincipalArn),
		Attributes: map[string]string{"AccessEntryArn": aws.ToString(out.AccessEntry.AccessEntryArn)}}
	for _, pol := range ap.policies {
		if err := t.associate(ctx, ap.in.ClusterName, ap.in.PrincipalArn, pol); err != nil {
			// Not left half made: the entry without its policies goes.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = t.Delete(dctx, c, res)
			return Result{}, err
		}
	}
	return res, nil
}

func (t *accessEntryType) associate(ctx context.Context, cluster, principal *string, pol accessPolicy) error {
	_, err := t.cl.EKS.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: principal,
		PolicyArn: aws.String(pol.arn), AccessScope: &pol.scope})
	return serviceFailure("Eks", err)
}

// Update changes the groups and username with UpdateAccessEntry and the access
// policies with AssociateAccessPolicy and DisassociateAccessPolicy; another cluster,
// principal or type needs a new entry.
func (t *accessEntryType) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	np, err := readAccessEntry(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	op, err := readAccessEntry(c, oldProps)
	if err != nil {
		return Result{}, err
	}
	for _, k := range []string{"ClusterName", "PrincipalArn", "Type"} {
		if !reflect.DeepEqual(c.Properties[k], oldProps[k]) {
			return Result{}, ErrReplace
		}
	}
	if !reflect.DeepEqual(c.Properties["Tags"], oldProps["Tags"]) {
		return Result{}, handlerErrorf("Resource handler returned message: \"Changing the Tags of access entry %s is not supported by the local EKS (it has no TagResource)\"", old.PhysicalID)
	}
	cluster, principal := np.in.ClusterName, np.in.PrincipalArn
	if !reflect.DeepEqual(np.in.KubernetesGroups, op.in.KubernetesGroups) || !reflect.DeepEqual(np.in.Username, op.in.Username) {
		if _, err := t.cl.EKS.UpdateAccessEntry(ctx, &eks.UpdateAccessEntryInput{ClusterName: cluster, PrincipalArn: principal,
			KubernetesGroups: np.in.KubernetesGroups, Username: np.in.Username}); err != nil {
			return Result{}, serviceFailure("Eks", err)
		}
	}
	for _, pol := range op.policies {
		if !slices.ContainsFunc(np.policies, func(n accessPolicy) bool { return n.arn == pol.arn }) {
			if _, err := t.cl.EKS.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{ClusterName: cluster, PrincipalArn: principal,
				PolicyArn: aws.String(pol.arn)}); err != nil && serviceErrorCode(err) != "ResourceNotFoundException" {
				return Result{}, serviceFailure("Eks", err)
			}
		}
	}
	for _, pol := range np.policies {
		if !slices.ContainsFunc(op.policies, func(o accessPolicy) bool { return reflect.DeepEqual(o, pol) }) {
			if err := t.associate(ctx, cluster, principal, pol); err != nil {
				return Result{}, err
			}
		}
	}
	return old, nil
}

func (t *accessEntryType) Delete(ctx context.Context, _ *Call, r Result) error {
	cluster, principal, ok := strings.Cut(r.PhysicalID, "|")
	if !ok {
		return nil // never made
	}
	_, err := t.cl.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal)})
	if err != nil && serviceErrorCode(err) != "ResourceNotFoundException" {
		return serviceFailure("Eks", err)
	}
	return nil
}
