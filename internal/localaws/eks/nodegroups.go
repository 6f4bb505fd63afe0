package eks

import (
	"regexp"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// The forms EKS gives its parameters.
var (
	nodegroupNameRE  = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,62}$`)
	subnetRE         = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	instanceTypeRE   = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	roleARNRE        = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)
	minorVersionRE   = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	releaseVersionRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// EKS's limits on a node group's lists and maps.
const (
	maxInstanceTypes = 20
	maxTaints        = 50
	maxLabels        = 100
	maxTags          = 50
	maxSize          = 1000
)

func (e *EKS) createNodegroup(c *call) (any, error) {
	var in eksapi.CreateNodegroupRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	if err := validateCreate(&in); err != nil {
		return nil, err
	}
	ng, err := c.backend.CreateNodegroup(c.ctx, c.params[0], &in)
	if err != nil {
		return nil, err
	}
	return nodegroupOut{ng}, nil
}

type nodegroupOut struct {
	Nodegroup eksapi.Nodegroup `json:"nodegroup"`
}

type updateOut struct {
	Update eksapi.Update `json:"update"`
}

// validateCreate checks a CreateNodegroup body on the wire: what the local EKS does not
// do is refused by name, rather than ignored.
func validateCreate(in *eksapi.CreateNodegroupRequest) error {
	if !nodegroupNameRE.MatchString(in.NodegroupName) {
		return eksapi.InvalidParameter("nodegroupName: %q must be 1 to 63 letters, digits, hyphens and underscores, starting with a letter or digit", in.NodegroupName)
	}
	if !roleARNRE.MatchString(in.NodeRole) {
		return eksapi.InvalidParameter("nodeRole: %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", in.NodeRole)
	}
	for _, u := range []struct {
		name string
		set  bool
		why  string
	}{
		{"remoteAccess", in.RemoteAccess != nil, "local instances have no SSH"},
		{"nodeRepairConfig", in.NodeRepairConfig != nil, "the local EKS does not repair nodes"},
		{"warmPoolConfig", in.WarmPoolConfig != nil, "the local EKS has no warm pools"},
	} {
		if u.set {
			return eksapi.InvalidParameter("%s is not supported: %s", u.name, u.why)
		}
	}
	if err := validateLaunchTemplate(in); err != nil {
		return err
	}
	return validateCreateValues(in)
}

// The forms of a launch template's ID, name and version.
var (
	launchTemplateIDRE      = regexp.MustCompile(`^lt-[0-9a-f]{8,17}$`)
	launchTemplateNameRE    = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)
	launchTemplateVersionRE = regexp.MustCompile(`^([1-9][0-9]{0,17}|\$Latest|\$Default)$`)
)

// amiTypeCustom is the amiType of a node group whose launch template names its AMI.
const amiTypeCustom = "CUSTOM"

// validateLaunchTemplate checks launchTemplate and what EKS refuses beside one: a disk
// size (the template's block devices say it) and CUSTOM without a template. Whether the
// template names an AMI, as CUSTOM needs, is the backend's to check: it reads the
// template.
func validateLaunchTemplate(in *eksapi.CreateNodegroupRequest) error {
	if in.LaunchTemplate == nil {
		if in.AmiType == amiTypeCustom {
			return eksapi.InvalidParameter("amiType: CUSTOM needs a launchTemplate whose ImageId is the custom AMI")
		}
		return nil
	}
	if err := checkLaunchTemplateRef(in.LaunchTemplate); err != nil {
		return err
	}
	if in.DiskSize != nil {
		return eksapi.InvalidParameter("diskSize: Disk size must be specified within the launch template (its BlockDeviceMappings), not with a launchTemplate")
	}
	return nil
}

// checkLaunchTemplateRef checks a launchTemplate's form: exactly one of id and name, and
// a version number, $Latest or $Default when a version is given.
func checkLaunchTemplateRef(lt *eksapi.LaunchTemplate) error {
	switch {
	case lt.ID != "" && lt.Name != "":
		return eksapi.InvalidParameter("launchTemplate: give either id (%s) or name (%s), not both", lt.ID, lt.Name)
	case lt.ID == "" && lt.Name == "":
		return eksapi.InvalidParameter("launchTemplate: give the launch template's id or name")
	case lt.ID != "" && !launchTemplateIDRE.MatchString(lt.ID):
		return eksapi.InvalidParameter("launchTemplate.id: %q is not a launch template ID (lt-…)", lt.ID)
	case lt.Name != "" && !launchTemplateNameRE.MatchString(lt.Name):
		return eksapi.InvalidParameter("launchTemplate.name: %q is not a launch template name (3 to 128 letters, digits and ( ) . - / _)", lt.Name)
	case lt.Version != "" && !launchTemplateVersionRE.MatchString(lt.Version):
		return eksapi.InvalidParameter("launchTemplate.version: %q is not a version number, $Latest or $Default", lt.Version)
	}
	return nil
}

// validateCreateValues checks the values of a CreateNodegroup body.
func validateCreateValues(in *eksapi.CreateNodegroupRequest) error {
	if in.ScalingConfig != nil {
		if err := validateScaling(in.ScalingConfig, true); err != nil {
			return err
		}
	}
	if in.DiskSize != nil && (*in.DiskSize < 1 || *in.DiskSize > 16384) {
		return eksapi.InvalidParameter("diskSize: %d GiB is not from 1 to 16384", *in.DiskSize)
	}
	if len(in.Subnets) > 16 {
		return eksapi.InvalidParameter("subnets: %d subnets; at most 16", len(in.Subnets))
	}
	for _, s := range in.Subnets {
		if !subnetRE.MatchString(s) {
			return eksapi.InvalidParameter("subnets: %q is not a subnet ID (subnet-…)", s)
		}
	}
	if len(in.InstanceTypes) > maxInstanceTypes {
		return eksapi.InvalidParameter("instanceTypes: %d types; at most %d", len(in.InstanceTypes), maxInstanceTypes)
	}
	for _, t := range in.InstanceTypes {
		if !instanceTypeRE.MatchString(t) {
			return eksapi.InvalidParameter("instanceTypes: %q is not an instance type (such as m5.large)", t)
		}
	}
	if in.AmiType != "" && in.AmiType != amiTypeCustom && !slices.Contains(eksapi.AMITypes, in.AmiType) {
		return eksapi.InvalidParameter("amiType: the local EKS supports %s, not %q", strings.Join(eksapi.AMITypes, ", "), in.AmiType)
	}
	switch in.CapacityType {
	case "", "ON_DEMAND", "SPOT":
	default:
		return eksapi.InvalidParameter("capacityType: want ON_DEMAND or SPOT, not %q", in.CapacityType)
	}
	if in.Version != "" && !minorVersionRE.MatchString(in.Version) {
		return eksapi.InvalidParameter("version: %q is not a Kubernetes minor version such as 1.37", in.Version)
	}
	if in.ReleaseVersion != "" && !releaseVersionRE.MatchString(in.ReleaseVersion) {
		return eksapi.InvalidParameter("releaseVersion: %q is not a release version such as 1.37.0-20261127", in.ReleaseVersion)
	}
	return validateCreateMaps(in)
}

// validateCreateMaps checks a CreateNodegroup body's labels, taints, tags and update
// config.
func validateCreateMaps(in *eksapi.CreateNodegroupRequest) error {
	if len(in.Labels) > maxLabels {
		return eksapi.InvalidParameter("labels: %d labels; at most %d", len(in.Labels), maxLabels)
	}
	if err := validateTaints("taints", in.Taints); err != nil {
		return err
	}
	if err := validateTags(in.Tags); err != nil {
		return err
	}
	if in.UpdateConfig != nil {
		return validateUpdateConfig(in.UpdateConfig)
	}
	return nil
}

// validateScaling checks sizes; full says all three are the group's (CreateNodegroup),
// not a partial change to be merged with the group's (UpdateNodegroupConfig).
func validateScaling(s *eksapi.ScalingConfig, full bool) error {
	for _, f := range []struct {
		name string
		v    *int32
		lo   int32
	}{{"minSize", s.MinSize, 0}, {"maxSize", s.MaxSize, 1}, {"desiredSize", s.DesiredSize, 0}} {
		if f.v != nil && (*f.v < f.lo || *f.v > maxSize) {
			return eksapi.InvalidParameter("scalingConfig.%s: %d is not from %d to %d", f.name, *f.v, f.lo, maxSize)
		}
	}
	if !full {
		return nil
	}
	return eksapi.CheckSizes(*s)
}

func validateTaints(field string, taints []eksapi.Taint) error {
	if len(taints) > maxTaints {
		return eksapi.InvalidParameter("%s: %d taints; at most %d", field, len(taints), maxTaints)
	}
	for _, t := range taints {
		if t.Key == "" || len(t.Key) > 63 || len(t.Value) > 63 {
			return eksapi.InvalidParameter("%s: taint key %q and value %q must be 1 to 63 and 0 to 63 characters", field, t.Key, t.Value)
		}
		if !slices.Contains(eksapi.TaintEffects, t.Effect) {
			return eksapi.InvalidParameter("%s: taint %s has effect %q; want one of %s", field, t.Key, t.Effect, strings.Join(eksapi.TaintEffects, ", "))
		}
	}
	return nil
}

func validateTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return eksapi.InvalidParameter("tags: %d tags; at most %d", len(tags), maxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			return eksapi.InvalidParameter("tags: key %q must be 1 to 128 characters and its value at most 256", k)
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return eksapi.InvalidParameter("tags: key %q uses the reserved prefix aws:", k)
		}
	}
	return nil
}

func validateUpdateConfig(u *eksapi.UpdateConfig) error {
	if (u.MaxUnavailable == nil) == (u.MaxUnavailablePercentage == nil) {
		return eksapi.InvalidParameter("updateConfig: give exactly one of maxUnavailable and maxUnavailablePercentage")
	}
	for name, p := range map[string]*int32{"maxUnavailable": u.MaxUnavailable, "maxUnavailablePercentage": u.MaxUnavailablePercentage} {
		if p != nil && (*p < 1 || *p > 100) {
			return eksapi.InvalidParameter("updateConfig.%s: %d is not from 1 to 100", name, *p)
		}
	}
	switch u.UpdateStrategy {
	case "", "DEFAULT", "MINIMAL":
	default:
		return eksapi.InvalidParameter("updateConfig.updateStrategy: want DEFAULT or MINIMAL, not %q", u.UpdateStrategy)
	}
	return nil
}

func (e *EKS) describeNodegroup(c *call) (any, error) {
	ng, err := c.backend.DescribeNodegroup(c.ctx, c.params[0], c.params[1])
	if err != nil {
		return nil, err
	}
	return nodegroupOut{ng}, nil
}

func (e *EKS) deleteNodegroup(c *call) (any, error) {
	ng, err := c.backend.DeleteNodegroup(c.ctx, c.params[0], c.params[1])
	if err != nil {
		return nil, err
	}
	return nodegroupOut{ng}, nil
}

func (e *EKS) listNodegroups(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	names, err := c.backend.ListNodegroups(c.ctx, c.params[0])
	if err != nil {
		return nil, err
	}
	out, next := p.cut(names)
	return struct {
		Nodegroups []string `json:"nodegroups"`
		NextToken  string   `json:"nextToken,omitempty"`
	}{out, next}, nil
}

func (e *EKS) updateNodegroupConfig(c *call) (any, error) {
	var in eksapi.UpdateNodegroupConfigRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	if err := validateConfigUpdate(&in); err != nil {
		return nil, err
	}
	u, err := c.backend.UpdateNodegroupConfig(c.ctx, c.params[0], c.params[1], &in)
	if err != nil {
		return nil, err
	}
	return updateOut{u}, nil
}

func validateConfigUpdate(in *eksapi.UpdateNodegroupConfigRequest) error {
	switch {
	case in.NodeRepairConfig != nil:
		return eksapi.InvalidParameter("nodeRepairConfig is not supported: the local EKS does not repair nodes")
	case in.WarmPoolConfig != nil:
		return eksapi.InvalidParameter("warmPoolConfig is not supported: the local EKS has no warm pools")
	case in.Labels == nil && in.Taints == nil && in.ScalingConfig == nil && in.UpdateConfig == nil:
		return eksapi.InvalidParameter("give at least one of labels, taints, scalingConfig and updateConfig")
	}
	if s := in.ScalingConfig; s != nil {
		if s.MinSize == nil && s.MaxSize == nil && s.DesiredSize == nil {
			return eksapi.InvalidParameter("scalingConfig: give at least one of minSize, maxSize and desiredSize")
		}
		if err := validateScaling(s, true); err != nil {
			return err
		}
	}
	if err := validateLabelUpdate(in.Labels); err != nil {
		return err
	}
	if err := validateTaintUpdate(in.Taints); err != nil {
		return err
	}
	if in.UpdateConfig != nil {
		return validateUpdateConfig(in.UpdateConfig)
	}
	return nil
}

func validateLabelUpdate(l *eksapi.UpdateLabels) error {
	if l != nil {
		if len(l.AddOrUpdateLabels) > maxLabels || len(l.RemoveLabels) > maxLabels {
			return eksapi.InvalidParameter("labels: at most %d labels to add and %d to remove", maxLabels, maxLabels)
		}
		for _, k := range l.RemoveLabels {
			if _, ok := l.AddOrUpdateLabels[k]; ok {
				return eksapi.InvalidParameter("labels: %q is both in addOrUpdateLabels and in removeLabels", k)
			}
		}
	}
	return nil
}

func validateTaintUpdate(t *eksapi.UpdateTaints) error {
	if t != nil {
		if err := validateTaints("taints.addOrUpdateTaints", t.AddOrUpdateTaints); err != nil {
			return err
		}
		if len(t.RemoveTaints) > maxTaints {
			return eksapi.InvalidParameter("taints.removeTaints: %d taints; at most %d", len(t.RemoveTaints), maxTaints)
		}
		for _, r := range t.RemoveTaints {
			if r.Key == "" {
				return eksapi.InvalidParameter("taints.removeTaints: a taint without a key")
			}
			if slices.ContainsFunc(t.AddOrUpdateTaints, func(a eksapi.Taint) bool { return a.Key == r.Key && a.Effect == r.Effect }) {
				return eksapi.InvalidParameter("taints: %s:%s is both in addOrUpdateTaints and in removeTaints", r.Key, r.Effect)
			}
		}
	}
	return nil
}

func (e *EKS) updateNodegroupVersion(c *call) (any, error) {
	var in eksapi.UpdateNodegroupVersionRequest
	if err := decode(c.r, &in); err != nil {
		return nil, err
	}
	if in.LaunchTemplate != nil {
		if err := checkLaunchTemplateRef(in.LaunchTemplate); err != nil {
			return nil, err
		}
	}
	switch {
	case in.Version != "" && !minorVersionRE.MatchString(in.Version):
		return nil, eksapi.InvalidParameter("version: %q is not a Kubernetes minor version such as 1.37", in.Version)
	case in.ReleaseVersion != "" && !releaseVersionRE.MatchString(in.ReleaseVersion):
		return nil, eksapi.InvalidParameter("releaseVersion: %q is not a release version such as 1.37.0-20261127", in.ReleaseVersion)
	}
	u, err := c.backend.UpdateNodegroupVersion(c.ctx, c.params[0], c.params[1], &in)
	if err != nil {
		return nil, err
	}
	return updateOut{u}, nil
}

// updateTarget is the node group an update query names: the local EKS records node
// group updates only.
func updateTarget(c *call) (string, error) {
	for _, other := range []string{"addonName", "capabilityName"} {
		if c.query.Get(other) != "" {
			return "", eksapi.InvalidParameter("%s: the local EKS records node group updates only; give nodegroupName", other)
		}
	}
	ng := c.query.Get("nodegroupName")
	if ng == "" {
		return "", eksapi.InvalidParameter("nodegroupName: the local EKS records node group updates only, and needs the node group's name")
	}
	return ng, nil
}

func (e *EKS) describeUpdate(c *call) (any, error) {
	ng, err := updateTarget(c)
	if err != nil {
		return nil, err
	}
	u, err := c.backend.DescribeUpdate(c.ctx, c.params[0], ng, c.params[1])
	if err != nil {
		return nil, err
	}
	return updateOut{u}, nil
}

func (e *EKS) listUpdates(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	ng, err := updateTarget(c)
	if err != nil {
		return nil, err
	}
	ids, err := c.backend.ListUpdates(c.ctx, c.params[0], ng)
	if err != nil {
		return nil, err
	}
	out, next := p.cut(ids)
	return struct {
		UpdateIDs []string `json:"updateIds"`
		NextToken string   `json:"nextToken,omitempty"`
	}{out, next}, nil
}
