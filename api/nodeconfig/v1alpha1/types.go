// Package v1alpha1 is the NodeConfig API of group node.eks.aws, version v1alpha1: the
// configuration that EKS AL2023 nodes receive in their user data. Its fields and JSON
// names match the upstream API exactly, so existing user data decodes unchanged;
// decoding here is strict (see Decode).
//
// types.go holds the types, decode.go the strict decoding and validate.go the
// validation, as Kubernetes API packages keep them. Of nodejoin it imports only
// internal/editdistance (for the closest field name of an unknown one).
package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, version and kind of the API.
const (
	GroupName  = "node.eks.aws"
	Version    = "v1alpha1"
	Kind       = "NodeConfig"
	APIVersion = GroupName + "/" + Version
	// MediaType is the MIME type of a user-data part that holds a NodeConfig.
	MediaType = "application/" + GroupName
)

// NodeConfig configures a node: which cluster it joins and how its kubelet, container
// runtime and instance are set up.
type NodeConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeConfigSpec `json:"spec,omitempty"`
}

// NodeConfigSpec is the desired configuration of a node.
type NodeConfigSpec struct {
	Cluster      ClusterDetails    `json:"cluster,omitempty"`
	Containerd   ContainerdOptions `json:"containerd,omitempty"`
	Instance     InstanceOptions   `json:"instance,omitempty"`
	Kubelet      KubeletOptions    `json:"kubelet,omitempty"`
	FeatureGates map[Feature]bool  `json:"featureGates,omitempty"`
}

// ClusterDetails identifies the cluster the node joins.
type ClusterDetails struct {
	// Name is the cluster's name.
	Name string `json:"name,omitempty"`
	// APIServerEndpoint is the URL of the cluster's API server.
	APIServerEndpoint string `json:"apiServerEndpoint,omitempty"`
	// CertificateAuthority is the cluster CA bundle (PEM); base64 in YAML and JSON.
	CertificateAuthority []byte `json:"certificateAuthority,omitempty"`
	// CIDR is the cluster's *service* CIDR (not the VPC's or the pods'); the cluster
	// DNS address is derived from it.
	CIDR string `json:"cidr,omitempty"`
	// EnableOutpost marks a cluster whose control plane runs on an Outpost.
	EnableOutpost *bool `json:"enableOutpost,omitempty"`
	// ID is the cluster's ID, used in place of the name on Outposts.
	ID string `json:"id,omitempty"`
}

// KubeletOptions configure the kubelet.
type KubeletOptions struct {
	// Config is a partial KubeletConfiguration, written as a drop-in over the defaults.
	Config InlineDocument `json:"config,omitempty"`
	// Flags are appended to the kubelet's command line after the computed ones.
	Flags []string `json:"flags,omitempty"`
	// MaxPodsExpression is a CEL expression over default_enis, ips_per_eni and
	// max_pods that computes the node's max pods.
	MaxPodsExpression string `json:"maxPodsExpression,omitempty"`
}

// ContainerdOptions configure containerd.
type ContainerdOptions struct {
	// Config is TOML merged over the default containerd configuration.
	Config string `json:"config,omitempty"`
	// BaseRuntimeSpec is a partial OCI runtime spec merged over the default one.
	BaseRuntimeSpec InlineDocument `json:"baseRuntimeSpec,omitempty"`
}

// InstanceOptions configure the host.
type InstanceOptions struct {
	LocalStorage LocalStorageOptions `json:"localStorage,omitempty"`
	// Environment holds environment variables: key "default" for every service,
	// otherwise a systemd unit name.
	Environment map[string]map[string]string `json:"environment,omitempty"`
	Network     InstanceNetworkOptions       `json:"network,omitempty"`
}

// LocalStorageOptions configure the instance-store disks.
type LocalStorageOptions struct {
	Strategy       LocalStorageStrategy `json:"strategy,omitempty"`
	MountPath      string               `json:"mountPath,omitempty"`
	DisabledMounts []DisabledMount      `json:"disabledMounts,omitempty"`
}

// InstanceNetworkOptions configure name resolution.
type InstanceNetworkOptions struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domains     []string `json:"domains,omitempty"`
}

// LocalStorageStrategy says how instance-store disks are used.
type LocalStorageStrategy string

// The local storage strategies.
const (
	LocalStorageRAID0  LocalStorageStrategy = "RAID0"
	LocalStorageRAID10 LocalStorageStrategy = "RAID10"
	LocalStorageMount  LocalStorageStrategy = "Mount"
)

// DisabledMount names a bind mount onto local storage that is not made.
type DisabledMount string

// The mounts that can be disabled.
const (
	DisabledMountContainerd DisabledMount = "Containerd"
	DisabledMountPodLogs    DisabledMount = "PodLogs"
	DisabledMountSOCI       DisabledMount = "SOCI"
)

// Feature names a feature gate.
type Feature string

// The feature gates; both default to false.
const (
	FeatureInstanceIDNodeName Feature = "InstanceIdNodeName"
	FeatureFastImagePull      Feature = "FastImagePull"
)

// KnownFeatures lists every feature gate.
var KnownFeatures = []Feature{FeatureFastImagePull, FeatureInstanceIDNodeName}

// Enabled reports whether gate is set to true.
func (s *NodeConfigSpec) Enabled(gate Feature) bool { return s.FeatureGates[gate] }

// InlineDocument is a free-form JSON object, such as a partial KubeletConfiguration.
// Values keep their exact JSON text.
type InlineDocument map[string]json.RawMessage
