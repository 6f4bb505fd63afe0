package eks

import (
	"context"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// A static cluster holds no access entries, so it has none to update or give policies.

func (s *static) UpdateAccessEntry(ctx context.Context, cluster, principal string, _ *eksapi.UpdateAccessEntryRequest) (eksapi.AccessEntry, error) {
	return s.DescribeAccessEntry(ctx, cluster, principal)
}

func (s *static) AssociateAccessPolicy(ctx context.Context, cluster, principal string, _ *eksapi.AssociateAccessPolicyRequest) (eksapi.AssociatedAccessPolicy, error) {
	_, err := s.DescribeAccessEntry(ctx, cluster, principal)
	return eksapi.AssociatedAccessPolicy{}, err
}

func (s *static) DisassociateAccessPolicy(ctx context.Context, cluster, principal, _ string) error {
	_, err := s.DescribeAccessEntry(ctx, cluster, principal)
	return err
}

func (s *static) ListAssociatedAccessPolicies(ctx context.Context, cluster, principal string) ([]eksapi.AssociatedAccessPolicy, error) {
	_, err := s.DescribeAccessEntry(ctx, cluster, principal)
	return nil, err
}
