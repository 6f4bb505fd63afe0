package csr

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// The tags a bootstrap token's instance must carry: its node group's name, as EKS and
// nodejoin's node groups tag the instances they launch, and the cluster's, as every
// node group's instances are tagged kubernetes.io/cluster/<name> (owned or shared).
const (
	NodeGroupTag     = "eks:nodegroup-name"
	ClusterTagPrefix = "kubernetes.io/cluster/"
)

// bootstrapGroupPrefix begins the group a node group's bootstrap token adds
// (bootstraptoken.Mint: system:bootstrappers:<node group>).
const bootstrapGroupPrefix = bootstrappersGroup + ":"

// Denial reasons of the binding of a bootstrap token to its node group's instances.
const (
	ReasonTokenGroup = "InstanceNotOfTokenGroup"
	ReasonNodeRole   = "InstanceRoleNotANodeRole"
	ReasonCluster    = "InstanceNotOfCluster"
)

// NodeRoles tells whether an instance's role is a node role.
type NodeRoles interface {
	// NodeRole names what maps the instance's role as a node role (such as
	// "NodeAccessEntry nodes-abc"), or returns "" when nothing does.
	NodeRole(ctx context.Context, inst *inventory.Instance) (string, error)
}

// tokenGroup returns the node group of a bootstrap token's requester: the one group
// system:bootstrappers:<group> among the CSR's groups, which kube-apiserver wrote from
// the token Secret's auth-extra-groups (a requester cannot choose them).
func tokenGroup(csr []string, user string) (string, *Decision) {
	var groups []string
	for _, g := range csr {
		if name, ok := strings.CutPrefix(g, bootstrapGroupPrefix); ok && name != "" {
			groups = append(groups, name)
		}
	}
	switch len(groups) {
	case 1:
		return groups[0], nil
	case 0:
		return "", deny(ReasonTokenGroup, "bootstrap token %s names no node group (no group %s<node group>): a bootstrap token joins only instances of its node group", user, bootstrapGroupPrefix)
	default:
		slices.Sort(groups)
		return "", deny(ReasonTokenGroup, "bootstrap token %s names several node groups %q: a bootstrap token joins only instances of one node group", user, groups)
	}
}

// checkBinding approves a bootstrap token's client CSR for an instance only when the
// instance is tagged for the token's node group and for this cluster, and its role is a
// node role. A tag alone is not enough (whoever launches an instance tags it), nor is
// the role alone (any instance of the role, a bastion's included, would do).
func (p *Policy) checkBinding(ctx context.Context, csr []string, user string, inst *inventory.Instance) (*Decision, error) {
	group, d := tokenGroup(csr, user)
	if d != nil {
		return d, nil
	}
	tagged, ok := inst.Tags[NodeGroupTag]
	switch {
	case !ok:
		return deny(ReasonTokenGroup, "instance %s carries no %s tag, the token is for node group %q", inst.ID, NodeGroupTag, group), nil
	case tagged != group:
		return deny(ReasonTokenGroup, "instance %s is tagged for node group %q, the token is for %q", inst.ID, tagged, group), nil
	}
	if p.ClusterName == "" {
		return deny(ReasonCluster, "the controller does not know the cluster's name, so instance %s's %s<cluster> tag cannot be checked", inst.ID, ClusterTagPrefix), nil
	}
	if _, ok := inst.Tags[ClusterTagPrefix+p.ClusterName]; !ok {
		return deny(ReasonCluster, "instance %s carries no %s%s tag", inst.ID, ClusterTagPrefix, p.ClusterName), nil
	}
	if inst.Role == "" && inst.RoleARN == "" {
		return deny(ReasonNodeRole, "instance %s has no instance profile role; a bootstrap token joins only instances with a node role", inst.ID), nil
	}
	if p.NodeRoles == nil {
		return deny(ReasonNodeRole, "the controller has no source of node roles, so instance %s's role %s cannot be checked", inst.ID, roleOf(inst)), nil
	}
	by, err := p.NodeRoles.NodeRole(ctx, inst)
	if err != nil {
		return nil, fmt.Errorf("looking up the node roles: %w", err)
	}
	if by == "" {
		return deny(ReasonNodeRole, "instance %s has role %s, which no node access entry (EC2_LINUX or EC2_WINDOWS) maps", inst.ID, roleOf(inst)), nil
	}
	return nil, nil
}

func roleOf(inst *inventory.Instance) string {
	if inst.RoleARN != "" {
		return inst.RoleARN
	}
	return inst.Role
}

// EntryNodeRoles finds node roles among the NodeAccessEntries of type EC2_LINUX or
// EC2_WINDOWS, read through Reader (the manager's cache).
type EntryNodeRoles struct {
	Reader client.Reader
}

// NodeRole returns the entry that maps the instance's role, compared by ARN without its
// path; with only the role's name known (a file inventory without roleArn), by name and,
// when the inventory says it, account.
func (e EntryNodeRoles) NodeRole(ctx context.Context, inst *inventory.Instance) (string, error) {
	var list nodejoinv1alpha1.NodeAccessEntryList
	if err := e.Reader.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing NodeAccessEntries: %w", err)
	}
	want := nodejoinv1alpha1.CanonicalPrincipalARN(inst.RoleARN)
	for i := range list.Items {
		entry := &list.Items[i]
		switch entry.Spec.Type {
		case "", nodejoinv1alpha1.AccessEntryEC2Linux, nodejoinv1alpha1.AccessEntryEC2Windows:
		default:
			continue
		}
		arn := nodejoinv1alpha1.CanonicalPrincipalARN(entry.Spec.PrincipalARN)
		if !strings.Contains(arn, ":role/") {
			continue
		}
		if inst.RoleARN != "" {
			if arn == want {
				return "NodeAccessEntry " + entry.Name, nil
			}
			continue
		}
		name := arn[strings.LastIndex(arn, "/")+1:]
		if name == inst.Role && (inst.AccountID == "" || strings.Contains(arn, "::"+inst.AccountID+":")) {
			return "NodeAccessEntry " + entry.Name, nil
		}
	}
	return "", nil
}
