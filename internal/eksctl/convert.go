// Package eksctl reads eksctl ClusterConfig files (eksctl.io/v1alpha5) strictly and
// converts their node groups into nodejoin NodeGroups, with eksctl's defaults.
package eksctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Labels eksctl puts on a group's nodes; nodejoin also puts them on the NodeGroup
// object, with the group's type.
const (
	LabelClusterName   = "alpha.eksctl.io/cluster-name"
	LabelNodeGroupName = "alpha.eksctl.io/nodegroup-name"
	LabelNodeGroupType = "alpha.eksctl.io/nodegroup-type"
)

// The values of LabelNodeGroupType, as eksctl names the two kinds of group.
const (
	TypeManaged   = "managed"
	TypeUnmanaged = "unmanaged"
)

// eksctl's defaults (pkg/apis/eksctl.io/v1alpha5).
const (
	defaultInstanceType = "m5.large"
	defaultNodeCount    = 2
	defaultMaxSize      = 1
)

// Result is a ClusterConfig's node groups as NodeGroup objects.
type Result struct {
	// Cluster is metadata.name.
	Cluster string
	// NodeGroups are nodeGroups (self-managed) then managedNodeGroups, in file order.
	NodeGroups []v1alpha1.NodeGroup
	// Ignored lists every field of the file nodejoin does not use, by line.
	Ignored []Ignored
}

// Convert turns the file's nodeGroups and managedNodeGroups into NodeGroup objects,
// with eksctl's defaults (sizes, instance type, AMI family, the alpha.eksctl.io labels)
// and validation. The fields that matter for joining and scaling map; every field that
// does not is in Result.Ignored. Every problem is reported, each naming its field,
// line and fix.
func Convert(f *File) (*Result, error) {
	c := &converter{file: f, ignored: slices.Clone(f.Ignored)}
	res := &Result{Cluster: f.Config.Metadata.Name}
	seen := map[string]string{}
	add := func(ng *v1alpha1.NodeGroup, path string) {
		if ng == nil {
			return
		}
		if first, ok := seen[ng.Name]; ok {
			c.fail(path+".name", "the name "+strconv.Quote(ng.Name)+" is taken by "+first, "give every group its own name")
			return
		}
		seen[ng.Name] = path
		res.NodeGroups = append(res.NodeGroups, *ng)
	}
	for i, g := range f.Config.NodeGroups {
		path := fmt.Sprintf("nodeGroups[%d]", i)
		if g == nil {
			c.fail(path, "empty group", "give it at least a name")
			continue
		}
		add(c.selfManaged(g, path), path)
	}
	for i, g := range f.Config.ManagedNodeGroups {
		path := fmt.Sprintf("managedNodeGroups[%d]", i)
		if g == nil {
			c.fail(path, "empty group", "give it at least a name")
			continue
		}
		add(c.managed(g, path), path)
	}
	c.clusterTags()
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	slices.SortStableFunc(c.ignored, func(a, b Ignored) int { return a.Line - b.Line })
	res.Ignored = c.ignored
	return res, nil
}

// tags keeps the group's tags, and the cluster's for keys the group does not set (as
// eksctl fills them), as labels of the NodeGroup object: what describe nodegroup
// prints as its tags. A tag that cannot be a label is reported as ignored.
func (c *converter) tags(ng *v1alpha1.NodeGroup, tags map[string]string, path string) {
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if reason := labelProblem(k, tags[k]); reason != "" {
			c.ignore(path+".tags."+k, tags[k], reason)
			continue
		}
		if _, own := ng.Labels[k]; !own {
			ng.Labels[k] = tags[k]
		}
	}
	for k, v := range c.file.Config.Metadata.Tags {
		if _, set := ng.Labels[k]; !set && labelProblem(k, v) == "" {
			ng.Labels[k] = v
		}
	}
}

// clusterTags reports the cluster tags no group can keep.
func (c *converter) clusterTags() {
	tags := c.file.Config.Metadata.Tags
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if reason := labelProblem(k, tags[k]); reason != "" {
			c.ignore("metadata.tags."+k, tags[k], reason)
		}
	}
}

func labelProblem(k, v string) string {
	errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...)
	if len(errs) == 0 {
		return ""
	}
	return "tags are kept as the NodeGroup object's labels and this one cannot be a label: " + strings.Join(errs, "; ")
}

type converter struct {
	file    *File
	errs    []error
	ignored []Ignored
}

func (c *converter) fail(field, msg, fix string) {
	c.errs = append(c.errs, &Error{Source: c.file.Source, Line: c.file.line(field), Field: field, Msg: msg, Hint: fix})
}

func (c *converter) ignore(field, value, reason string) {
	c.ignored = append(c.ignored, Ignored{Field: field, Line: c.file.line(field), Value: value, Reason: reason})
}

// base converts the fields both kinds share; typ is TypeManaged or TypeUnmanaged.
func (c *converter) base(b *NodeGroupBase, path, typ string) *v1alpha1.NodeGroup {
	if b.Name == "" {
		c.fail(path+".name", "missing", "name the group")
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(b.Name); len(errs) > 0 {
		c.fail(path+".name", fmt.Sprintf("%q cannot name a NodeGroup object: %s", b.Name, strings.Join(errs, "; ")),
			"use lower-case letters, digits and '-'")
	}
	cluster := c.file.Config.Metadata.Name
	ng := &v1alpha1.NodeGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.NodeGroupKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:   b.Name,
			Labels: map[string]string{LabelClusterName: cluster, LabelNodeGroupName: b.Name, LabelNodeGroupType: typ},
		},
	}
	t := &ng.Spec.Template
	t.AMIFamily = c.family(b.AMIFamily, path+".amiFamily")
	if b.AMI != "" {
		c.ignore(path+".ami", b.AMI, "local instances boot no image: amiFamily alone decides their user data")
	}

	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	c.checkLabels(labels, path+".labels")
	// eksctl's own labels win over the user's, as eksctl sets them after.
	labels[LabelClusterName] = cluster
	labels[LabelNodeGroupName] = b.Name
	t.Labels = labels

	if b.MaxPodsPerNode < 0 {
		c.fail(path+".maxPodsPerNode", fmt.Sprintf("%d is negative", b.MaxPodsPerNode), "give a positive number, or leave it out for the instance type's limit")
	} else if b.MaxPodsPerNode > math.MaxInt32 {
		c.fail(path+".maxPodsPerNode", fmt.Sprintf("%d is too large", b.MaxPodsPerNode), "give a number of pods a node can run, or leave it out for the instance type's limit")
	} else if b.MaxPodsPerNode > 0 {
		t.MaxPods = ptr(int32(b.MaxPodsPerNode))
	}

	if len(b.PreBootstrapCommands) > 0 {
		if t.AMIFamily == v1alpha1.AMIFamilyBottlerocket {
			c.fail(path+".preBootstrapCommands", "not supported for Bottlerocket (as in eksctl)", "use bottlerocket.settings, such as settings.bootstrap-commands")
		}
		t.PreBootstrapCommands = slices.Clone(b.PreBootstrapCommands)
	}
	if b.OverrideBootstrap != nil {
		if t.AMIFamily == v1alpha1.AMIFamilyAmazonLinux2023 {
			// eksctl appends it as the last NodeConfig; the user's own user data is
			// merged after the generated part too, so the override wins the same way.
			// A managed group's must be MIME, as EKS wants it.
			t.UserData = *b.OverrideBootstrap
			if typ == TypeManaged && !strings.HasPrefix(strings.TrimSpace(t.UserData), "MIME-Version:") {
				t.UserData = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n" +
					strings.TrimRight(t.UserData, "\n") + "\n\n--//--\n"
			}
		} else {
			c.ignore(path+".overrideBootstrapCommand", firstLine(*b.OverrideBootstrap),
				"nodejoin generates the bootstrap call itself and does not replace it; put extra steps in preBootstrapCommands")
		}
	}
	if b.Bottlerocket != nil && len(b.Bottlerocket.Settings) > 0 {
		if t.AMIFamily != v1alpha1.AMIFamilyBottlerocket {
			c.fail(path+".bottlerocket.settings", "given for amiFamily "+string(t.AMIFamily), "set amiFamily: Bottlerocket or remove the settings")
		} else {
			c.bottlerocket(b.Bottlerocket.Settings, path+".bottlerocket.settings", typ, t)
		}
	}

	ng.Spec.Scaling = c.scaling(b.ScalingConfig, path)
	if u := b.UpdateConfig; u != nil {
		// eksctl reads it for managed groups only; nodejoin rolls every group the same
		// way, so it applies to self-managed groups too (docs/nodegroups.md).
		ng.Spec.UpdateConfig = c.updateConfig(u, ng.Spec.Scaling.MaxSize, path+".updateConfig")
	}
	c.tags(ng, b.Tags, path)
	return ng
}

func (c *converter) selfManaged(g *NodeGroup, path string) *v1alpha1.NodeGroup {
	ng := c.base(&g.NodeGroupBase, path, TypeUnmanaged)
	if ng == nil {
		return nil
	}
	t := &ng.Spec.Template
	// eksctl writes a self-managed group's launch template itself: its user data is
	// eksctl's (the AL2 cloud-config of kubelet.env and kubelet-extra.json, AL2023's
	// NodeConfig parts), not what EKS gives a managed group.
	t.UserDataStyle = v1alpha1.UserDataStyleEksctl
	types, capacity := []string(nil), v1alpha1.CapacityOnDemand
	if d := g.InstancesDistribution; d != nil {
		types = slices.Clone(d.InstanceTypes)
		if len(types) == 0 {
			c.fail(path+".instancesDistribution.instanceTypes", "missing", "list the instance types of the mixed group")
		}
		base := 0
		if d.OnDemandBaseCapacity != nil {
			base = *d.OnDemandBaseCapacity
		}
		if p := d.OnDemandPercentageAboveBaseCapacity; p != nil {
			switch {
			case *p == 0 && base == 0:
				capacity = v1alpha1.CapacitySpot
			case *p == 100:
			default:
				c.ignore(path+".instancesDistribution.onDemandPercentageAboveBaseCapacity", strconv.Itoa(*p),
					"a local group has one capacity type: only 0 (all Spot, with no on-demand base) or 100 is modelled; the group is ON_DEMAND")
			}
		}
		if g.InstanceType != "" && g.InstanceType != "mixed" {
			c.fail(path+".instanceType", "given with instancesDistribution", `set instanceType: mixed, or leave it out`)
		}
	} else if g.InstanceType == "mixed" {
		c.fail(path+".instanceType", `"mixed" needs instancesDistribution`, "list the types in instancesDistribution.instanceTypes")
	}
	if types == nil {
		types = []string{cmp(g.InstanceType, defaultInstanceType)}
	}
	t.InstanceTypes, t.CapacityType = types, capacity
	t.Taints = c.taints(g.Taints, path+".taints")

	kubelet := map[string]any{}
	if len(g.KubeletExtraConfig) > 0 {
		switch t.AMIFamily {
		case v1alpha1.AMIFamilyBottlerocket, v1alpha1.AMIFamilyWindows:
			c.fail(path+".kubeletExtraConfig", "not supported for "+string(t.AMIFamily)+" (as in eksctl)",
				"on Bottlerocket use bottlerocket.settings.kubernetes; on Windows leave it out")
		}
		for _, k := range slices.Sorted(maps.Keys(g.KubeletExtraConfig)) {
			switch k {
			case "kind", "apiVersion", "address", "clusterDomain", "authentication", "authorization", "serverTLSBootstrap":
				c.fail(path+".kubeletExtraConfig."+k, "cannot be overridden: node joining depends on it (as in eksctl)", "remove it")
			}
		}
		maps.Copy(kubelet, g.KubeletExtraConfig)
	}
	if g.ClusterDNS != "" {
		kubelet["clusterDNS"] = []any{g.ClusterDNS}
	}
	if len(kubelet) > 0 {
		raw, err := json.Marshal(kubelet)
		if err != nil {
			c.fail(path+".kubeletExtraConfig", err.Error(), "")
		} else {
			t.Kubelet = &runtime.RawExtension{Raw: raw}
		}
	}
	return ng
}

func (c *converter) managed(g *ManagedNodeGroup, path string) *v1alpha1.NodeGroup {
	ng := c.base(&g.NodeGroupBase, path, TypeManaged)
	if ng == nil {
		return nil
	}
	t := &ng.Spec.Template
	switch {
	case g.InstanceType != "" && len(g.InstanceTypes) > 0:
		c.fail(path+".instanceTypes", "given with instanceType", "keep one of instanceType and instanceTypes")
	case len(g.InstanceTypes) > 0:
		t.InstanceTypes = slices.Clone(g.InstanceTypes)
	default:
		t.InstanceTypes = []string{cmp(g.InstanceType, defaultInstanceType)}
	}
	t.CapacityType = v1alpha1.CapacityOnDemand
	if g.Spot {
		t.CapacityType = v1alpha1.CapacitySpot
	}
	t.Taints = c.taints(g.Taints, path+".taints")
	return ng
}

// family maps eksctl's amiFamily (matched case-insensitively, as eksctl does).
func (c *converter) family(f, field string) v1alpha1.AMIFamily {
	l := strings.ToLower(f)
	switch {
	case l == "":
		return v1alpha1.AMIFamilyAmazonLinux2023 // eksctl's default
	case l == "amazonlinux2023":
		return v1alpha1.AMIFamilyAmazonLinux2023
	case l == "amazonlinux2":
		return v1alpha1.AMIFamilyAmazonLinux2
	case l == "bottlerocket":
		return v1alpha1.AMIFamilyBottlerocket
	case l == "bottlerocketfips":
		c.ignore(field, f, "the FIPS variant is not modelled: the group boots Bottlerocket's user data")
		return v1alpha1.AMIFamilyBottlerocket
	case strings.HasPrefix(l, "windowsserver"):
		c.ignore(field, f, "the edition and version are not modelled: the group is Windows, whose user data is the Start-EKSBootstrap.ps1 call of every edition")
		return v1alpha1.AMIFamilyWindows
	case strings.HasPrefix(l, "ubuntu"):
		c.fail(field, fmt.Sprintf("%q is not supported: nodejoin generates user data for AmazonLinux2023, AmazonLinux2, Bottlerocket and Windows", f),
			"use amiFamily: AmazonLinux2023")
	default:
		c.fail(field, fmt.Sprintf("%q is not an eksctl AMI family", f), "use AmazonLinux2023, AmazonLinux2, Bottlerocket or a WindowsServer… family")
	}
	return v1alpha1.AMIFamilyAmazonLinux2023
}

// scaling applies eksctl's size defaults and checks (pkg/apis/eksctl.io/v1alpha5
// validation.go): min defaults to desired or 2, max to desired or min (at least 1),
// desired to min.
func (c *converter) scaling(s ScalingConfig, path string) v1alpha1.ScalingConfig {
	negative := false
	for i, v := range []*int{s.DesiredCapacity, s.MinSize, s.MaxSize} {
		if v != nil && *v < 0 {
			c.fail(path+"."+[]string{"desiredCapacity", "minSize", "maxSize"}[i], fmt.Sprintf("%d is negative", *v), "give 0 or more")
			negative = true
		}
	}
	if negative {
		return v1alpha1.ScalingConfig{MaxSize: 1}
	}
	var minSize, maxSize, desired int
	switch {
	case s.MinSize != nil:
		minSize = *s.MinSize
		if s.DesiredCapacity != nil && *s.DesiredCapacity < minSize {
			c.fail(path+".desiredCapacity", fmt.Sprintf("%d is below minSize %d", *s.DesiredCapacity, minSize), "raise desiredCapacity or lower minSize")
		}
	case s.DesiredCapacity != nil:
		minSize = *s.DesiredCapacity
	default:
		minSize = defaultNodeCount
	}
	switch {
	case s.MaxSize != nil:
		maxSize = *s.MaxSize
		if s.DesiredCapacity != nil && *s.DesiredCapacity > maxSize {
			c.fail(path+".desiredCapacity", fmt.Sprintf("%d is above maxSize %d", *s.DesiredCapacity, maxSize), "lower desiredCapacity or raise maxSize")
		} else if maxSize < minSize {
			c.fail(path+".maxSize", fmt.Sprintf("%d is below minSize %d", maxSize, minSize), "raise maxSize or lower minSize")
		}
		if maxSize == 0 {
			c.fail(path+".maxSize", "0: a group holds at least one instance at most", "give maxSize 1 or more, and minSize/desiredCapacity 0 for an empty group")
		}
	case s.DesiredCapacity != nil:
		maxSize = *s.DesiredCapacity
	default:
		maxSize = minSize
	}
	if maxSize == 0 && s.MaxSize == nil {
		maxSize = defaultMaxSize
	}
	desired = minSize
	if s.DesiredCapacity != nil {
		desired = *s.DesiredCapacity
	}
	return v1alpha1.ScalingConfig{MinSize: int32(minSize), MaxSize: int32(maxSize), DesiredSize: ptr(int32(desired))}
}

func (c *converter) updateConfig(u *UpdateConfig, maxSize int32, path string) *v1alpha1.UpdateConfig {
	switch {
	case u.MaxUnavailable == nil && u.MaxUnavailablePercentage == nil:
		c.fail(path, "neither maxUnavailable nor maxUnavailablePercentage is set", "set one of them")
		return nil
	case u.MaxUnavailable != nil && u.MaxUnavailablePercentage != nil:
		c.fail(path, "both maxUnavailable and maxUnavailablePercentage are set", "keep one of them")
		return nil
	case u.MaxUnavailable != nil:
		v := *u.MaxUnavailable
		if v < 1 || v > 100 {
			c.fail(path+".maxUnavailable", fmt.Sprintf("%d is not between 1 and 100", v), "give 1 to 100 nodes")
		} else if int32(v) > maxSize {
			c.fail(path+".maxUnavailable", fmt.Sprintf("%d exceeds maxSize %d", v, maxSize), "lower it to maxSize or less")
		}
		return &v1alpha1.UpdateConfig{MaxUnavailable: ptr(int32(v))} //nolint:gosec // G115: out of 1..100, v failed above and the result is discarded.
	default:
		v := *u.MaxUnavailablePercentage
		if v < 1 || v > 100 {
			c.fail(path+".maxUnavailablePercentage", fmt.Sprintf("%d is not between 1 and 100", v), "give 1 to 100 percent")
		}
		return &v1alpha1.UpdateConfig{MaxUnavailablePercentage: ptr(int32(v))} //nolint:gosec // G115: out of 1..100, v failed above and the result is discarded.
	}
}

// checkLabels applies eksctl's label rules: valid keys and values, and no
// kubernetes.io/ or k8s.io/ prefix except the labels a kubelet may set on itself.
func (c *converter) checkLabels(labels map[string]string, path string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		field := path + "." + k
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			c.fail(field, "invalid label key: "+strings.Join(errs, "; "), "")
			continue
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			c.fail(field, fmt.Sprintf("invalid label value %q: %s", labels[k], strings.Join(errs, "; ")), "")
		}
		if prefix, _, ok := strings.Cut(k, "/"); ok && isKubernetesPrefix(prefix) && !kubeletapis.IsKubeletLabel(k) {
			c.fail(field, "the kubernetes.io/ and k8s.io/ prefixes are reserved (as in eksctl)", "use a prefix of your own")
		}
	}
}

func isKubernetesPrefix(p string) bool {
	for _, r := range []string{"kubernetes.io", "k8s.io"} {
		if p == r || strings.HasSuffix(p, "."+r) {
			return true
		}
	}
	return false
}

func (c *converter) taints(ts []Taint, path string) []corev1.Taint {
	if len(ts) == 0 {
		return nil
	}
	out := make([]corev1.Taint, 0, len(ts))
	for i, t := range ts {
		field := fmt.Sprintf("%s[%d]", path, i)
		if c.file.line(field) == 0 {
			field = path // the map form has no index
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			c.fail(field+".key", fmt.Sprintf("invalid taint key %q: %s", t.Key, strings.Join(errs, "; ")), "")
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				c.fail(field+".value", fmt.Sprintf("invalid taint value %q: %s", t.Value, strings.Join(errs, "; ")), "")
			}
		}
		effect := corev1.TaintEffect(t.Effect)
		switch effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			c.fail(field+".effect", fmt.Sprintf("%q is not a taint effect", t.Effect), "use NoSchedule, PreferNoSchedule or NoExecute")
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: effect})
	}
	return out
}

// bottlerocket turns bottlerocket.settings into the group's own TOML user data, which
// is merged with the generated settings as EKS merges a managed group's. Settings that
// eksctl reserves for itself are refused, as eksctl refuses them.
func (c *converter) bottlerocket(settings map[string]any, path, typ string, t *v1alpha1.NodeTemplate) {
	if k8s, ok := settings["kubernetes"].(map[string]any); ok {
		reserved := map[string]string{
			"node-labels": "use the group's labels", "node-taints": "use the group's taints",
		}
		if typ == TypeManaged {
			for _, k := range []string{"cluster-certificate", "api-server", "cluster-name", "cluster-dns-ip"} {
				reserved[k] = "remove it: the cluster's bootstrap settings are generated"
			}
		} else {
			reserved["max-pods"] = "use maxPodsPerNode"
		}
		for _, k := range slices.Sorted(maps.Keys(k8s)) {
			if fix, ok := reserved[k]; ok {
				c.fail(path+".kubernetes."+k, "set by nodejoin (as by eksctl)", fix)
			}
		}
	}
	data, err := toml.Marshal(map[string]any{"settings": tomlValues(settings)})
	if err != nil {
		c.fail(path, "cannot be written as TOML: "+err.Error(), "")
		return
	}
	t.UserData = string(data)
}

// tomlValues turns the JSON numbers of decoded settings into integers or floats.
func tomlValues(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = tomlValues(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = tomlValues(e)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	default:
		return v
	}
}

func firstLine(s string) string {
	line, _, more := strings.Cut(strings.TrimSpace(s), "\n")
	if more {
		line += " …"
	}
	return line
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func ptr[T any](v T) *T { return &v }
