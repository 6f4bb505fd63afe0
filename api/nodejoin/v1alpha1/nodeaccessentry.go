package v1alpha1

import (
	_ "embed" // the CRD manifest
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

// AccessEntryType says what kind of principal an entry admits. Only node types exist:
// a NodeAccessEntry never grants anything but a node's identity.
// +kubebuilder:validation:Enum=EC2_LINUX;EC2_WINDOWS
type AccessEntryType string

// The entry types, named as EKS access entries name them.
const (
	AccessEntryEC2Linux   AccessEntryType = "EC2_LINUX"
	AccessEntryEC2Windows AccessEntryType = "EC2_WINDOWS"
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

// NodeAccessEntry admits the instances that carry one IAM role as nodes: a token of
// that role whose session is a running instance with the role maps to
// system:node:<the instance's private DNS name>, in groups system:bootstrappers and
// system:nodes. It is the nodejoin counterpart of an EKS access entry of type EC2_LINUX
// and takes precedence over an aws-auth mapping of the same role.
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

// NodeAccessEntrySpec names the role.
//
// +kubebuilder:validation:XValidation:rule="self.principalARN == oldSelf.principalARN && self.type == oldSelf.type",message="principalARN and type are immutable; create a new entry instead"
type NodeAccessEntrySpec struct {
	// PrincipalARN is the IAM role's ARN, arn:aws:iam::<account>:role/[<path>/]<name>.
	// A path is matched without it, as the STS caller's assumed-role ARN carries none.
	//
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`
	PrincipalARN string `json:"principalARN"`
	// Type is EC2_LINUX (the default) or EC2_WINDOWS; both map to the node identity.
	//
	// +kubebuilder:default=EC2_LINUX
	Type AccessEntryType `json:"type,omitempty"`
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

// PartitionPattern matches an AWS partition as ARNs name it (aws, aws-cn, aws-us-gov,
// aws-iso-b, …), without a capturing group. The token webhook's ARN checks use it, so
// that a role an entry may name (roleARNRE, whose partition part is the same language
// written as the CRD's pattern writes it) is one the webhook can match.
const PartitionPattern = `aws(?:-[a-z]+)*`

var roleARNRE = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)

// Validate checks the entry.
func (e *NodeAccessEntry) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if !roleARNRE.MatchString(e.Spec.PrincipalARN) {
		errs = append(errs, field.Invalid(spec.Child("principalARN"), e.Spec.PrincipalARN,
			"want an IAM role ARN, arn:aws:iam::<12-digit account>:role/<name>: node entries admit instance roles only"))
	}
	switch e.Spec.Type {
	case "", AccessEntryEC2Linux, AccessEntryEC2Windows:
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), e.Spec.Type, []AccessEntryType{AccessEntryEC2Linux, AccessEntryEC2Windows}))
	}
	return errs
}

// CanonicalRoleARN is the entry's role ARN without its path, the form the STS caller's
// identity is compared in.
func (e *NodeAccessEntry) CanonicalRoleARN() (string, error) {
	if errs := e.Validate(); len(errs) > 0 {
		return "", fmt.Errorf("NodeAccessEntry %s: %w", e.Name, errs.ToAggregate())
	}
	prefix, rest, _ := strings.Cut(e.Spec.PrincipalARN, ":role/")
	return prefix + ":role/" + rest[strings.LastIndex(rest, "/")+1:], nil
}
