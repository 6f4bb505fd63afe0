package v1alpha1

import (
	_ "embed" // the CRD manifest
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// NodeGroupKind is the kind of NodeGroup.
const NodeGroupKind = "NodeGroup"

// NodeGroupResource is the resource of NodeGroup objects.
var NodeGroupResource = schema.GroupVersionResource{Group: GroupName, Version: Version, Resource: "nodegroups"}

// NodeGroupCRD is the CustomResourceDefinition of NodeGroup, generated from these types
// by controller-gen (`make generate`) and shipped in deploy/crds/.
//
//go:embed crds/nodejoin.io_nodegroups.yaml
var NodeGroupCRD []byte

// AMIFamily is the operating system a node group's instances boot, which decides the
// shape of their user data.
// +kubebuilder:validation:Enum=AmazonLinux2;AmazonLinux2023;Bottlerocket;Windows
type AMIFamily string

// The AMI families, named as eksctl names them.
const (
	AMIFamilyAmazonLinux2    AMIFamily = "AmazonLinux2"
	AMIFamilyAmazonLinux2023 AMIFamily = "AmazonLinux2023"
	AMIFamilyBottlerocket    AMIFamily = "Bottlerocket"
	AMIFamilyWindows         AMIFamily = "Windows"
)

// AMIFamilies lists the families in a fixed order.
var AMIFamilies = []AMIFamily{AMIFamilyAmazonLinux2, AMIFamilyAmazonLinux2023, AMIFamilyBottlerocket, AMIFamilyWindows}

// ParseAMIFamily accepts a family as EKS and eksctl spell it (AL2, AL2023, and any
// Windows Server variant such as WindowsServer2022FullContainer), in any case. It is
// for the edges (flags, files); inside nodejoin families travel as AMIFamily.
func ParseAMIFamily(s string) (AMIFamily, error) {
	l := strings.ToLower(s)
	switch {
	case l == "amazonlinux2023" || l == "al2023":
		return AMIFamilyAmazonLinux2023, nil
	case l == "amazonlinux2" || l == "al2":
		return AMIFamilyAmazonLinux2, nil
	case l == "bottlerocket":
		return AMIFamilyBottlerocket, nil
	case l == "windows" || strings.HasPrefix(l, "windowsserver"):
		return AMIFamilyWindows, nil
	}
	return "", fmt.Errorf("AMI family %q: %w", s, ErrUnknownAMIFamily)
}

// ErrUnknownAMIFamily reports a family name ParseAMIFamily does not know.
var ErrUnknownAMIFamily = errors.New("want one of AmazonLinux2023, AmazonLinux2, Bottlerocket, Windows")

// UserDataStyle says whose user data a group's instances boot with.
// +kubebuilder:validation:Enum=Managed;Eksctl
type UserDataStyle string

// The user data styles.
const (
	// UserDataStyleManaged is what EKS managed node groups give their instances: EKS's
	// bootstrap (the eks.amazonaws.com labels, max pods from the instance type) merged
	// with the template's userData.
	UserDataStyleManaged UserDataStyle = "Managed"
	// UserDataStyleEksctl is what eksctl writes into a self-managed group's launch
	// template: on AmazonLinux2 a gzip-compressed #cloud-config with kubelet.env and
	// kubelet-extra.json calling bootstrap.sh; on AmazonLinux2023 its NodeConfig parts.
	UserDataStyleEksctl UserDataStyle = "Eksctl"
)

// UserDataStyles lists the styles in a fixed order.
var UserDataStyles = []UserDataStyle{UserDataStyleManaged, UserDataStyleEksctl}

// CapacityType is how instances are bought.
// +kubebuilder:validation:Enum=ON_DEMAND;SPOT
type CapacityType string

// The capacity types, named as EKS names them.
const (
	CapacityOnDemand CapacityType = "ON_DEMAND"
	CapacitySpot     CapacityType = "SPOT"
)

// UpdateStrategy orders a rolling update's launches and terminations.
// +kubebuilder:validation:Enum=DEFAULT;MINIMAL
type UpdateStrategy string

// The strategies, named as EKS NodegroupUpdateConfig names them.
const (
	// UpdateStrategyDefault launches new instances before it terminates old ones.
	UpdateStrategyDefault UpdateStrategy = "DEFAULT"
	// UpdateStrategyMinimal terminates old instances before it launches new ones, for
	// groups that cannot afford extra capacity.
	UpdateStrategyMinimal UpdateStrategy = "MINIMAL"
)

// NodeGroupPhase is the status of a node group as EKS reports it.
type NodeGroupPhase string

// The phases, named as EKS node group statuses.
const (
	PhaseCreating     NodeGroupPhase = "CREATING"
	PhaseActive       NodeGroupPhase = "ACTIVE"
	PhaseUpdating     NodeGroupPhase = "UPDATING"
	PhaseDegraded     NodeGroupPhase = "DEGRADED"
	PhaseDeleting     NodeGroupPhase = "DELETING"
	PhaseCreateFailed NodeGroupPhase = "CREATE_FAILED"
	PhaseDeleteFailed NodeGroupPhase = "DELETE_FAILED"
)

// IssueCode is an EKS node group health issue code.
type IssueCode string

// The health issue codes the controller raises (a subset of the EKS enum).
const (
	IssueNodeCreationFailure             IssueCode = "NodeCreationFailure"
	IssuePodEvictionFailure              IssueCode = "PodEvictionFailure"
	IssueAsgInstanceLaunchFailures       IssueCode = "AsgInstanceLaunchFailures"
	IssueInstanceLimitExceeded           IssueCode = "InstanceLimitExceeded"
	IssueInsufficientFreeAddresses       IssueCode = "InsufficientFreeAddresses"
	IssueAutoScalingGroupNotFound        IssueCode = "AutoScalingGroupNotFound"
	IssueEc2LaunchTemplateNotFound       IssueCode = "Ec2LaunchTemplateNotFound"
	IssueEc2LaunchTemplateInvalidConfig  IssueCode = "Ec2LaunchTemplateInvalidConfiguration"
	IssueAutoScalingGroupInvalidConfig   IssueCode = "AutoScalingGroupInvalidConfiguration"
	IssueNodeTerminationFailure          IssueCode = "NodeTerminationFailure"
	IssueAccessDenied                    IssueCode = "AccessDenied"
	IssueInternalFailure                 IssueCode = "InternalFailure"
	IssueEc2InstanceTypeDoesNotExist     IssueCode = "Ec2InstanceTypeDoesNotExist"
	IssueAmiIDNotFound                   IssueCode = "AmiIdNotFound"
	IssueEc2SubnetNotFound               IssueCode = "Ec2SubnetNotFound"
	IssueIamInstanceProfileNotFound      IssueCode = "IamInstanceProfileNotFound"
	IssueAutoScalingGroupRateLimitExceed IssueCode = "AutoScalingGroupRateLimitExceeded"
)

// UpdatePhase is a step of the rolling update (reference: the EKS managed node group
// update phases Setup, Scale up, Upgrade, Scale down).
type UpdatePhase string

// The update phases.
const (
	UpdatePhaseSetup     UpdatePhase = "Setup"
	UpdatePhaseScaleUp   UpdatePhase = "ScaleUp"
	UpdatePhaseUpgrade   UpdatePhase = "Upgrade"
	UpdatePhaseScaleDown UpdatePhase = "ScaleDown"
	// UpdatePhaseFailed keeps a failed update (PodEvictionFailure, NodeCreationFailure)
	// until the spec changes again or force is set.
	UpdatePhaseFailed UpdatePhase = "Failed"
)

// NodeStep is where one old node is in its replacement.
type NodeStep string

// The steps of one old node, in order.
const (
	NodeStepCordoned    NodeStep = "Cordoned"
	NodeStepDraining    NodeStep = "Draining"
	NodeStepWaiting     NodeStep = "Waiting"
	NodeStepTerminating NodeStep = "Terminating"
)

// NodeGroupFinalizer is the finalizer the controller puts on a NodeGroup so that deleting it
// drains its nodes and deletes its Auto Scaling group and launch template first.
const NodeGroupFinalizer = "nodejoin.io/nodegroup"

// Labels the controller puts on the nodes of a group (through the user data), as EKS
// managed node groups do.
const (
	LabelNodeGroup      = "eks.amazonaws.com/nodegroup"
	LabelNodeGroupImage = "eks.amazonaws.com/nodegroup-image"
	LabelCapacityType   = "eks.amazonaws.com/capacityType"
	LabelExcludeFromLBs = "node.kubernetes.io/exclude-from-external-load-balancers"
	// LabelEksctlNodeGroupName is the label eksctl gives a group's nodes; the user
	// data of an Eksctl-style group carries it.
	LabelEksctlNodeGroupName = "alpha.eksctl.io/nodegroup-name"
)

// NodeGroup is a group of EC2 instances in one Auto Scaling group launched from one
// launch template, joined as nodes; the nodejoin counterpart of an EKS managed node
// group.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ng
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=".spec.scaling.minSize"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=".spec.scaling.maxSize"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".status.desiredSize"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readySize"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=".status.updatedSize"
// +kubebuilder:printcolumn:name="AMI Family",type=string,JSONPath=".spec.template.amiFamily"
// +kubebuilder:printcolumn:name="Instance Type",type=string,JSONPath=".status.instanceType"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeGroupSpec   `json:"spec"`
	Status            NodeGroupStatus `json:"status,omitempty"`
}

// NodeGroupSpec is what the group should be.
//
// +kubebuilder:validation:XValidation:rule="!has(self.updateConfig) || !has(self.updateConfig.maxUnavailable) || self.updateConfig.maxUnavailable <= self.scaling.maxSize",message="updateConfig.maxUnavailable must not exceed scaling.maxSize"
type NodeGroupSpec struct {
	// Scaling is the size of the Auto Scaling group.
	Scaling ScalingConfig `json:"scaling"`
	// Template is what each instance is launched with; changing it rolls the group.
	Template NodeTemplate `json:"template"`
	// Subnets are the subnet IDs the Auto Scaling group spans; empty means the
	// controller's configured default subnets.
	// +optional
	// +listType=set
	Subnets []string `json:"subnets,omitempty"`
	// UpdateConfig bounds the nodes a rolling update takes out at once.
	// +kubebuilder:default={maxUnavailable:1}
	// +optional
	UpdateConfig *UpdateConfig `json:"updateConfig,omitempty"`
	// UpdateStrategy is DEFAULT (launch new nodes first) or MINIMAL (terminate old
	// nodes first).
	// +kubebuilder:default=DEFAULT
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`
	// Force deletes the pods a PodDisruptionBudget keeps from being evicted once the
	// drain timeout passes, instead of failing the update with PodEvictionFailure.
	// +optional
	Force bool `json:"force,omitempty"`
	// Timeouts of the controller's waits.
	// +kubebuilder:default={}
	// +optional
	Timeouts Timeouts `json:"timeouts,omitempty"`
}

// ScalingConfig is the Auto Scaling group's size.
//
// +kubebuilder:validation:XValidation:rule="self.minSize <= self.maxSize",message="minSize must not exceed maxSize"
// +kubebuilder:validation:XValidation:rule="!has(self.desiredSize) || (self.minSize <= self.desiredSize && self.desiredSize <= self.maxSize)",message="desiredSize must be between minSize and maxSize"
type ScalingConfig struct {
	// MinSize is the fewest instances.
	// +kubebuilder:validation:Minimum=0
	MinSize int32 `json:"minSize"`
	// MaxSize is the most instances (outside a rolling update's surge).
	// +kubebuilder:validation:Minimum=1
	MaxSize int32 `json:"maxSize"`
	// DesiredSize is how many instances to run; unset means minSize.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DesiredSize *int32 `json:"desiredSize,omitempty"`
}

// NodeTemplate is what the group's launch template holds.
type NodeTemplate struct {
	// AMIFamily is the operating system: AmazonLinux2, AmazonLinux2023 (the default),
	// Bottlerocket or Windows.
	// +kubebuilder:default=AmazonLinux2023
	// +optional
	AMIFamily AMIFamily `json:"amiFamily,omitempty"`
	// AMIID is the image to boot; empty means the controller's configured image for
	// the family.
	// +kubebuilder:validation:Pattern=`^ami-[0-9a-f]{8,17}$`
	// +optional
	AMIID string `json:"amiID,omitempty"`
	// UserDataStyle is whose user data the instances boot with: Managed (the default:
	// as EKS managed node groups generate it) or Eksctl (as eksctl generates it for
	// self-managed groups; what `nodejoin create nodegroup -f` gives an eksctl
	// ClusterConfig's nodeGroups).
	// +kubebuilder:default=Managed
	// +optional
	UserDataStyle UserDataStyle `json:"userDataStyle,omitempty"`
	// InstanceTypes are the instance types, the first preferred (EKS orders on-demand
	// types by priority). Unset means the launch template's instance type when the
	// group names a launch template that has one, else m5.large (defaulted by the
	// controller, not the API server, so that a launch template's type can be seen).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +optional
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// CapacityType is ON_DEMAND (the default) or SPOT.
	// +kubebuilder:default=ON_DEMAND
	// +optional
	CapacityType CapacityType `json:"capacityType,omitempty"`
	// Labels are put on every node of the group.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are registered on every node of the group.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Kubelet is kubelet configuration (KubeletConfiguration fields) merged into each
	// node's; free-form.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Kubelet *runtime.RawExtension `json:"kubelet,omitempty"`
	// MaxPods overrides the instance type's pod limit.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PreBootstrapCommands run before the node joins (not on Bottlerocket).
	// +optional
	PreBootstrapCommands []string `json:"preBootstrapCommands,omitempty"`
	// UserData is the user's own user data, merged with the generated one as managed
	// node groups merge it (plain text, not base64).
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	UserData string `json:"userData,omitempty"`
	// InstanceProfile is the IAM instance profile (name or ARN) the instances run
	// with; empty means the controller's configured default.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// SecurityGroupIDs are the instances' security groups; empty means the
	// controller's configured default.
	// +optional
	// +listType=set
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
	// LaunchTemplate is the user's own EC2 launch template the instances start from,
	// as EKS managed node groups take one: its user data is merged before the
	// generated bootstrap (or, when the template names an ImageId, used alone), and
	// its instance type, security groups, metadata options, tags, key pair and block
	// devices are carried over. A new version of it rolls the group.
	// +optional
	LaunchTemplate *LaunchTemplateRef `json:"launchTemplate,omitempty"`
}

// LaunchTemplateRef names a version of an EC2 launch template: exactly one of id and
// name.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.name)",message="set exactly one of id and name"
type LaunchTemplateRef struct {
	// ID is the launch template's ID, lt-<hex>.
	// +kubebuilder:validation:Pattern=`^lt-[0-9a-f]{8,17}$`
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the launch template's name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Name string `json:"name,omitempty"`
	// Version is a version number, $Latest or $Default; unset means the template's
	// default version.
	// +kubebuilder:validation:Pattern=`^([1-9][0-9]{0,17}|\$Latest|\$Default)$`
	// +optional
	Version string `json:"version,omitempty"`
}

// UpdateConfig says how many nodes a rolling update may take out at once: exactly one
// of maxUnavailable and maxUnavailablePercentage.
//
// +kubebuilder:validation:XValidation:rule="has(self.maxUnavailable) != has(self.maxUnavailablePercentage)",message="set exactly one of maxUnavailable and maxUnavailablePercentage"
type UpdateConfig struct {
	// MaxUnavailable is a number of nodes, 1 to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
	// MaxUnavailablePercentage is a percentage of the desired size, 1 to 100, rounded
	// down to at least one node and at most 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxUnavailablePercentage *int32 `json:"maxUnavailablePercentage,omitempty"`
}

// Timeouts bound the controller's waits.
type Timeouts struct {
	// JoinTimeout is how long a launched instance has to become a Ready node before it
	// is reported as NodeCreationFailure and replaced.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	JoinTimeout *metav1.Duration `json:"joinTimeout,omitempty"`
	// DrainTimeout is how long draining one node may take before the update fails
	// with PodEvictionFailure (or, with force, deletes the remaining pods).
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// PostDrainWait is how long a drained, cordoned node stays before it is terminated.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	PostDrainWait *metav1.Duration `json:"postDrainWait,omitempty"`
	// DeleteDrainTimeout is how long deleting the group drains its nodes before it lets
	// Auto Scaling terminate them anyway.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	DeleteDrainTimeout *metav1.Duration `json:"deleteDrainTimeout,omitempty"`
}

// NodeGroupStatus is what the controller last observed and did.
type NodeGroupStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the node group status as EKS names it (CREATING, ACTIVE, UPDATING, …).
	// +optional
	Phase NodeGroupPhase `json:"phase,omitempty"`
	// DesiredSize is the desired size the controller works toward (the spec's, with
	// defaults; a rolling update's surge is not counted).
	// +optional
	DesiredSize int32 `json:"desiredSize"`
	// ReadySize counts the group's instances whose node is Ready.
	// +optional
	ReadySize int32 `json:"readySize"`
	// UpdatedSize counts the group's instances on the current launch template version.
	// +optional
	UpdatedSize int32 `json:"updatedSize"`
	// InstanceType summarizes spec.template.instanceTypes for display.
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// LaunchTemplate is the group's launch template and its current version.
	// +optional
	LaunchTemplate *LaunchTemplateStatus `json:"launchTemplate,omitempty"`
	// SourceLaunchTemplate is the user's launch template (spec.template.launchTemplate)
	// the current version was built from, with its version resolved to a number.
	// +optional
	SourceLaunchTemplate *SourceLaunchTemplateStatus `json:"sourceLaunchTemplate,omitempty"`
	// AutoScalingGroupName is the group's Auto Scaling group.
	// +optional
	AutoScalingGroupName string `json:"autoScalingGroupName,omitempty"`
	// Instances are the Auto Scaling group's instances and their nodes.
	// +optional
	// +listType=map
	// +listMapKey=instanceID
	Instances []InstanceStatus `json:"instances,omitempty"`
	// Update is the rolling update in progress; it is persisted so that a restarted
	// controller resumes it.
	// +optional
	Update *UpdateStatus `json:"update,omitempty"`
	// ScaleIn lists the instances a lowered desired size removes, outside updates: each
	// is cordoned, drained through the Eviction API (for at most the drain timeout;
	// then its pods are deleted, as EKS terminates the node whatever the budgets say),
	// and terminated with a decrement of the desired size.
	// +optional
	ScaleIn []UpdateNode `json:"scaleIn,omitempty"`
	// Replacement is the backoff of replacing instances that did not join.
	// +optional
	Replacement *ReplacementStatus `json:"replacement,omitempty"`
	// Health lists the group's issues.
	// +optional
	Health Health `json:"health,omitempty"`
	// Conditions are Ready, Updating and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LaunchTemplateStatus names the group's launch template.
type LaunchTemplateStatus struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Version is the launch template version of the current template.
	Version string `json:"version"`
	// Hash identifies the rendered launch template data of Version, so that a change
	// of the template (or of the controller's rendering) is seen without reading the
	// version back.
	Hash string `json:"hash"`
}

// SourceLaunchTemplateStatus is the user's launch template a group's template was
// built from.
type SourceLaunchTemplateStatus struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Version is the version number read.
	Version string `json:"version"`
}

// InstanceStatus is one instance of the group.
type InstanceStatus struct {
	InstanceID string `json:"instanceID"`
	// +optional
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// LaunchTemplateVersion is the version the instance was launched with.
	// +optional
	LaunchTemplateVersion string `json:"launchTemplateVersion,omitempty"`
	// LifecycleState is the Auto Scaling lifecycle state (Pending, InService, …).
	// +optional
	LifecycleState string `json:"lifecycleState,omitempty"`
	// NodeName is the instance's node, once it registered.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Ready says whether the node is Ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// FirstSeen is when the controller first saw the instance in the group, the start
	// of its join timeout.
	FirstSeen metav1.Time `json:"firstSeen"`
	// JoinedAt is when the controller first saw the instance's node Ready. An instance
	// that joined once is past its join timeout for good: a node that goes NotReady
	// later runs pods, and is not replaced as a failed join.
	// +optional
	JoinedAt *metav1.Time `json:"joinedAt,omitempty"`
}

// UpdateStatus is the persisted state of a rolling update.
type UpdateStatus struct {
	// Phase is Setup, ScaleUp, Upgrade, ScaleDown or Failed.
	Phase UpdatePhase `json:"phase"`
	// TargetVersion is the launch template version being rolled out.
	TargetVersion string `json:"targetVersion"`
	// Strategy is the update strategy the update started with.
	Strategy UpdateStrategy `json:"strategy"`
	// MaxUnavailable is the number of nodes the update may take out at once.
	MaxUnavailable int32 `json:"maxUnavailable"`
	// Surge is how many instances the update added to the group's max and desired.
	// +optional
	Surge int32 `json:"surge,omitempty"`
	// OriginalMaxSize and OriginalDesiredSize are the Auto Scaling group's size before
	// the update, restored when it ends.
	OriginalMaxSize     int32 `json:"originalMaxSize"`
	OriginalDesiredSize int32 `json:"originalDesiredSize"`
	// StartTime is when the update started.
	StartTime metav1.Time `json:"startTime"`
	// PhaseTime is when the current phase started.
	PhaseTime metav1.Time `json:"phaseTime"`
	// Nodes are the old nodes being replaced now (at most MaxUnavailable).
	// +optional
	// +listType=map
	// +listMapKey=instanceID
	Nodes []UpdateNode `json:"nodes,omitempty"`
	// Replaced counts old instances terminated by this update.
	// +optional
	Replaced int32 `json:"replaced,omitempty"`
	// Message says what the update waits for, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// FailedGeneration is the spec generation a failed update failed at: changing the
	// spec (or setting force) resumes it.
	// +optional
	FailedGeneration int64 `json:"failedGeneration,omitempty"`
}

// UpdateNode is one old node being replaced.
type UpdateNode struct {
	InstanceID string `json:"instanceID"`
	// +optional
	NodeName string   `json:"nodeName,omitempty"`
	Step     NodeStep `json:"step"`
	// Since is when the node entered Step.
	Since metav1.Time `json:"since"`
	// DrainStart is when its drain started (the start of the drain timeout).
	// +optional
	DrainStart *metav1.Time `json:"drainStart,omitempty"`
	// Blocking names the pods (and their PodDisruptionBudgets) whose eviction was
	// last refused.
	// +optional
	Blocking []string `json:"blocking,omitempty"`
	// Forced says its drain timed out and went on by deleting the pods.
	// +optional
	Forced bool `json:"forced,omitempty"`
}

// ReplacementStatus is the backoff of replacing instances that did not join.
type ReplacementStatus struct {
	// Failures counts consecutive instances that did not join.
	Failures int32 `json:"failures"`
	// NotBefore is when the next replacement may be made.
	NotBefore metav1.Time `json:"notBefore"`
}

// Health is the group's health, as EKS reports it.
type Health struct {
	// +optional
	Issues []Issue `json:"issues,omitempty"`
}

// Issue is one health issue.
type Issue struct {
	Code    IssueCode `json:"code"`
	Message string    `json:"message"`
	// ResourceIDs are the affected instances (or nodes).
	// +optional
	ResourceIDs []string `json:"resourceIds,omitempty"`
}

// NodeGroupList is a list of NodeGroup objects.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}

// DecodeNodeGroup parses one NodeGroup manifest, YAML or JSON, strictly: an unknown
// field, a duplicate key, a value of the wrong type or another apiVersion or kind is
// an error naming the source, the line and the field. It neither defaults nor
// validates.
func DecodeNodeGroup(data []byte, source string) (*NodeGroup, error) {
	var ng NodeGroup
	_, err := strictyaml.Decode(data, source, &ng, strictyaml.Options{
		APIVersion:   GroupVersion.String(),
		Kind:         NodeGroupKind,
		MultiDocHint: "give one NodeGroup",
	})
	if err != nil {
		return nil, err
	}
	return &ng, nil
}
