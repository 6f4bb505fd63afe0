package eksbackend

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// Annotations that keep, on a NodeGroup, what EKS has of a node group and the object
// has no field for.
const (
	// TagsAnnotation holds the node group's EKS tags, a JSON object.
	TagsAnnotation = "eks.nodejoin.io/tags"
	// ImageAnnotation holds the EKS image choice (Image), valid while the template's
	// amiID is the one it names.
	ImageAnnotation = "eks.nodejoin.io/image"
	// UpdatesAnnotation lists the node group's EKS updates (updateRecord), oldest first.
	UpdatesAnnotation = "eks.nodejoin.io/updates"
	// TokenAnnotation holds the clientRequestToken the group was created with: the
	// SDK's retry of a CreateNodegroup whose answer was lost gets the group, not
	// ResourceInUseException.
	TokenAnnotation = "eks.nodejoin.io/client-request-token" //nolint:gosec // an annotation key, no credential
)

// Image is the EKS image choice of a group: its amiType (which of the Windows variants,
// say) and release, and the AMI that release was when chosen, so that an amiID changed
// by another hand (kubectl edit) is not reported as that release.
type Image struct {
	AmiType        string `json:"amiType,omitempty"`
	ReleaseVersion string `json:"releaseVersion,omitempty"`
	AMIID          string `json:"amiID,omitempty"`
	DiskSize       *int32 `json:"diskSize,omitempty"`
}

// Releases is the catalog of EKS-optimized images: which AMI is which release of an AMI
// family. The integrator adapts the local EC2's image catalog to it.
type Releases interface {
	// Latest is the newest release of family and its AMI.
	Latest(family v1alpha1.AMIFamily) (release, ami string, ok bool)
	// Image is the AMI of release of family.
	Image(family v1alpha1.AMIFamily, release string) (ami string, ok bool)
	// ReleaseOf says which release of which family ami is.
	ReleaseOf(ami string) (family v1alpha1.AMIFamily, release string, ok bool)
}

// Account says where the groups live, for their ARNs and node role.
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
	// Subnets are the subnets of a group whose spec names none: the controller's
	// defaults.
	Subnets []string
	// Releases, when set, names the release of a group's image; without it the
	// release recorded by the EKS API (ImageAnnotation) is reported.
	Releases Releases
}

// amiTypes maps EKS amiTypes to families; a family's first type is what a group
// created without one reports.
var amiTypes = map[v1alpha1.AMIFamily][]string{
	v1alpha1.AMIFamilyAmazonLinux2023: {"AL2023_x86_64_STANDARD"},
	v1alpha1.AMIFamilyAmazonLinux2:    {"AL2_x86_64"},
	v1alpha1.AMIFamilyBottlerocket:    {"BOTTLEROCKET_x86_64"},
	v1alpha1.AMIFamilyWindows: {"WINDOWS_CORE_2022_x86_64", "WINDOWS_FULL_2022_x86_64", "WINDOWS_CORE_2019_x86_64",
		"WINDOWS_FULL_2019_x86_64", "WINDOWS_CORE_2025_x86_64", "WINDOWS_FULL_2025_x86_64"},
}

// FamilyOf is the AMI family of an EKS amiType ("" is AL2023, EKS's default).
func FamilyOf(amiType string) (v1alpha1.AMIFamily, bool) {
	if amiType == "" {
		return v1alpha1.AMIFamilyAmazonLinux2023, true
	}
	for f, types := range amiTypes {
		if slices.Contains(types, amiType) {
			return f, true
		}
	}
	return "", false
}

// The EKS names of the taint effects.
var effects = map[corev1.TaintEffect]string{
	corev1.TaintEffectNoSchedule:       "NO_SCHEDULE",
	corev1.TaintEffectPreferNoSchedule: "PREFER_NO_SCHEDULE",
	corev1.TaintEffectNoExecute:        "NO_EXECUTE",
}

// TaintEffect names an effect as the EKS API does.
func TaintEffect(e corev1.TaintEffect) string {
	if s, ok := effects[e]; ok {
		return s
	}
	return strings.ToUpper(string(e))
}

// KubeEffect is the Kubernetes effect of an EKS effect name.
func KubeEffect(s string) (corev1.TaintEffect, bool) {
	for k, v := range effects {
		if v == s {
			return k, true
		}
	}
	return "", false
}

// image is the group's recorded EKS image choice, if it still holds.
func image(ng *v1alpha1.NodeGroup) (Image, bool) {
	var im Image
	raw, ok := ng.Annotations[ImageAnnotation]
	if !ok || json.Unmarshal([]byte(raw), &im) != nil {
		return Image{}, false
	}
	return im, true
}

// Tags are the group's EKS tags.
func Tags(ng *v1alpha1.NodeGroup) map[string]string {
	tags := map[string]string{}
	if raw, ok := ng.Annotations[TagsAnnotation]; ok {
		_ = json.Unmarshal([]byte(raw), &tags) // a mangled annotation reads as no tags
	}
	return tags
}

// family is the group's family with its default.
func family(ng *v1alpha1.NodeGroup) v1alpha1.AMIFamily {
	if f := ng.Spec.Template.AMIFamily; f != "" {
		return f
	}
	return v1alpha1.DefaultAMIFamily
}

// Release is the group's amiType and release version: a known release's, CUSTOM with
// no release for an image that is none.
func Release(ng *v1alpha1.NodeGroup, releases Releases) (amiType, release string) {
	f, ami := family(ng), ng.Spec.Template.AMIID
	im, recorded := image(ng)
	if recorded && im.AmiType == AmiTypeCustom {
		return AmiTypeCustom, ""
	}
	amiType = amiTypes[f][0]
	if recorded && im.AmiType != "" {
		if rf, ok := FamilyOf(im.AmiType); ok && rf == f {
			amiType = im.AmiType
		}
	}
	switch {
	case releases != nil && ami == "":
		release, _, _ = releases.Latest(f)
	case releases != nil:
		rf, rel, ok := releases.ReleaseOf(ami)
		if !ok || rf != f {
			return "CUSTOM", ""
		}
		release = rel
	case recorded && im.AMIID == ami:
		release = im.ReleaseVersion
	case ami != "":
		return "CUSTOM", ""
	}
	return amiType, release
}

// Nodegroup is ng as EKS describes it: the one mapping of NodeGroup objects to EKS node
// groups, which the local EKS serves and `nodejoin describe nodegroup` prints.
func Nodegroup(ng *v1alpha1.NodeGroup, a Account) eksapi.Nodegroup {
	s, t := ng.Spec, ng.Spec.Template
	desired := ng.Spec.Scaling.Desired()
	d := eksapi.Nodegroup{
		NodegroupName: ng.Name,
		NodegroupArn:  fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%s", a.Region, a.AccountID, a.Cluster, ng.Name, ng.UID),
		ClusterName:   a.Cluster,
		Version:       MinorVersion(a.Version),
		CreatedAt:     eksapi.NewTime(ng.CreationTimestamp.Time),
		ModifiedAt:    eksapi.NewTime(modifiedAt(ng)),
		Status:        Status(ng),
		CapacityType:  string(orDefault(t.CapacityType, v1alpha1.DefaultCapacityType)),
		ScalingConfig: eksapi.ScalingConfig{MinSize: ptr(s.Scaling.MinSize), MaxSize: ptr(s.Scaling.MaxSize), DesiredSize: &desired},
		InstanceTypes: append([]string{}, t.InstanceTypes...),
		Subnets:       append([]string{}, s.Subnets...),
		NodeRole:      nodeRole(ng, a),
		Labels:        maps.Clone(t.Labels),
		Resources:     eksapi.Resources{AutoScalingGroups: []eksapi.AutoScalingGroup{}},
		Health:        eksapi.Health{Issues: []eksapi.Issue{}},
		Tags:          Tags(ng),
	}
	d.AmiType, d.ReleaseVersion = Release(ng, a.Releases)
	if im, ok := image(ng); ok {
		d.DiskSize = im.DiskSize
	}
	switch {
	case len(d.InstanceTypes) > 0:
	case t.LaunchTemplate == nil:
		d.InstanceTypes = []string{v1alpha1.DefaultInstanceType}
	case ng.Status.InstanceType != "":
		// The launch template's (or the default when it has none), as the controller read it.
		d.InstanceTypes = []string{ng.Status.InstanceType}
	}
	if len(d.Subnets) == 0 {
		d.Subnets = append([]string{}, a.Subnets...)
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	for _, tt := range t.Taints {
		d.Taints = append(d.Taints, eksapi.Taint{Key: tt.Key, Value: tt.Value, Effect: TaintEffect(tt.Effect)})
	}
	if n := ng.Status.AutoScalingGroupName; n != "" {
		d.Resources.AutoScalingGroups = append(d.Resources.AutoScalingGroups, eksapi.AutoScalingGroup{Name: n})
	}
	for _, is := range ng.Status.Health.Issues {
		d.Health.Issues = append(d.Health.Issues, eksapi.Issue{Code: string(is.Code), Message: is.Message, ResourceIDs: is.ResourceIDs})
	}
	if u := s.UpdateConfig; u != nil && (u.MaxUnavailable != nil || u.MaxUnavailablePercentage != nil) {
		d.UpdateConfig.MaxUnavailable, d.UpdateConfig.MaxUnavailablePercentage = u.MaxUnavailable, u.MaxUnavailablePercentage
	} else {
		d.UpdateConfig.MaxUnavailable = ptr(v1alpha1.DefaultMaxUnavailable)
	}
	d.UpdateConfig.UpdateStrategy = string(orDefault(s.UpdateStrategy, v1alpha1.DefaultUpdateStrategy))
	if lt := launchTemplateOf(ng); lt != nil {
		// The user's template, as EKS reports the template a group was created with.
		d.LaunchTemplate = lt
	} else if lt := ng.Status.LaunchTemplate; lt != nil {
		d.LaunchTemplate = &eksapi.LaunchTemplate{Name: lt.Name, Version: lt.Version, ID: lt.ID}
	}
	return d
}

// Status is the group's EKS status: DELETING once its deletion started, CREATING
// before the controller reported.
func Status(ng *v1alpha1.NodeGroup) string {
	switch {
	case ng.DeletionTimestamp != nil:
		return string(v1alpha1.PhaseDeleting)
	case ng.Status.Phase == "":
		return string(v1alpha1.PhaseCreating)
	case ng.Status.Phase == v1alpha1.PhaseActive && ng.Generation > ng.Status.ObservedGeneration:
		// A change the controller has not acted on yet: EKS reports a group UPDATING
		// from the moment an update is accepted, and eksctl's --wait relies on it.
		return string(v1alpha1.PhaseUpdating)
	}
	return string(ng.Status.Phase)
}

// nodeRole is the ARN of the role of the group's instances: its template's instance
// profile's (named after its role, as the local cloud's are) or the default.
func nodeRole(ng *v1alpha1.NodeGroup, a Account) string {
	role := a.NodeRole
	if p := ng.Spec.Template.InstanceProfile; p != "" {
		if _, name, ok := strings.Cut(p, ":instance-profile/"); ok {
			p = name
		}
		role = p[strings.LastIndex(p, "/")+1:]
	}
	if role == "" {
		return ""
	}
	return fmt.Sprintf("arn:aws:iam::%s:role/%s", a.AccountID, role)
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

func ptr[T any](v T) *T { return &v }

func jsonUnmarshal(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }
