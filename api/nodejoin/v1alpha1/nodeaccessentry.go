package v1alpha1

import (
	"crypto/sha256"
	_ "embed" // the CRD manifest
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeAccessEntryKind is the kind of NodeAccessEntry.
const NodeAccessEntryKind = "NodeAccessEntry"

// NodeAccessEntryResource is the resource of NodeAccessEntry objects.
var NodeAccessEntryResource = schema.GroupVersionResource{Group: GroupName, Version: Version, Resource: "nodeaccessentries"}

// NodeAccessEntryCRD is the CustomResourceDefinition of NodeAccessEntry, generated from
// these types by controller-gen (`make generate`), installed by nodejoin-controller
// --install-crds and shipped in deploy/crds/.
//
//go:embed crds/nodejoin.io_nodeaccessentries.yaml
var NodeAccessEntryCRD []byte

// AccessEntryType says what kind of principal an entry admits: node types (EC2_LINUX,
// EC2_WINDOWS) grant a node's identity and nothing else; STANDARD grants the entry's
// username, groups and access policies, and is the only type that may.
// +kubebuilder:validation:Enum=EC2_LINUX;EC2_WINDOWS;STANDARD
type AccessEntryType string

// The entry types, named as EKS access entries name them.
const (
	AccessEntryEC2Linux   AccessEntryType = "EC2_LINUX"
	AccessEntryEC2Windows AccessEntryType = "EC2_WINDOWS"
	AccessEntryStandard   AccessEntryType = "STANDARD"
)

// The identity a node entry maps to, as EKS maps EC2_LINUX and EC2_WINDOWS entries.
const (
	NodeUsernameTemplate = "system:node:{{EC2PrivateDNSName}}"
)

// NodeGroups are the groups a node entry grants.
var NodeGroups = []string{"system:bootstrappers", "system:nodes"}

// KubeProxyWindowsGroup is the group EKS adds for Windows nodes: kube-proxy on Windows
// runs with the node's credentials and needs the node-proxier role through it.
const KubeProxyWindowsGroup = "eks:kube-proxy-windows"

// GroupsFor returns the groups an entry of type t grants, as EKS grants them: the node
// groups, and for EC2_WINDOWS also eks:kube-proxy-windows.
func GroupsFor(t AccessEntryType) []string {
	groups := append([]string(nil), NodeGroups...)
	if t == AccessEntryEC2Windows {
		groups = append(groups, KubeProxyWindowsGroup)
	}
	return groups
}

// NodeAccessEntry is an EKS access entry. Of a node type (EC2_LINUX, EC2_WINDOWS) it
// admits the instances that carry one IAM role as nodes: a token of that role whose
// session is a running instance with the role maps to system:node:<the instance's
// private DNS name>, in groups system:bootstrappers and system:nodes. Of type STANDARD it
// admits one IAM user or role as a person or program: its username, its
// kubernetesGroups, and a group per associated access policy, which RBAC binds to the
// policy's ClusterRole (AccessPolicyGroup). An entry takes precedence over an aws-auth
// mapping of the same role. (The kind keeps its first name: it held node entries only.)
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nae
// +kubebuilder:printcolumn:name="Principal",type=string,JSONPath=".spec.principalARN"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type NodeAccessEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeAccessEntrySpec `json:"spec"`
}

// NodeAccessEntrySpec names the principal and, for STANDARD entries, what it gets.
//
// +kubebuilder:validation:XValidation:rule="self.principalARN == oldSelf.principalARN && self.type == oldSelf.type",message="principalARN and type are immutable; create a new entry instead"
// +kubebuilder:validation:XValidation:rule="self.type == 'STANDARD' || self.principalARN.contains(':role/')",message="node entries (EC2_LINUX, EC2_WINDOWS) admit instance roles only: principalARN must be an IAM role ARN"
// +kubebuilder:validation:XValidation:rule="self.type == 'STANDARD' || (!has(self.username) && !has(self.kubernetesGroups) && !has(self.accessPolicies))",message="only STANDARD entries take username, kubernetesGroups and accessPolicies; node entries get the node identity"
type NodeAccessEntrySpec struct {
	// PrincipalARN is the IAM principal's ARN: arn:aws:iam::<account>:role/[<path>/]<name>,
	// or for STANDARD entries also arn:aws:iam::<account>:user/[<path>/]<name>. A path is
	// matched without it, as the STS caller's assumed-role ARN carries none.
	//
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:(role|user)/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`
	PrincipalARN string `json:"principalARN"`
	// Type is EC2_LINUX (the default) or EC2_WINDOWS, which map to the node identity, or
	// STANDARD.
	//
	// +kubebuilder:default=EC2_LINUX
	Type AccessEntryType `json:"type,omitempty"`
	// Username is a STANDARD entry's Kubernetes username; empty means EKS's default (the
	// principal's ARN for a user; arn:aws:sts::<account>:assumed-role/<role>/{{SessionName}}
	// for a role). It may use {{AccountID}}, {{SessionName}}, {{SessionNameRaw}} and
	// {{AccessKeyID}}.
	//
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Username string `json:"username,omitempty"`
	// KubernetesGroups are a STANDARD entry's groups, bound by the cluster's own RBAC.
	// No group may start with system:, eks:, aws:, amazon:, iam: or nodejoin: (as EKS
	// refuses them): an entry reaches the administrator's rights through an access
	// policy, never through system:masters.
	//
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.all(g, !g.startsWith('system:') && !g.startsWith('eks:') && !g.startsWith('aws:') && !g.startsWith('amazon:') && !g.startsWith('iam:') && !g.startsWith('nodejoin:'))",message="a group may not start with system:, eks:, aws:, amazon:, iam: or nodejoin:"
	// +optional
	KubernetesGroups []string `json:"kubernetesGroups,omitempty"`
	// AccessPolicies are the EKS access policies associated with a STANDARD entry.
	//
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=policyARN
	// +optional
	AccessPolicies []AccessPolicyAssociation `json:"accessPolicies,omitempty"`
}

// NodeAccessEntryList is a list of NodeAccessEntry objects.
//
// +kubebuilder:object:root=true
type NodeAccessEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeAccessEntry `json:"items"`
}

// RoleIDAnnotation holds the unique ID (AROA…) of the entry's role, written by
// nodejoin-controller when a token of the role is first reviewed. A token whose role has
// another ID (the role was deleted and re-created under the same ARN) is then denied;
// removing the annotation, or re-creating the entry, accepts the role as it is now.
const RoleIDAnnotation = "nodejoin.io/role-id"

// InstanceProofAnnotation requires, set to "required" (any value but "optional"), the
// nodes an entry admits to prove that they are the instance they name: their token must
// carry the instance's signed identity document (see docs/security.md, "Instance proof"). The
// entries nodejoin creates for its node groups' roles carry it.
const InstanceProofAnnotation = "nodejoin.io/instance-proof"

// PartitionPattern matches an AWS partition as ARNs name it (aws, aws-cn, aws-us-gov,
// aws-iso-b, …), without a capturing group. The token webhook's ARN checks use it, so
// that a role an entry may name (roleARNRE, whose partition part is the same language
// written as the CRD's pattern writes it) is one the webhook can match.
const PartitionPattern = `aws(?:-[a-z]+)*`

var (
	roleARNRE      = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)
	principalARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:(role|user)/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)
)

// Validate checks the entry.
func (e *NodeAccessEntry) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch e.Spec.Type {
	case "", AccessEntryEC2Linux, AccessEntryEC2Windows:
		if !roleARNRE.MatchString(e.Spec.PrincipalARN) {
			errs = append(errs, field.Invalid(spec.Child("principalARN"), e.Spec.PrincipalARN,
				"want an IAM role ARN, arn:aws:iam::<12-digit account>:role/<name>: node entries admit instance roles only"))
		}
		if e.Spec.Username != "" || len(e.Spec.KubernetesGroups) > 0 || len(e.Spec.AccessPolicies) > 0 {
			errs = append(errs, field.Forbidden(spec, "only STANDARD entries take username, kubernetesGroups and accessPolicies; node entries get the node identity"))
		}
	case AccessEntryStandard:
		if !principalARNRE.MatchString(e.Spec.PrincipalARN) {
			errs = append(errs, field.Invalid(spec.Child("principalARN"), e.Spec.PrincipalARN,
				"want an IAM user or role ARN, arn:aws:iam::<12-digit account>:user/<name> or :role/<name>"))
		}
		errs = append(errs, e.validateStandard(spec)...)
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), e.Spec.Type, []AccessEntryType{AccessEntryEC2Linux, AccessEntryEC2Windows, AccessEntryStandard}))
	}
	return errs
}

// CanonicalRoleARN is the entry's principal ARN without its path, the form the STS
// caller's identity is compared in. The name is kept from when every entry named a role:
// a STANDARD entry's principal may be a user.
func (e *NodeAccessEntry) CanonicalRoleARN() (string, error) {
	if errs := e.Validate(); len(errs) > 0 {
		return "", fmt.Errorf("NodeAccessEntry %s: %w", e.Name, errs.ToAggregate())
	}
	return CanonicalPrincipalARN(e.Spec.PrincipalARN), nil
}

// CanonicalPrincipalARN strips the path of an IAM role or user ARN:
// arn:aws:iam::1111:role/a/b/name becomes arn:aws:iam::1111:role/name. A name is unique
// in its account whatever its path. Anything else is returned as it is.
func CanonicalPrincipalARN(arn string) string {
	for _, kind := range []string{":role/", ":user/"} {
		if prefix, rest, ok := strings.Cut(arn, kind); ok {
			return prefix + kind + rest[strings.LastIndex(rest, "/")+1:]
		}
	}
	return arn
}

// EntryName is the object name of the entry of a principal, as the local EKS and the
// sandbox name the entries they make: the role's or user's name, lowercased and cut to
// what an object name may hold, with a hash of the whole ARN (an ARN is no object
// name, and names differing in case or path must not collide).
func EntryName(principalARN string) string {
	sum := sha256.Sum256([]byte(principalARN))
	canonical := CanonicalPrincipalARN(principalARN)
	name := canonical[strings.LastIndex(canonical, "/")+1:]
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, name)
	base = strings.Trim(base, "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "role"
	}
	return "eks-" + base + "-" + hex.EncodeToString(sum[:])[:10]
}
