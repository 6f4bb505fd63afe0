package eksbackend

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/retry"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// The access policies of a STANDARD entry are the entry's spec.accessPolicies: the
// token webhook reads them from the same object (one decoder), and the RBAC controller
// binds the groups they grant (v1alpha1.AccessPolicyGroup).

// modifyEntry applies change to the principal's entry and writes it, again on a
// conflict with another writer, so that two associations made at once both stay.
func (b *Backend) modifyEntry(ctx context.Context, cluster, principal string, change func(e *v1alpha1.NodeAccessEntry) error) (*v1alpha1.NodeAccessEntry, error) {
	var out *v1alpha1.NodeAccessEntry
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		e, err := b.findEntry(ctx, cluster, principal)
		if err != nil {
			return err
		}
		if err := change(e); err != nil {
			return err
		}
		if errs := e.Validate(); len(errs) > 0 {
			return eksapi.InvalidParameter("%s", eksEntryFields(errs.ToAggregate().Error()))
		}
		if err := b.c.Update(ctx, e); err != nil {
			if apierrors.IsInvalid(err) {
				return eksapi.InvalidParameter("the access entry is not valid: %s", invalidText(err))
			}
			return err
		}
		out = e
		return nil
	})
	if err != nil {
		if _, ok := eksapi.AsError(err); ok {
			return nil, err
		}
		if apierrors.IsNotFound(err) {
			return nil, eksapi.NotFound("The specified principalArn could not be found: %s.", principal)
		}
		return nil, fmt.Errorf("updating the access entry of %s: %w", principal, err)
	}
	return out, nil
}

// standardOnly refuses to give a node entry what only STANDARD entries hold.
func standardOnly(e *v1alpha1.NodeAccessEntry, what string) error {
	if e.Spec.Type != v1alpha1.AccessEntryStandard {
		t := e.Spec.Type
		if t == "" {
			t = v1alpha1.AccessEntryEC2Linux
		}
		return eksapi.InvalidParameter("The access entry of %s has type %s, which takes no %s: only STANDARD entries do (a node entry gets the node identity and nothing else).", e.Spec.PrincipalARN, t, what)
	}
	return nil
}

// UpdateAccessEntry changes a STANDARD entry's groups and username. As on EKS, a field
// left out keeps its value.
func (b *Backend) UpdateAccessEntry(ctx context.Context, cluster, principal string, in *eksapi.UpdateAccessEntryRequest) (eksapi.AccessEntry, error) {
	e, err := b.modifyEntry(ctx, cluster, principal, func(e *v1alpha1.NodeAccessEntry) error {
		if err := standardOnly(e, "username or kubernetesGroups"); err != nil {
			return err
		}
		if in.KubernetesGroups != nil {
			e.Spec.KubernetesGroups = in.KubernetesGroups
		}
		if in.Username != "" {
			e.Spec.Username = in.Username
		}
		if e.Annotations == nil {
			e.Annotations = map[string]string{}
		}
		e.Annotations[modifiedAtAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		return nil
	})
	if err != nil {
		return eksapi.AccessEntry{}, err
	}
	return b.accessEntry(e), nil
}

// AssociateAccessPolicy associates an access policy with a STANDARD entry in a scope;
// associating a policy the entry has already replaces its scope, as EKS does.
func (b *Backend) AssociateAccessPolicy(ctx context.Context, cluster, principal string, in *eksapi.AssociateAccessPolicyRequest) (eksapi.AssociatedAccessPolicy, error) {
	if _, ok := v1alpha1.LookupAccessPolicy(in.PolicyArn); !ok {
		return eksapi.AssociatedAccessPolicy{}, eksapi.NotFound("The specified policyArn could not be found: %s. The local EKS associates %s.", in.PolicyArn, policyNames())
	}
	scope := v1alpha1.AccessScope{Type: v1alpha1.AccessScopeType(in.AccessScope.Type), Namespaces: in.AccessScope.Namespaces}
	if errs := v1alpha1.ValidateAccessScope(scope, field.NewPath("accessScope")); len(errs) > 0 {
		return eksapi.AssociatedAccessPolicy{}, eksapi.InvalidParameter("%s", errs.ToAggregate().Error())
	}
	var assoc v1alpha1.AccessPolicyAssociation
	_, err := b.modifyEntry(ctx, cluster, principal, func(e *v1alpha1.NodeAccessEntry) error {
		if err := standardOnly(e, "access policies"); err != nil {
			return err
		}
		now := metav1.NewTime(time.Now().UTC().Truncate(time.Millisecond))
		i := slices.IndexFunc(e.Spec.AccessPolicies, func(a v1alpha1.AccessPolicyAssociation) bool { return a.PolicyARN == in.PolicyArn })
		if i < 0 {
			e.Spec.AccessPolicies = append(e.Spec.AccessPolicies, v1alpha1.AccessPolicyAssociation{PolicyARN: in.PolicyArn, AssociatedAt: now})
			i = len(e.Spec.AccessPolicies) - 1
		}
		e.Spec.AccessPolicies[i].AccessScope, e.Spec.AccessPolicies[i].ModifiedAt = scope, now
		assoc = e.Spec.AccessPolicies[i]
		return nil
	})
	if err != nil {
		return eksapi.AssociatedAccessPolicy{}, err
	}
	return associated(assoc), nil
}

// DisassociateAccessPolicy removes a policy from an entry.
func (b *Backend) DisassociateAccessPolicy(ctx context.Context, cluster, principal, policyARN string) error {
	_, err := b.modifyEntry(ctx, cluster, principal, func(e *v1alpha1.NodeAccessEntry) error {
		i := slices.IndexFunc(e.Spec.AccessPolicies, func(a v1alpha1.AccessPolicyAssociation) bool { return a.PolicyARN == policyARN })
		if i < 0 {
			return eksapi.NotFound("The specified policyArn %s is not associated with the access entry of %s.", policyARN, principal)
		}
		e.Spec.AccessPolicies = slices.Delete(e.Spec.AccessPolicies, i, i+1)
		return nil
	})
	return err
}

// ListAssociatedAccessPolicies returns an entry's policies, sorted by ARN; a node entry
// has none.
func (b *Backend) ListAssociatedAccessPolicies(ctx context.Context, cluster, principal string) ([]eksapi.AssociatedAccessPolicy, error) {
	e, err := b.findEntry(ctx, cluster, principal)
	if err != nil {
		return nil, err
	}
	out := make([]eksapi.AssociatedAccessPolicy, 0, len(e.Spec.AccessPolicies))
	for _, a := range e.Spec.AccessPolicies {
		out = append(out, associated(a))
	}
	slices.SortFunc(out, func(x, y eksapi.AssociatedAccessPolicy) int {
		switch {
		case x.PolicyArn < y.PolicyArn:
			return -1
		case x.PolicyArn > y.PolicyArn:
			return 1
		}
		return 0
	})
	return out, nil
}

func associated(a v1alpha1.AccessPolicyAssociation) eksapi.AssociatedAccessPolicy {
	return eksapi.AssociatedAccessPolicy{
		PolicyArn:    a.PolicyARN,
		AccessScope:  eksapi.AccessScope{Type: string(a.AccessScope.Type), Namespaces: append([]string{}, a.AccessScope.Namespaces...)},
		AssociatedAt: eksapi.NewTime(a.AssociatedAt.Time), ModifiedAt: eksapi.NewTime(a.ModifiedAt.Time),
	}
}

func policyNames() string {
	var s string
	for i, p := range v1alpha1.AccessPolicies {
		if i > 0 {
			s += ", "
		}
		s += p.ARN()
	}
	return s
}

// ClusterAdminPolicyARN is EKS's AmazonEKSClusterAdminPolicy.
var ClusterAdminPolicyARN = v1alpha1.AccessPolicies[0].ARN()

// EnsureClusterCreatorAdmin gives principal what EKS gives a cluster's creator with
// bootstrapClusterCreatorAdminPermissions: a STANDARD access entry with
// AmazonEKSClusterAdminPolicy in the cluster scope. It is idempotent: an entry that
// exists keeps its groups and username and gets the policy if it lacks it.
func (b *Backend) EnsureClusterCreatorAdmin(ctx context.Context, principal string) error {
	cluster := b.info.Cluster.Name
	_, err := b.CreateAccessEntry(ctx, cluster, &eksapi.CreateAccessEntryRequest{PrincipalArn: principal, Type: eksapi.AccessEntryStandard})
	if e, ok := eksapi.AsError(err); err != nil && (!ok || e.Code != eksapi.CodeResourceInUse) {
		return fmt.Errorf("creating the administrator's access entry: %w", err)
	}
	if _, err := b.AssociateAccessPolicy(ctx, cluster, principal, &eksapi.AssociateAccessPolicyRequest{
		PolicyArn: ClusterAdminPolicyARN, AccessScope: &eksapi.AccessScope{Type: string(v1alpha1.AccessScopeCluster)},
	}); err != nil {
		return fmt.Errorf("associating %s with the administrator's access entry: %w", ClusterAdminPolicyARN, err)
	}
	return nil
}
