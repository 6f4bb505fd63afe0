package eks

import (
	"context"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// The fake's STANDARD entries: policies kept per principal, as the wire hands them.

func (f *fake) UpdateAccessEntry(ctx context.Context, cluster, principal string, in *eksapi.UpdateAccessEntryRequest) (eksapi.AccessEntry, error) {
	e, err := f.DescribeAccessEntry(ctx, cluster, principal)
	if err != nil {
		return e, err
	}
	if in.KubernetesGroups != nil {
		e.KubernetesGroups = in.KubernetesGroups
	}
	if in.Username != "" {
		e.Username = in.Username
	}
	f.mu.Lock()
	f.entries[principal] = e
	f.mu.Unlock()
	return e, nil
}

func (f *fake) AssociateAccessPolicy(ctx context.Context, cluster, principal string, in *eksapi.AssociateAccessPolicyRequest) (eksapi.AssociatedAccessPolicy, error) {
	if _, err := f.DescribeAccessEntry(ctx, cluster, principal); err != nil {
		return eksapi.AssociatedAccessPolicy{}, err
	}
	a := eksapi.AssociatedAccessPolicy{PolicyArn: in.PolicyArn, AccessScope: *in.AccessScope, AssociatedAt: created, ModifiedAt: created}
	f.mu.Lock()
	defer f.mu.Unlock()
	pols := slices.DeleteFunc(f.policies[principal], func(p eksapi.AssociatedAccessPolicy) bool { return p.PolicyArn == in.PolicyArn })
	pols = append(pols, a)
	slices.SortFunc(pols, func(x, y eksapi.AssociatedAccessPolicy) int { return strings.Compare(x.PolicyArn, y.PolicyArn) })
	f.policies[principal] = pols
	return a, nil
}

func (f *fake) DisassociateAccessPolicy(ctx context.Context, cluster, principal, policy string) error {
	pols, err := f.ListAssociatedAccessPolicies(ctx, cluster, principal)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(pols, func(p eksapi.AssociatedAccessPolicy) bool { return p.PolicyArn == policy })
	if i < 0 {
		return eksapi.NotFound("The specified policyArn %s is not associated.", policy)
	}
	f.mu.Lock()
	f.policies[principal] = slices.Delete(pols, i, i+1)
	f.mu.Unlock()
	return nil
}

func (f *fake) ListAssociatedAccessPolicies(ctx context.Context, cluster, principal string) ([]eksapi.AssociatedAccessPolicy, error) {
	if _, err := f.DescribeAccessEntry(ctx, cluster, principal); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.policies[principal]), nil
}
