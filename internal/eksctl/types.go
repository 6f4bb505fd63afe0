package eksctl

// The eksctl.io/v1alpha5 ClusterConfig, as far as nodejoin reads it. Every field eksctl
// knows is declared here, so that a field it does not know is an error with the closest
// known name. A field tagged `ignore:"reason"` is one nodejoin knows and does not use:
// each such field present in a file is listed in the parse report with that reason,
// never dropped silently. Sections nodejoin does not read at all are typed `any`: all
// their leaves are reported.
//
// Field names follow eksctl's pkg/apis/eksctl.io/v1alpha5/types.go.

// APIVersion is the only ClusterConfig version read.
const APIVersion = "eksctl.io/v1alpha5"

// Kind is the kind of an eksctl cluster file.
const Kind = "ClusterConfig"

// ClusterConfig is an eksctl cluster file.
type ClusterConfig struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   *ClusterMeta `json:"metadata"`

	NodeGroups        []*NodeGroup        `json:"nodeGroups,omitempty"`
	ManagedNodeGroups []*ManagedNodeGroup `json:"managedNodeGroups,omitempty"`

	KubernetesNetworkConfig any `json:"kubernetesNetworkConfig,omitempty" ignore:"the local cluster's service range is fixed (10.100.0.0/16, kube-dns 10.100.0.10)"`
	UpgradePolicy           any `json:"upgradePolicy,omitempty" ignore:"the local cluster has no support tiers"`
	AutoModeConfig          any `json:"autoModeConfig,omitempty" ignore:"EKS Auto Mode is not modelled; use node groups"`
	RemoteNetworkConfig     any `json:"remoteNetworkConfig,omitempty" ignore:"hybrid nodes are not modelled"`
	IAM                     any `json:"iam,omitempty" ignore:"cluster IAM (OIDC, service accounts) is not modelled; nodes authenticate with the local cloud's instance role"`
	IAMIdentityMappings     any `json:"iamIdentityMappings,omitempty" ignore:"create a NodeAccessEntry or edit kube-system/aws-auth in the cluster instead"`
	IdentityProviders       any `json:"identityProviders,omitempty" ignore:"OIDC identity providers are not modelled"`
	AccessConfig            any `json:"accessConfig,omitempty" ignore:"node access is granted by NodeAccessEntry objects, which nodejoin creates for its node groups"`
	VPC                     any `json:"vpc,omitempty" ignore:"the local cloud has one network; instances take addresses from the cluster's node range (nodejoin up --node-cidr)"`
	Addons                  any `json:"addons,omitempty" ignore:"nodejoin up installs kube-proxy and CoreDNS itself"`
	AddonsConfig            any `json:"addonsConfig,omitempty" ignore:"nodejoin up installs kube-proxy and CoreDNS itself"`
	PrivateCluster          any `json:"privateCluster,omitempty" ignore:"the local API server listens on loopback only"`
	FargateProfiles         any `json:"fargateProfiles,omitempty" ignore:"Fargate is not modelled"`
	AvailabilityZones       any `json:"availabilityZones,omitempty" ignore:"the local cloud's availability zones are fixed"`
	LocalZones              any `json:"localZones,omitempty" ignore:"the local cloud has no local zones"`
	CloudWatch              any `json:"cloudWatch,omitempty" ignore:"no CloudWatch locally; control-plane logs are in the cluster's log directory (nodejoin export logs)"`
	SecretsEncryption       any `json:"secretsEncryption,omitempty" ignore:"no KMS locally"`
	GitOps                  any `json:"gitops,omitempty" ignore:"GitOps bootstrapping is not modelled"`
	Karpenter               any `json:"karpenter,omitempty" ignore:"Karpenter is not installed"`
	Outpost                 any `json:"outpost,omitempty" ignore:"Outposts are not modelled"`
	ControlPlaneScaling     any `json:"controlPlaneScalingConfig,omitempty" ignore:"the local control plane has one size"`
	ZonalShiftConfig        any `json:"zonalShiftConfig,omitempty" ignore:"zonal shift is not modelled"`
	KubeAPIServerConfig     any `json:"kubeAPIServerConfig,omitempty" ignore:"the local kube-apiserver's flags are fixed"`
	KubeSchedulerConfig     any `json:"kubeSchedulerConfig,omitempty" ignore:"the local kube-scheduler's configuration is fixed"`
	KubeControllerManager   any `json:"kubeControllerManagerConfig,omitempty" ignore:"the local kube-controller-manager's flags are fixed"`
	Capabilities            any `json:"capabilities,omitempty" ignore:"EKS capabilities are not modelled"`
}

// ClusterMeta is the cluster's metadata.
type ClusterMeta struct {
	// Name is the cluster's name: the default of --name, and the value of the
	// alpha.eksctl.io/cluster-name label.
	Name               string            `json:"name"`
	Region             string            `json:"region,omitempty" ignore:"a local cluster has no region"`
	Version            string            `json:"version,omitempty" ignore:"the local cluster runs the pinned Kubernetes version"`
	ForceUpdateVersion *bool             `json:"forceUpdateVersion,omitempty" ignore:"the local cluster runs the pinned Kubernetes version"`
	RollbackConfig     any               `json:"rollbackConfig,omitempty" ignore:"the local cluster runs the pinned Kubernetes version"`
	Tags               map[string]string `json:"tags,omitempty"`
	Annotations        map[string]string `json:"annotations,omitempty" ignore:"eksctl's own annotations have no meaning to nodejoin"`
}

// ScalingConfig is a group's size. Nil means "not set": eksctl derives the others.
type ScalingConfig struct {
	DesiredCapacity *int `json:"desiredCapacity,omitempty"`
	MinSize         *int `json:"minSize,omitempty"`
	MaxSize         *int `json:"maxSize,omitempty"`
}

// NodeGroupBase holds the fields of both kinds of group.
type NodeGroupBase struct {
	Name      string `json:"name"`
	AMIFamily string `json:"amiFamily,omitempty"`
	// AMI is ami-…, auto or auto-ssm.
	AMI          string `json:"ami,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`

	ScalingConfig `json:",inline"`

	Labels               map[string]string  `json:"labels,omitempty"`
	Tags                 map[string]string  `json:"tags,omitempty"`
	MaxPodsPerNode       int                `json:"maxPodsPerNode,omitempty"`
	PreBootstrapCommands []string           `json:"preBootstrapCommands,omitempty"`
	OverrideBootstrap    *string            `json:"overrideBootstrapCommand,omitempty"`
	Bottlerocket         *BottlerocketGroup `json:"bottlerocket,omitempty"`
	UpdateConfig         *UpdateConfig      `json:"updateConfig,omitempty"`

	AvailabilityZones []string `json:"availabilityZones,omitempty" ignore:"the local Auto Scaling group spreads instances over the local cloud's zones"`
	Subnets           []string `json:"subnets,omitempty" ignore:"the local cloud has one network; instances take addresses from the cluster's node range"`
	PrivateNetworking *bool    `json:"privateNetworking,omitempty" ignore:"local instances have only private addresses"`
	InstancePrefix    string   `json:"instancePrefix,omitempty" ignore:"nodes are named after their private DNS names, as on EKS"`
	InstanceName      string   `json:"instanceName,omitempty" ignore:"nodes are named after their private DNS names, as on EKS"`
	SSH               *SSH     `json:"ssh,omitempty" ignore:"local instances have no SSH; use nodejoin diagnose node and nodejoin export logs"`
	IAM               *IAM     `json:"iam,omitempty" ignore:"instances run with the instance profile the node group controller is configured with"`
	SecurityGroups    any      `json:"securityGroups,omitempty" ignore:"the local network has no security groups"`

	VolumeSize        *int    `json:"volumeSize,omitempty" ignore:"local instances have no EBS volumes; their root is a directory on the host"`
	VolumeType        *string `json:"volumeType,omitempty" ignore:"local instances have no EBS volumes"`
	VolumeName        *string `json:"volumeName,omitempty" ignore:"local instances have no EBS volumes"`
	VolumeEncrypted   *bool   `json:"volumeEncrypted,omitempty" ignore:"local instances have no EBS volumes"`
	VolumeKmsKeyID    *string `json:"volumeKmsKeyID,omitempty" ignore:"local instances have no EBS volumes"`
	VolumeIOPS        *int    `json:"volumeIOPS,omitempty" ignore:"local instances have no EBS volumes"`
	VolumeThroughput  *int    `json:"volumeThroughput,omitempty" ignore:"local instances have no EBS volumes"`
	AdditionalVolumes any     `json:"additionalVolumes,omitempty" ignore:"local instances have no EBS volumes"`
	EBSOptimized      *bool   `json:"ebsOptimized,omitempty" ignore:"local instances have no EBS volumes"`

	ASGSuspendProcesses      []string `json:"asgSuspendProcesses,omitempty" ignore:"the node group controller drives the Auto Scaling group itself"`
	PropagateASGTags         *bool    `json:"propagateASGTags,omitempty" ignore:"no cluster autoscaler runs locally"`
	DisableIMDSv1            *bool    `json:"disableIMDSv1,omitempty" ignore:"the local IMDS is the same for every instance"`
	DisablePodIMDS           *bool    `json:"disablePodIMDS,omitempty" ignore:"the local IMDS is the same for every instance"`
	Placement                any      `json:"placement,omitempty" ignore:"no placement groups locally"`
	EFAEnabled               *bool    `json:"efaEnabled,omitempty" ignore:"no EFA locally"`
	InstanceSelector         any      `json:"instanceSelector,omitempty" ignore:"give instanceType (or instanceTypes) instead; instance selection is not modelled"`
	EnableDetailedMonitoring *bool    `json:"enableDetailedMonitoring,omitempty" ignore:"no CloudWatch locally"`
	CapacityReservation      any      `json:"capacityReservation,omitempty" ignore:"no capacity reservations locally"`
	InstanceMarketOptions    any      `json:"instanceMarketOptions,omitempty" ignore:"market options are not modelled; use spot: true for a Spot group"`
	OutpostARN               string   `json:"outpostARN,omitempty" ignore:"Outposts are not modelled"`
}

// NodeGroup is a self-managed group (nodeGroups).
type NodeGroup struct {
	NodeGroupBase `json:",inline"`

	InstancesDistribution *InstancesDistribution `json:"instancesDistribution,omitempty"`
	Taints                Taints                 `json:"taints,omitempty"`
	ClusterDNS            string                 `json:"clusterDNS,omitempty"`
	KubeletExtraConfig    map[string]any         `json:"kubeletExtraConfig,omitempty"`

	ContainerRuntime         *string  `json:"containerRuntime,omitempty" ignore:"containerd is the only container runtime"`
	ASGMetricsCollection     any      `json:"asgMetricsCollection,omitempty" ignore:"no CloudWatch locally"`
	CPUCredits               *string  `json:"cpuCredits,omitempty" ignore:"local instances have no CPU credits"`
	ClassicLoadBalancerNames []string `json:"classicLoadBalancerNames,omitempty" ignore:"no load balancers locally"`
	TargetGroupARNs          []string `json:"targetGroupARNs,omitempty" ignore:"no load balancers locally"`
	MaxInstanceLifetime      *int     `json:"maxInstanceLifetime,omitempty" ignore:"instances are not replaced by age"`
	LocalZones               []string `json:"localZones,omitempty" ignore:"the local cloud has no local zones"`
	EnclaveEnabled           *bool    `json:"enclaveEnabled,omitempty" ignore:"no Nitro Enclaves locally"`
}

// ManagedNodeGroup is an EKS managed group (managedNodeGroups).
type ManagedNodeGroup struct {
	NodeGroupBase `json:",inline"`

	InstanceTypes []string `json:"instanceTypes,omitempty"`
	Spot          bool     `json:"spot,omitempty"`
	Taints        []Taint  `json:"taints,omitempty"`

	LaunchTemplate   any    `json:"launchTemplate,omitempty" ignore:"the node group controller creates and versions the group's launch template itself"`
	ReleaseVersion   string `json:"releaseVersion,omitempty" ignore:"there are no AMI releases: local instances run the pinned kubelet"`
	NodeRepairConfig any    `json:"nodeRepairConfig,omitempty" ignore:"node auto-repair is not modelled; instances that never join raise NodeCreationFailure"`
}

// Taint is a group's taint.
type Taint struct {
	Key    string `json:"key,omitempty"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect,omitempty"`
}

// Taints is a self-managed group's taints: a list of {key, value, effect} or, in
// eksctl's older form, a map of key to "value:Effect".
type Taints []Taint

// UpdateConfig is a group's rolling-update parallelism.
type UpdateConfig struct {
	MaxUnavailable           *int `json:"maxUnavailable,omitempty"`
	MaxUnavailablePercentage *int `json:"maxUnavailablePercentage,omitempty"`
}

// BottlerocketGroup holds a Bottlerocket group's settings.
type BottlerocketGroup struct {
	// Settings is TOML settings as a YAML tree, under [settings].
	Settings             map[string]any `json:"settings,omitempty"`
	EnableAdminContainer *bool          `json:"enableAdminContainer,omitempty" ignore:"local instances run no host containers"`
}

// InstancesDistribution is a self-managed group's mixed-instances policy.
type InstancesDistribution struct {
	InstanceTypes                       []string `json:"instanceTypes,omitempty"`
	MaxPrice                            *float64 `json:"maxPrice,omitempty" ignore:"no Spot prices locally"`
	OnDemandBaseCapacity                *int     `json:"onDemandBaseCapacity,omitempty" ignore:"a local group has one capacity type; all-Spot groups are recognised by onDemandPercentageAboveBaseCapacity: 0"`
	OnDemandPercentageAboveBaseCapacity *int     `json:"onDemandPercentageAboveBaseCapacity,omitempty"`
	SpotInstancePools                   *int     `json:"spotInstancePools,omitempty" ignore:"no Spot pools locally"`
	SpotAllocationStrategy              *string  `json:"spotAllocationStrategy,omitempty" ignore:"no Spot pools locally"`
	CapacityRebalance                   *bool    `json:"capacityRebalance,omitempty" ignore:"no Spot interruptions locally"`
}

// SSH is a group's SSH access, which local instances do not have.
type SSH struct {
	Allow                  *bool    `json:"allow,omitempty"`
	PublicKeyPath          *string  `json:"publicKeyPath,omitempty"`
	PublicKey              *string  `json:"publicKey,omitempty"`
	PublicKeyName          *string  `json:"publicKeyName,omitempty"`
	SourceSecurityGroupIDs []string `json:"sourceSecurityGroupIds,omitempty"`
	EnableSSM              *bool    `json:"enableSsm,omitempty"`
}

// IAM is a group's instance role.
type IAM struct {
	AttachPolicy                    map[string]any `json:"attachPolicy,omitempty"`
	AttachPolicyARNs                []string       `json:"attachPolicyARNs,omitempty"`
	InstanceProfileARN              string         `json:"instanceProfileARN,omitempty"`
	InstanceRoleARN                 string         `json:"instanceRoleARN,omitempty"`
	InstanceRoleName                string         `json:"instanceRoleName,omitempty"`
	InstanceRolePermissionsBoundary string         `json:"instanceRolePermissionsBoundary,omitempty"`
	WithAddonPolicies               *AddonPolicies `json:"withAddonPolicies,omitempty"`
}

// AddonPolicies are the IAM policies eksctl attaches for add-ons.
type AddonPolicies struct {
	ImageBuilder              *bool `json:"imageBuilder,omitempty"`
	AutoScaler                *bool `json:"autoScaler,omitempty"`
	ExternalDNS               *bool `json:"externalDNS,omitempty"`
	CertManager               *bool `json:"certManager,omitempty"`
	AppMesh                   *bool `json:"appMesh,omitempty"`
	AppMeshPreview            *bool `json:"appMeshPreview,omitempty"`
	EBS                       *bool `json:"ebs,omitempty"`
	FSX                       *bool `json:"fsx,omitempty"`
	EFS                       *bool `json:"efs,omitempty"`
	AWSLoadBalancerController *bool `json:"awsLoadBalancerController,omitempty"`
	ALBIngress                *bool `json:"albIngress,omitempty"`
	XRay                      *bool `json:"xRay,omitempty"`
	CloudWatch                *bool `json:"cloudWatch,omitempty"`
}
