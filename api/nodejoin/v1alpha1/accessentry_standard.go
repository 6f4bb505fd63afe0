package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AccessPolicyAssociation is an EKS access policy associated with a STANDARD entry,
// with the scope it applies in.
type AccessPolicyAssociation struct {
	// PolicyARN is one of EKS's access policies,
	// arn:aws:eks::aws:cluster-access-policy/<name> (AccessPolicies lists them).
	//
	// +kubebuilder:validation:Enum=arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy;arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy;arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy;arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy
	PolicyARN string `json:"policyARN"`
	// AccessScope is where the policy applies: the whole cluster, or some namespaces.
	AccessScope AccessScope `json:"accessScope"`
	// AssociatedAt and ModifiedAt are when the policy was associated and last changed,
	// as EKS reports them.
	//
	// +optional
	AssociatedAt metav1.Time `json:"associatedAt,omitzero"`
	// +optional
	ModifiedAt metav1.Time `json:"modifiedAt,omitzero"`
}

// AccessScopeType is cluster or namespace, as EKS names them.
//
// +kubebuilder:validation:Enum=cluster;namespace
type AccessScopeType string

// The scopes of an access policy.
const (
	AccessScopeCluster   AccessScopeType = "cluster"
	AccessScopeNamespace AccessScopeType = "namespace"
)

// AccessScope is an access policy's scope.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'namespace' ? has(self.namespaces) && size(self.namespaces) > 0 : !has(self.namespaces)",message="a namespace scope names at least one namespace; a cluster scope names none"
type AccessScope struct {
	Type AccessScopeType `json:"type"`
	// Namespaces are the namespaces of a namespace scope: names, not patterns (EKS's
	// trailing-* wildcards are not supported).
	//
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
}

// AccessPolicyARNPrefix begins the ARN of every EKS access policy.
const AccessPolicyARNPrefix = "arn:aws:eks::aws:cluster-access-policy/"

// AccessPolicy is one EKS access policy and the Kubernetes ClusterRole that grants
// what it grants.
type AccessPolicy struct {
	Name, ClusterRole string
}

// ARN is the policy's ARN.
func (p AccessPolicy) ARN() string { return AccessPolicyARNPrefix + p.Name }

// AccessPolicies are the access policies the local EKS associates, as EKS documents
// their rights: cluster-admin, admin, edit and view.
var AccessPolicies = []AccessPolicy{
	{"AmazonEKSClusterAdminPolicy", "cluster-admin"},
	{"AmazonEKSAdminPolicy", "admin"},
	{"AmazonEKSEditPolicy", "edit"},
	{"AmazonEKSViewPolicy", "view"},
}

// LookupAccessPolicy finds an access policy by ARN.
func LookupAccessPolicy(arn string) (AccessPolicy, bool) {
	for _, p := range AccessPolicies {
		if p.ARN() == arn {
			return p, true
		}
	}
	return AccessPolicy{}, false
}

// AccessPolicyGroupPrefix begins the groups through which access policies grant their
// rights. Only a STANDARD entry's policies produce them: aws-auth and node entries never
// may, and no entry may name one in its kubernetesGroups.
const AccessPolicyGroupPrefix = "nodejoin:access-policy:"

// AccessPolicyGroup is the group a policy grants in a scope: for the cluster,
// nodejoin:access-policy:<policy>, bound to the policy's ClusterRole by a
// ClusterRoleBinding; for a namespace, nodejoin:access-policy:<policy>:<namespace>, bound
// by a RoleBinding in that namespace (RBAC matches group names exactly, so each
// namespace needs its own group: one shared group would reach every namespace any entry
// named).
func AccessPolicyGroup(policy, namespace string) string {
	if namespace == "" {
		return AccessPolicyGroupPrefix + policy
	}
	return AccessPolicyGroupPrefix + policy + ":" + namespace
}

// PolicyGroups are the groups a STANDARD entry's policies grant, in the order of its
// policies and namespaces; none for other entries.
func (e *NodeAccessEntry) PolicyGroups() []string {
	if e.Spec.Type != AccessEntryStandard {
		return nil
	}
	var groups []string
	for _, a := range e.Spec.AccessPolicies {
		p, ok := LookupAccessPolicy(a.PolicyARN)
		if !ok {
			continue
		}
		if a.AccessScope.Type == AccessScopeCluster {
			groups = append(groups, AccessPolicyGroup(p.Name, ""))
			continue
		}
		for _, ns := range a.AccessScope.Namespaces {
			groups = append(groups, AccessPolicyGroup(p.Name, ns))
		}
	}
	return groups
}

// ReservedPrefixes are the prefixes a STANDARD entry's groups and username may not
// start with: EKS's own, and nodejoin's.
var ReservedPrefixes = []string{"system:", "eks:", "aws:", "amazon:", "iam:", "nodejoin:"}

// ReservedPrefix returns the reserved prefix s starts with, or "".
func ReservedPrefix(s string) string {
	for _, p := range ReservedPrefixes {
		if strings.HasPrefix(strings.ToLower(s), p) {
			return p
		}
	}
	return ""
}

// DefaultUsername is EKS's username for a STANDARD entry without one: the user's ARN,
// or for a role the session's assumed-role ARN.
func DefaultUsername(principalARN string) string {
	arn := CanonicalPrincipalARN(principalARN)
	if prefix, role, ok := strings.Cut(arn, ":role/"); ok {
		return strings.Replace(prefix, ":iam::", ":sts::", 1) + ":assumed-role/" + role + "/{{SessionName}}"
	}
	return arn
}

var usernameTemplateRE = regexp.MustCompile(`\{\{[^}]*\}\}`)

// usernameTemplates are the templates a STANDARD entry's username may use: the caller's,
// never an instance's ({{EC2PrivateDNSName}} is the node identity's).
var usernameTemplates = []string{"{{AccountID}}", "{{SessionName}}", "{{SessionNameRaw}}", "{{AccessKeyID}}"}

func (e *NodeAccessEntry) validateStandard(spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if u := e.Spec.Username; u != "" {
		p := spec.Child("username")
		if r := ReservedPrefix(u); r != "" {
			errs = append(errs, field.Invalid(p, u, fmt.Sprintf("a username may not start with %s", r)))
		}
		for _, t := range usernameTemplateRE.FindAllString(u, -1) {
			if !slices.Contains(usernameTemplates, t) {
				errs = append(errs, field.Invalid(p, u, fmt.Sprintf("unknown template %s: want one of %s", t, strings.Join(usernameTemplates, ", "))))
			}
		}
		if len(u) > 256 {
			errs = append(errs, field.TooLong(p, "", 256))
		}
	}
	if len(e.Spec.KubernetesGroups) > 100 {
		errs = append(errs, field.TooMany(spec.Child("kubernetesGroups"), len(e.Spec.KubernetesGroups), 100))
	}
	for i, g := range e.Spec.KubernetesGroups {
		p := spec.Child("kubernetesGroups").Index(i)
		switch {
		case g == "" || len(g) > 256:
			errs = append(errs, field.Invalid(p, g, "a group has 1 to 256 characters"))
		case ReservedPrefix(g) != "":
			errs = append(errs, field.Invalid(p, g, fmt.Sprintf("a group may not start with %s: EKS reserves system:, eks:, aws:, amazon: and iam:, nodejoin reserves nodejoin: (access policies grant their rights through an associated policy, not a group)", ReservedPrefix(g))))
		}
	}
	if len(e.Spec.AccessPolicies) > 20 {
		errs = append(errs, field.TooMany(spec.Child("accessPolicies"), len(e.Spec.AccessPolicies), 20))
	}
	seen := map[string]bool{}
	for i, a := range e.Spec.AccessPolicies {
		p := spec.Child("accessPolicies").Index(i)
		if _, ok := LookupAccessPolicy(a.PolicyARN); !ok {
			names := make([]string, 0, len(AccessPolicies))
			for _, ap := range AccessPolicies {
				names = append(names, ap.ARN())
			}
			errs = append(errs, field.NotSupported(p.Child("policyARN"), a.PolicyARN, names))
		}
		if seen[a.PolicyARN] {
			errs = append(errs, field.Duplicate(p.Child("policyARN"), a.PolicyARN))
		}
		seen[a.PolicyARN] = true
		errs = append(errs, ValidateAccessScope(a.AccessScope, p.Child("accessScope"))...)
	}
	return errs
}

// ValidateAccessScope checks a scope: cluster without namespaces, or namespace with
// 1 to 100 namespace names (no wildcards).
func ValidateAccessScope(s AccessScope, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case AccessScopeCluster:
		if len(s.Namespaces) > 0 {
			errs = append(errs, field.Forbidden(p.Child("namespaces"), "a cluster scope names no namespaces"))
		}
	case AccessScopeNamespace:
		if len(s.Namespaces) == 0 || len(s.Namespaces) > 100 {
			errs = append(errs, field.Invalid(p.Child("namespaces"), len(s.Namespaces), "a namespace scope names 1 to 100 namespaces"))
		}
		seen := map[string]bool{}
		for i, ns := range s.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, field.Invalid(p.Child("namespaces").Index(i), ns, "want a namespace name (wildcards are not supported): "+strings.Join(msgs, "; ")))
			}
			if seen[ns] {
				errs = append(errs, field.Duplicate(p.Child("namespaces").Index(i), ns))
			}
			seen[ns] = true
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, []AccessScopeType{AccessScopeCluster, AccessScopeNamespace}))
	}
	return errs
}
