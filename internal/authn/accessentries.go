package authn

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// EntryMappings turns NodeAccessEntries into mappings: a node entry's to the node
// identity, a STANDARD entry's to its username, groups and access policies' groups;
// each with the role ID the entry pinned (nodejoinv1alpha1.RoleIDAnnotation), if any. An entry that does not
// validate is skipped and reported through invalid, so that one bad entry does not lock
// every node out; it admits nobody.
func EntryMappings(entries []*nodejoinv1alpha1.NodeAccessEntry, invalid func(name string, err error)) []RoleMapping {
	sorted := append([]*nodejoinv1alpha1.NodeAccessEntry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []RoleMapping
	for _, e := range sorted {
		arn, err := e.CanonicalRoleARN()
		if err != nil {
			if invalid != nil {
				invalid(e.Name, err)
			}
			continue
		}
		m := RoleMapping{
			RoleARN:  arn,
			Username: nodejoinv1alpha1.NodeUsernameTemplate,
			Groups:   nodejoinv1alpha1.GroupsFor(e.Spec.Type),
			Source:   "NodeAccessEntry " + e.Name,
			RoleID:   e.Annotations[nodejoinv1alpha1.RoleIDAnnotation],
			// Any value but "optional" requires it: a typo does not lift the requirement.
			RequireInstanceProof: e.Annotations[InstanceProofAnnotation] != "" && e.Annotations[InstanceProofAnnotation] != "optional",
		}
		if e.Spec.Type == nodejoinv1alpha1.AccessEntryStandard {
			// Only here do groups come from the entry, and access policies at all.
			m.Standard = true
			m.Username = cmp.Or(e.Spec.Username, nodejoinv1alpha1.DefaultUsername(e.Spec.PrincipalARN))
			m.Groups = append([]string(nil), e.Spec.KubernetesGroups...)
			m.PolicyGroups = e.PolicyGroups()
			for _, p := range e.Spec.AccessPolicies {
				m.Policies = append(m.Policies, p.PolicyARN)
			}
		}
		out = append(out, m)
	}
	return out
}

// Combine returns the mappings of access entries and of aws-auth together. As with EKS's
// API_AND_CONFIG_MAP mode, an access entry wins over an aws-auth mapping of the same role.
// Either source may be nil. When aws-auth cannot be read, the entries' mappings are
// returned with the error.
func Combine(entries, awsAuth func(ctx context.Context) ([]RoleMapping, error)) func(ctx context.Context) ([]RoleMapping, error) {
	return func(ctx context.Context) ([]RoleMapping, error) {
		var fromEntries, fromConfigMap []RoleMapping
		var err error
		if entries != nil {
			if fromEntries, err = entries(ctx); err != nil {
				return nil, fmt.Errorf("reading NodeAccessEntries: %w", err)
			}
		}
		if awsAuth != nil {
			if fromConfigMap, err = awsAuth(ctx); err != nil {
				// The entries still map their roles: a role only aws-auth could map gets
				// this (retryable) error rather than a denial; see Webhook.Authenticate.
				return fromEntries, fmt.Errorf("reading aws-auth: %w", err)
			}
		}
		covered := map[string]bool{}
		for _, m := range fromEntries {
			covered[strings.ToLower(m.RoleARN)] = true
		}
		out := fromEntries
		for _, m := range fromConfigMap {
			if !covered[strings.ToLower(m.RoleARN)] {
				out = append(out, m)
			}
		}
		return out, nil
	}
}
