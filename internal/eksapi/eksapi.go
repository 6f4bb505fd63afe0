// Package eksapi owns EKS's wire objects as the local EKS serves them and nodejoin prints
// them: clusters, node groups, updates, access entries and cluster versions, with the JSON
// names aws-sdk-go-v2's EKS (de)serializers use, the request bodies of the operations the
// local EKS implements, and the errors a Backend returns in EKS's codes. It is neutral: the
// server (internal/localaws/eks), the backend over NodeGroup objects
// (internal/nodegroup/eksbackend) and the CLI (internal/nodegroup/client) all import it, and
// it imports nothing of theirs.
package eksapi

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Time is a timestamp on EKS's wire: epoch seconds as a JSON number (with milliseconds),
// the only form the SDK's REST-JSON deserializer takes for createdAt and modifiedAt.
type Time struct{ time.Time }

// NewTime wraps t, truncated to the millisecond EKS reports.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// MarshalJSON writes epoch seconds, e.g. 1663149276.211.
func (t Time) MarshalJSON() ([]byte, error) {
	ms := t.UnixMilli()
	return []byte(strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)), nil
}

// UnmarshalJSON reads epoch seconds; a string is refused, as the SDK refuses it.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("timestamp %s: want epoch seconds as a number", b)
	}
	sec, frac := math.Modf(f)
	*t = Time{time.Unix(int64(sec), int64(math.Round(frac*1000))*int64(time.Millisecond)).UTC()}
	return nil
}

// Cluster is EKS's Cluster (DescribeCluster).
type Cluster struct {
	Name                    string                   `json:"name"`
	Arn                     string                   `json:"arn"`
	ID                      string                   `json:"id,omitempty"`
	CreatedAt               Time                     `json:"createdAt,omitzero"`
	Version                 string                   `json:"version"`
	Endpoint                string                   `json:"endpoint"`
	RoleArn                 string                   `json:"roleArn,omitempty"`
	ResourcesVpcConfig      VpcConfig                `json:"resourcesVpcConfig"`
	KubernetesNetworkConfig *KubernetesNetworkConfig `json:"kubernetesNetworkConfig,omitempty"`
	CertificateAuthority    *CertificateAuthority    `json:"certificateAuthority,omitempty"`
	PlatformVersion         string                   `json:"platformVersion,omitempty"`
	Status                  string                   `json:"status"`
	AccessConfig            *AccessConfig            `json:"accessConfig,omitempty"`
	Tags                    map[string]string        `json:"tags"`
}

// VpcConfig is the cluster's resourcesVpcConfig. eksctl dereferences it on every
// command, so a cluster always has one.
type VpcConfig struct {
	SubnetIDs              []string `json:"subnetIds"`
	SecurityGroupIDs       []string `json:"securityGroupIds"`
	ClusterSecurityGroupID string   `json:"clusterSecurityGroupId,omitempty"`
	VpcID                  string   `json:"vpcId,omitempty"`
	EndpointPublicAccess   bool     `json:"endpointPublicAccess"`
	EndpointPrivateAccess  bool     `json:"endpointPrivateAccess"`
	PublicAccessCidrs      []string `json:"publicAccessCidrs"`
}

// KubernetesNetworkConfig is the cluster's service network.
type KubernetesNetworkConfig struct {
	ServiceIpv4Cidr string `json:"serviceIpv4Cidr,omitempty"`
	ServiceIpv6Cidr string `json:"serviceIpv6Cidr,omitempty"`
	IPFamily        string `json:"ipFamily"`
}

// CertificateAuthority is the cluster CA, base64 of its PEM.
type CertificateAuthority struct {
	Data string `json:"data"`
}

// AccessConfig is the cluster's authentication mode (API_AND_CONFIG_MAP for nodejoin:
// access entries and aws-auth both admit nodes).
type AccessConfig struct {
	AuthenticationMode string `json:"authenticationMode"`
}

// ClusterVersion is EKS's ClusterVersionInformation (DescribeClusterVersions).
type ClusterVersion struct {
	ClusterVersion         string `json:"clusterVersion"`
	ClusterType            string `json:"clusterType,omitempty"`
	DefaultPlatformVersion string `json:"defaultPlatformVersion,omitempty"`
	DefaultVersion         bool   `json:"defaultVersion"`
	ReleaseDate            Time   `json:"releaseDate,omitzero"`
	Status                 string `json:"status"`
	VersionStatus          string `json:"versionStatus,omitempty"`
	KubernetesPatchVersion string `json:"kubernetesPatchVersion,omitempty"`
}

// Nodegroup is EKS's Nodegroup (API_Nodegroup), in the order the AWS CLI prints it.
type Nodegroup struct {
	NodegroupName  string            `json:"nodegroupName"`
	NodegroupArn   string            `json:"nodegroupArn"`
	ClusterName    string            `json:"clusterName"`
	Version        string            `json:"version,omitempty"`
	ReleaseVersion string            `json:"releaseVersion,omitempty"`
	CreatedAt      Time              `json:"createdAt,omitzero"`
	ModifiedAt     Time              `json:"modifiedAt,omitzero"`
	Status         string            `json:"status"`
	CapacityType   string            `json:"capacityType"`
	ScalingConfig  ScalingConfig     `json:"scalingConfig"`
	InstanceTypes  []string          `json:"instanceTypes"`
	Subnets        []string          `json:"subnets"`
	AmiType        string            `json:"amiType"`
	NodeRole       string            `json:"nodeRole,omitempty"`
	Labels         map[string]string `json:"labels"`
	Taints         []Taint           `json:"taints,omitempty"`
	Resources      Resources         `json:"resources"`
	DiskSize       *int32            `json:"diskSize,omitempty"`
	Health         Health            `json:"health"`
	UpdateConfig   UpdateConfig      `json:"updateConfig"`
	LaunchTemplate *LaunchTemplate   `json:"launchTemplate,omitempty"`
	Tags           map[string]string `json:"tags"`
}

// ScalingConfig is a node group's sizes.
type ScalingConfig struct {
	MinSize     *int32 `json:"minSize,omitempty"`
	MaxSize     *int32 `json:"maxSize,omitempty"`
	DesiredSize *int32 `json:"desiredSize,omitempty"`
}

// Taint is a taint with EKS's effect names (NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE).
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Resources are a node group's Auto Scaling groups.
type Resources struct {
	AutoScalingGroups         []AutoScalingGroup `json:"autoScalingGroups"`
	RemoteAccessSecurityGroup string             `json:"remoteAccessSecurityGroup,omitempty"`
}

// AutoScalingGroup names one.
type AutoScalingGroup struct {
	Name string `json:"name"`
}

// Health lists a node group's issues; empty, never absent, when healthy.
type Health struct {
	Issues []Issue `json:"issues"`
}

// Issue is a health issue with its EKS code.
type Issue struct {
	Code        string   `json:"code"`
	Message     string   `json:"message"`
	ResourceIDs []string `json:"resourceIds,omitempty"`
}

// UpdateConfig is a node group's rolling-update parallelism and strategy.
type UpdateConfig struct {
	MaxUnavailable           *int32 `json:"maxUnavailable,omitempty"`
	MaxUnavailablePercentage *int32 `json:"maxUnavailablePercentage,omitempty"`
	UpdateStrategy           string `json:"updateStrategy,omitempty"`
}

// LaunchTemplate names a launch template version.
type LaunchTemplate struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	ID      string `json:"id,omitempty"`
}

// Update is EKS's Update (DescribeUpdate).
type Update struct {
	ID        string        `json:"id"`
	Status    string        `json:"status"`
	Type      string        `json:"type"`
	Params    []UpdateParam `json:"params"`
	CreatedAt Time          `json:"createdAt,omitzero"`
	Errors    []ErrorDetail `json:"errors"`
}

// UpdateParam is one parameter of an update.
type UpdateParam struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ErrorDetail is why an update failed.
type ErrorDetail struct {
	ErrorCode    string   `json:"errorCode"`
	ErrorMessage string   `json:"errorMessage"`
	ResourceIDs  []string `json:"resourceIds,omitempty"`
}

// The update statuses and types nodejoin reports.
const (
	UpdateInProgress = "InProgress"
	UpdateSuccessful = "Successful"
	UpdateFailed     = "Failed"

	UpdateTypeVersion = "VersionUpdate"
	UpdateTypeConfig  = "ConfigUpdate"
)

// The update parameter types nodejoin records (EKS's UpdateParamType names).
const (
	ParamVersion                  = "Version"
	ParamReleaseVersion           = "ReleaseVersion"
	ParamMinSize                  = "MinSize"
	ParamMaxSize                  = "MaxSize"
	ParamDesiredSize              = "DesiredSize"
	ParamLabelsToAdd              = "LabelsToAdd"
	ParamLabelsToRemove           = "LabelsToRemove"
	ParamTaintsToAdd              = "TaintsToAdd"
	ParamTaintsToRemove           = "TaintsToRemove"
	ParamMaxUnavailable           = "MaxUnavailable"
	ParamMaxUnavailablePercentage = "MaxUnavailablePercentage"
	ParamUpdateStrategy           = "UpdateStrategy"
	ParamForce                    = "Force"
)

// AccessEntry is EKS's AccessEntry.
type AccessEntry struct {
	ClusterName      string            `json:"clusterName"`
	PrincipalArn     string            `json:"principalArn"`
	KubernetesGroups []string          `json:"kubernetesGroups"`
	AccessEntryArn   string            `json:"accessEntryArn"`
	CreatedAt        Time              `json:"createdAt,omitzero"`
	ModifiedAt       Time              `json:"modifiedAt,omitzero"`
	Tags             map[string]string `json:"tags"`
	Username         string            `json:"username"`
	Type             string            `json:"type"`
}

// The access entry types the local EKS supports: node roles, and STANDARD for IAM
// users and roles that get a username, groups and access policies.
const (
	AccessEntryEC2Linux   = "EC2_LINUX"
	AccessEntryEC2Windows = "EC2_WINDOWS"
	AccessEntryStandard   = "STANDARD"
)

// AccessScope is EKS's AccessScope: type cluster or namespace, and the namespaces.
type AccessScope struct {
	Type       string   `json:"type,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
}

// AssociatedAccessPolicy is EKS's AssociatedAccessPolicy.
type AssociatedAccessPolicy struct {
	PolicyArn    string      `json:"policyArn"`
	AccessScope  AccessScope `json:"accessScope"`
	AssociatedAt Time        `json:"associatedAt,omitzero"`
	ModifiedAt   Time        `json:"modifiedAt,omitzero"`
}

// AccessPolicyARNPrefix begins every EKS access policy's ARN.
const AccessPolicyARNPrefix = "arn:aws:eks::aws:cluster-access-policy/"

// AccessPolicyNames are the access policies the local EKS associates with STANDARD
// entries (api/nodejoin/v1alpha1.AccessPolicies says which ClusterRole each grants).
var AccessPolicyNames = []string{"AmazonEKSAdminPolicy", "AmazonEKSClusterAdminPolicy", "AmazonEKSEditPolicy", "AmazonEKSViewPolicy"}

// AccessPolicy is EKS's AccessPolicy (ListAccessPolicies).
type AccessPolicy struct {
	Name string `json:"name"`
	Arn  string `json:"arn"`
}
