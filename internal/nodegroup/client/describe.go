package client

import (
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Description is a group in the shape of `aws eks describe-nodegroup`'s output.
type Description struct {
	Nodegroup Nodegroup `json:"nodegroup"`
}

// Nodegroup is the EKS Nodegroup object (API_Nodegroup), field for field where nodejoin
// has the value, in the order the AWS CLI prints them.
type Nodegroup struct {
	NodegroupName  string            `json:"nodegroupName"`
	NodegroupArn   string            `json:"nodegroupArn"`
	ClusterName    string            `json:"clusterName"`
	Version        string            `json:"version,omitempty"`
	CreatedAt      string            `json:"createdAt"`
	ModifiedAt     string            `json:"modifiedAt"`
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
	Health         Health            `json:"health"`
	UpdateConfig   UpdateConfig      `json:"updateConfig"`
	LaunchTemplate *LaunchTemplate   `json:"launchTemplate,omitempty"`
	Tags           map[string]string `json:"tags"`
}

// ScalingConfig is the group's sizes.
type ScalingConfig struct {
	MinSize     int32 `json:"minSize"`
	MaxSize     int32 `json:"maxSize"`
	DesiredSize int32 `json:"desiredSize"`
}

// Taint is a taint with EKS's effect names (NO_SCHEDULE, …).
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Resources are the group's Auto Scaling groups.
type Resources struct {
	AutoScalingGroups         []AutoScalingGroup `json:"autoScalingGroups"`
	RemoteAccessSecurityGroup string             `json:"remoteAccessSecurityGroup,omitempty"`
}

// AutoScalingGroup names one.
type AutoScalingGroup struct {
	Name string `json:"name"`
}

// Health lists the group's issues; the list is empty, never absent, when healthy.
type Health struct {
	Issues []Issue `json:"issues"`
}

// Issue is a health issue with its EKS code.
type Issue struct {
	Code        string   `json:"code"`
	Message     string   `json:"message"`
	ResourceIDs []string `json:"resourceIds,omitempty"`
}

// UpdateConfig is the group's rolling-update parallelism and strategy.
type UpdateConfig struct {
	MaxUnavailable           *int32 `json:"maxUnavailable,omitempty"`
	MaxUnavailablePercentage *int32 `json:"maxUnavailablePercentage,omitempty"`
	UpdateStrategy           string `json:"updateStrategy,omitempty"`
}

// LaunchTemplate names the group's launch template version.
type LaunchTemplate struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	ID      string `json:"id"`
}

// Account says where the group lives, for its ARN and role.
type Account struct {
	// Cluster is the cluster's name.
	Cluster string
	// Region and AccountID are the cloud's.
	Region, AccountID string
	// Version is the cluster's Kubernetes version, major.minor.
	Version string
	// NodeRole is the name of the role of the instances of a group whose template
	// names no instance profile; "" when unknown.
	NodeRole string
}

// awsTime is how the AWS CLI prints timestamps: 2022-09-14T09:54:36.211000+00:00.
const awsTime = "2006-01-02T15:04:05.000000-07:00"

// Describe renders ng as `aws eks describe-nodegroup` would.
func Describe(ng *v1alpha1.NodeGroup, a Account) Description {
	s, t := ng.Spec, ng.Spec.Template
	d := Nodegroup{
		NodegroupName: ng.Name,
		NodegroupArn:  fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%s", a.Region, a.AccountID, a.Cluster, ng.Name, ng.UID),
		ClusterName:   a.Cluster,
		Version:       a.Version,
		CreatedAt:     ng.CreationTimestamp.UTC().Format(awsTime),
		ModifiedAt:    modifiedAt(ng).UTC().Format(awsTime),
		Status:        string(ng.Status.Phase),
		CapacityType:  string(orDefault(t.CapacityType, v1alpha1.CapacityOnDemand)),
		ScalingConfig: ScalingConfig{MinSize: s.Scaling.MinSize, MaxSize: s.Scaling.MaxSize, DesiredSize: DesiredSize(ng)},
		InstanceTypes: InstanceTypes(ng),
		Subnets:       append([]string{}, s.Subnets...),
		AmiType:       AMIType(ng),
		NodeRole:      nodeRole(ng, a),
		Labels:        maps.Clone(t.Labels),
		Resources:     Resources{AutoScalingGroups: []AutoScalingGroup{}},
		Health:        Health{Issues: []Issue{}},
		Tags:          maps.Clone(ng.Labels),
	}
	if d.Status == "" {
		d.Status = string(v1alpha1.PhaseCreating)
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	for _, tt := range t.Taints {
		d.Taints = append(d.Taints, Taint{Key: tt.Key, Value: tt.Value, Effect: taintEffect(tt.Effect)})
	}
	if n := ng.Status.AutoScalingGroupName; n != "" {
		d.Resources.AutoScalingGroups = append(d.Resources.AutoScalingGroups, AutoScalingGroup{Name: n})
	}
	for _, is := range ng.Status.Health.Issues {
		d.Health.Issues = append(d.Health.Issues, Issue{Code: string(is.Code), Message: is.Message, ResourceIDs: is.ResourceIDs})
	}
	if u := s.UpdateConfig; u != nil && (u.MaxUnavailable != nil || u.MaxUnavailablePercentage != nil) {
		d.UpdateConfig.MaxUnavailable, d.UpdateConfig.MaxUnavailablePercentage = u.MaxUnavailable, u.MaxUnavailablePercentage
	} else {
		d.UpdateConfig.MaxUnavailable = ptr(int32(1)) // EKS's default
	}
	d.UpdateConfig.UpdateStrategy = string(orDefault(s.UpdateStrategy, v1alpha1.UpdateStrategyDefault))
	if lt := ng.Status.LaunchTemplate; lt != nil {
		d.LaunchTemplate = &LaunchTemplate{Name: lt.Name, Version: lt.Version, ID: lt.ID}
	}
	return Description{Nodegroup: d}
}

// nodeRole is the ARN of the role of the group's instances: its template's instance
// profile's (named after its role, as the local cloud's are) or the default.
func nodeRole(ng *v1alpha1.NodeGroup, a Account) string {
	role := a.NodeRole
	if p := ng.Spec.Template.InstanceProfile; p != "" {
		if _, name, ok := strings.Cut(p, ":instance-profile/"); ok {
			p = name[strings.LastIndex(name, "/")+1:]
		}
		role = p
	}
	if role == "" {
		return ""
	}
	return fmt.Sprintf("arn:aws:iam::%s:role/%s", a.AccountID, role)
}

// DesiredSize is the group's desired size: the spec's, or its minimum.
func DesiredSize(ng *v1alpha1.NodeGroup) int32 {
	if d := ng.Spec.Scaling.DesiredSize; d != nil {
		return *d
	}
	return ng.Spec.Scaling.MinSize
}

// InstanceTypes are the group's instance types, with the default.
func InstanceTypes(ng *v1alpha1.NodeGroup) []string {
	if len(ng.Spec.Template.InstanceTypes) == 0 {
		return []string{"m5.large"}
	}
	return append([]string{}, ng.Spec.Template.InstanceTypes...)
}

// AMIType is the EKS amiType of the group's family: CUSTOM when the group names an
// image, as EKS reports a launch template with an image.
func AMIType(ng *v1alpha1.NodeGroup) string {
	if ng.Spec.Template.AMIID != "" {
		return "CUSTOM"
	}
	switch orDefault(ng.Spec.Template.AMIFamily, v1alpha1.AMIFamilyAmazonLinux2023) {
	case v1alpha1.AMIFamilyAmazonLinux2:
		return "AL2_x86_64"
	case v1alpha1.AMIFamilyBottlerocket:
		return "BOTTLEROCKET_x86_64"
	case v1alpha1.AMIFamilyWindows:
		return "WINDOWS_CORE_2022_x86_64"
	default:
		return "AL2023_x86_64_STANDARD"
	}
}

// taintEffect names an effect as the EKS API does.
func taintEffect(e corev1.TaintEffect) string {
	switch e {
	case corev1.TaintEffectNoSchedule:
		return "NO_SCHEDULE"
	case corev1.TaintEffectPreferNoSchedule:
		return "PREFER_NO_SCHEDULE"
	case corev1.TaintEffectNoExecute:
		return "NO_EXECUTE"
	}
	return strings.ToUpper(string(e))
}

// modifiedAt is the last time anything wrote the group (its managed fields), or its
// creation.
func modifiedAt(ng *v1alpha1.NodeGroup) time.Time {
	t := ng.CreationTimestamp.Time
	for _, mf := range ng.ManagedFields {
		if mf.Time != nil && mf.Time.After(t) {
			t = mf.Time.Time
		}
	}
	return t
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}
