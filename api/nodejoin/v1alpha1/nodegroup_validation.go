package v1alpha1

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The defaults, as EKS managed node groups and eksctl have them.
const (
	DefaultAMIFamily          = AMIFamilyAmazonLinux2023
	DefaultInstanceType       = "m5.large"
	DefaultCapacityType       = CapacityOnDemand
	DefaultUserDataStyle      = UserDataStyleManaged
	DefaultUpdateStrategy     = UpdateStrategyDefault
	DefaultMaxUnavailable     = int32(1)
	DefaultJoinTimeout        = 15 * time.Minute
	DefaultDrainTimeout       = 15 * time.Minute
	DefaultPostDrainWait      = 60 * time.Second
	DefaultDeleteDrainTimeout = 5 * time.Minute
	// MaxUnavailableCap is EKS's quota of nodes updated in parallel.
	MaxUnavailableCap = int32(100)
)

// Default fills the unset fields of the group's spec with their defaults: the same
// values the CRD's defaults give, and desiredSize = minSize (which a CRD default cannot
// express). The CLI calls it before it creates a group; the controller works on a
// defaulted copy.
func (ng *NodeGroup) Default() {
	s := &ng.Spec
	if s.Scaling.DesiredSize == nil {
		d := s.Scaling.MinSize
		s.Scaling.DesiredSize = &d
	}
	t := &s.Template
	if t.AMIFamily == "" {
		t.AMIFamily = DefaultAMIFamily
	}
	if t.UserDataStyle == "" {
		t.UserDataStyle = DefaultUserDataStyle
	}
	if len(t.InstanceTypes) == 0 && t.LaunchTemplate == nil {
		t.InstanceTypes = []string{DefaultInstanceType}
	}
	if t.CapacityType == "" {
		t.CapacityType = DefaultCapacityType
	}
	if s.UpdateConfig == nil {
		n := DefaultMaxUnavailable
		s.UpdateConfig = &UpdateConfig{MaxUnavailable: &n}
	}
	if s.UpdateStrategy == "" {
		s.UpdateStrategy = DefaultUpdateStrategy
	}
	defaultDuration(&s.Timeouts.JoinTimeout, DefaultJoinTimeout)
	defaultDuration(&s.Timeouts.DrainTimeout, DefaultDrainTimeout)
	defaultDuration(&s.Timeouts.PostDrainWait, DefaultPostDrainWait)
	defaultDuration(&s.Timeouts.DeleteDrainTimeout, DefaultDeleteDrainTimeout)
}

func defaultDuration(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

// Desired is the desired size, minSize when unset.
func (s *ScalingConfig) Desired() int32 {
	if s.DesiredSize != nil {
		return *s.DesiredSize
	}
	return s.MinSize
}

// MaxUnavailableNodes is how many nodes an update of a group of desired nodes may take
// out at once: maxUnavailable, or maxUnavailablePercentage of desired rounded down;
// at least 1 and at most 100 (EKS's quota).
func (u *UpdateConfig) MaxUnavailableNodes(desired int32) int32 {
	n := DefaultMaxUnavailable
	switch {
	case u == nil:
	case u.MaxUnavailable != nil:
		n = *u.MaxUnavailable
	case u.MaxUnavailablePercentage != nil:
		n = desired * *u.MaxUnavailablePercentage / 100
	}
	return max(1, min(n, MaxUnavailableCap))
}

// KubeletConfig decodes spec.template.kubelet; nil when unset.
func (t *NodeTemplate) KubeletConfig() (map[string]any, error) {
	if t.Kubelet == nil || len(t.Kubelet.Raw) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(t.Kubelet.Raw, &m); err != nil {
		return nil, fmt.Errorf("decoding spec.template.kubelet: want a JSON object of KubeletConfiguration fields: %w", err)
	}
	return m, nil
}

var (
	instanceTypeRE  = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)
	amiIDRE         = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	subnetIDRE      = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	securityGroupRE = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	ltIDRE          = regexp.MustCompile(`^lt-[0-9a-f]{8,17}$`)
	ltNameRE        = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)
	ltVersionRE     = regexp.MustCompile(`^([1-9][0-9]{0,17}|\$Latest|\$Default)$`)
)

// reservedLabelDomains are label prefixes a group may not set: the controller sets the
// eks.amazonaws.com ones, and the kubelet refuses to register other kubernetes.io and
// k8s.io labels (eksctl rejects them too).
var allowedKubernetesLabelPrefixes = []string{"node.kubernetes.io/", "node-restriction.kubernetes.io/"}

// Validate checks the group as defaulted (it validates a defaulted copy, so unset
// fields are fine). The errors carry field paths such as spec.scaling.desiredSize.
func (ng *NodeGroup) Validate() field.ErrorList {
	c := ng.DeepCopy()
	c.Default()
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Label(c.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name,
			"a node group name names its Auto Scaling group and launch template: "+strings.Join(msgs, "; ")))
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateScaling(&c.Spec.Scaling, spec.Child("scaling"))...)
	errs = append(errs, validateTemplate(&c.Spec.Template, spec.Child("template"))...)
	for i, s := range c.Spec.Subnets {
		if !subnetIDRE.MatchString(s) {
			errs = append(errs, field.Invalid(spec.Child("subnets").Index(i), s, "want a subnet ID, subnet-<hex>"))
		}
	}
	errs = append(errs, validateUpdateConfig(c.Spec.UpdateConfig, c.Spec.Scaling.MaxSize, spec.Child("updateConfig"))...)
	switch c.Spec.UpdateStrategy {
	case UpdateStrategyDefault, UpdateStrategyMinimal:
	default:
		errs = append(errs, field.NotSupported(spec.Child("updateStrategy"), c.Spec.UpdateStrategy, []UpdateStrategy{UpdateStrategyDefault, UpdateStrategyMinimal}))
	}
	tp := spec.Child("timeouts")
	for _, t := range []struct {
		name string
		d    *metav1.Duration
	}{
		{"joinTimeout", c.Spec.Timeouts.JoinTimeout}, {"drainTimeout", c.Spec.Timeouts.DrainTimeout},
		{"postDrainWait", c.Spec.Timeouts.PostDrainWait}, {"deleteDrainTimeout", c.Spec.Timeouts.DeleteDrainTimeout},
	} {
		if t.d.Duration < 0 || (t.d.Duration == 0 && t.name != "postDrainWait") {
			errs = append(errs, field.Invalid(tp.Child(t.name), t.d.Duration.String(), "must be positive"))
		}
	}
	return errs
}

func validateScaling(s *ScalingConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.MinSize < 0 {
		errs = append(errs, field.Invalid(p.Child("minSize"), s.MinSize, "must not be negative"))
	}
	if s.MaxSize < 1 {
		errs = append(errs, field.Invalid(p.Child("maxSize"), s.MaxSize, "must be at least 1"))
	}
	if s.MinSize > s.MaxSize {
		errs = append(errs, field.Invalid(p.Child("minSize"), s.MinSize, fmt.Sprintf("must not exceed maxSize (%d)", s.MaxSize)))
	}
	if d := s.Desired(); d < s.MinSize || d > s.MaxSize {
		errs = append(errs, field.Invalid(p.Child("desiredSize"), d, fmt.Sprintf("must be between minSize (%d) and maxSize (%d)", s.MinSize, s.MaxSize)))
	}
	return errs
}

//nolint:gocyclo // a flat list of independent field checks, read top to bottom.
func validateTemplate(t *NodeTemplate, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	found := false
	for _, f := range AMIFamilies {
		found = found || f == t.AMIFamily
	}
	if !found {
		errs = append(errs, field.NotSupported(p.Child("amiFamily"), t.AMIFamily, AMIFamilies))
	}
	if t.UserDataStyle != "" && !slices.Contains(UserDataStyles, t.UserDataStyle) {
		errs = append(errs, field.NotSupported(p.Child("userDataStyle"), t.UserDataStyle, UserDataStyles))
	}
	if t.AMIID != "" && !amiIDRE.MatchString(t.AMIID) {
		errs = append(errs, field.Invalid(p.Child("amiID"), t.AMIID, "want an AMI ID, ami-<hex>"))
	}
	seen := map[string]bool{}
	for i, it := range t.InstanceTypes {
		if !instanceTypeRE.MatchString(it) {
			errs = append(errs, field.Invalid(p.Child("instanceTypes").Index(i), it, "want an EC2 instance type such as m5.large"))
		}
		if seen[it] {
			errs = append(errs, field.Duplicate(p.Child("instanceTypes").Index(i), it))
		}
		seen[it] = true
	}
	if len(t.InstanceTypes) > 20 {
		errs = append(errs, field.TooMany(p.Child("instanceTypes"), len(t.InstanceTypes), 20))
	}
	switch t.CapacityType {
	case CapacityOnDemand, CapacitySpot:
	default:
		errs = append(errs, field.NotSupported(p.Child("capacityType"), t.CapacityType, []CapacityType{CapacityOnDemand, CapacitySpot}))
	}
	errs = append(errs, validateLabels(t.Labels, p.Child("labels"))...)
	for i, taint := range t.Taints {
		tp := p.Child("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(taint.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), taint.Key, msg))
		}
		if taint.Value != "" {
			for _, msg := range validation.IsValidLabelValue(taint.Value) {
				errs = append(errs, field.Invalid(tp.Child("value"), taint.Value, msg))
			}
		}
		switch taint.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), taint.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	if _, err := t.KubeletConfig(); err != nil {
		errs = append(errs, field.Invalid(p.Child("kubelet"), string(t.Kubelet.Raw), "want a JSON object of KubeletConfiguration fields"))
	}
	if t.MaxPods != nil && *t.MaxPods < 1 {
		errs = append(errs, field.Invalid(p.Child("maxPods"), *t.MaxPods, "must be at least 1"))
	}
	if len(t.PreBootstrapCommands) > 0 && t.AMIFamily == AMIFamilyBottlerocket {
		errs = append(errs, field.Forbidden(p.Child("preBootstrapCommands"),
			"Bottlerocket runs no shell at boot: put bootstrap containers or settings.bootstrap-commands in userData instead"))
	}
	if len(t.UserData) > 16384 {
		errs = append(errs, field.TooLong(p.Child("userData"), "", 16384))
	}
	for i, sg := range t.SecurityGroupIDs {
		if !securityGroupRE.MatchString(sg) {
			errs = append(errs, field.Invalid(p.Child("securityGroupIDs").Index(i), sg, "want a security group ID, sg-<hex>"))
		}
	}
	if t.LaunchTemplate != nil {
		errs = append(errs, validateLaunchTemplate(t, p)...)
	}
	return errs
}

// validateLaunchTemplate checks spec.template.launchTemplate and the fields a launch
// template takes the place of, as EKS refuses them beside one.
func validateLaunchTemplate(t *NodeTemplate, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	lt, lp := t.LaunchTemplate, p.Child("launchTemplate")
	switch {
	case (lt.ID == "") == (lt.Name == ""):
		errs = append(errs, field.Invalid(lp, fmt.Sprintf("id=%q name=%q", lt.ID, lt.Name), "set exactly one of id and name"))
	case lt.ID != "" && !ltIDRE.MatchString(lt.ID):
		errs = append(errs, field.Invalid(lp.Child("id"), lt.ID, "want a launch template ID, lt-<hex>"))
	case lt.Name != "" && !ltNameRE.MatchString(lt.Name):
		errs = append(errs, field.Invalid(lp.Child("name"), lt.Name, "want a launch template name: 3 to 128 letters, digits and ( ) . - / _"))
	}
	if lt.Version != "" && !ltVersionRE.MatchString(lt.Version) {
		errs = append(errs, field.Invalid(lp.Child("version"), lt.Version, "want a version number, $Latest or $Default (or leave it out for the default version)"))
	}
	if t.UserData != "" {
		errs = append(errs, field.Forbidden(p.Child("userData"), "a group with a launch template takes its user data from the launch template: put it there"))
	}
	if len(t.SecurityGroupIDs) > 0 {
		errs = append(errs, field.Forbidden(p.Child("securityGroupIDs"), "a group with a launch template takes its security groups from the launch template: put them there"))
	}
	if t.UserDataStyle == UserDataStyleEksctl {
		errs = append(errs, field.Forbidden(p.Child("userDataStyle"), "a launch template is merged as EKS managed node groups merge it: use the Managed style"))
	}
	return errs
}

func validateLabels(labels map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
		prefix, _, ok := strings.Cut(k, "/")
		if !ok {
			continue
		}
		if prefix == "eks.amazonaws.com" || strings.HasSuffix(prefix, ".eks.amazonaws.com") {
			errs = append(errs, field.Forbidden(p.Key(k), "eks.amazonaws.com labels are set by the controller"))
			continue
		}
		if isKubernetesDomain(prefix) && !allowedKubernetesPrefix(k) {
			errs = append(errs, field.Forbidden(p.Key(k),
				"the kubelet may not set kubernetes.io or k8s.io labels other than node.kubernetes.io/ and node-restriction.kubernetes.io/ ones"))
		}
	}
	return errs
}

func isKubernetesDomain(prefix string) bool {
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}

func allowedKubernetesPrefix(k string) bool {
	for _, a := range allowedKubernetesLabelPrefixes {
		if strings.HasPrefix(k, a) {
			return true
		}
	}
	return false
}

func validateUpdateConfig(u *UpdateConfig, maxSize int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case (u.MaxUnavailable == nil) == (u.MaxUnavailablePercentage == nil):
		errs = append(errs, field.Invalid(p, "", "set exactly one of maxUnavailable and maxUnavailablePercentage"))
	case u.MaxUnavailable != nil:
		n := *u.MaxUnavailable
		if n < 1 || n > MaxUnavailableCap {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), n, "must be between 1 and 100"))
		} else if n > maxSize {
			errs = append(errs, field.Invalid(p.Child("maxUnavailable"), n, fmt.Sprintf("must not exceed scaling.maxSize (%d)", maxSize)))
		}
	default:
		if n := *u.MaxUnavailablePercentage; n < 1 || n > 100 {
			errs = append(errs, field.Invalid(p.Child("maxUnavailablePercentage"), n, "must be between 1 and 100"))
		}
	}
	return errs
}
