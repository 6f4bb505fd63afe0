// Package eksbackend is the local EKS's state over the Kubernetes API: EKS managed node
// groups are NodeGroup objects, their updates are recorded on them, access entries are
// NodeAccessEntry objects, and the cluster is the static ClusterInfo the integrator
// passes. It owns the one mapping of a NodeGroup to EKS's Nodegroup (Nodegroup), which
// `nodejoin describe nodegroup` prints too, so the EKS API and `kubectl get nodegroups`
// never disagree: the objects own the state, EKS is a view of them.
package eksbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/nodegroup/usertemplate"
)

// ClusterInfo is what the local EKS says about its one cluster.
type ClusterInfo struct {
	// Cluster is DescribeCluster's answer; its Version is the minor version node
	// groups run.
	Cluster eksapi.Cluster
	// Region, AccountID, NodeRole and Subnets are as in Account.
	Region, AccountID string
	NodeRole          string
	Subnets           []string
	// Versions are DescribeClusterVersions' answer; empty means the cluster's version
	// alone, as the default.
	Versions []eksapi.ClusterVersion
	// PublicEndpoint, when set, is the endpoint DescribeCluster gives callers from
	// outside the VPC (eksapi.VPCCaller false); Cluster.Endpoint is the private one.
	PublicEndpoint string
}

// Backend serves the local EKS from the cluster's API.
type Backend struct {
	c        client.Client
	info     ClusterInfo
	releases Releases
	// templates reads users' launch templates; nil: they are not checked at creation.
	templates usertemplate.DescribeVersions
	now       func() time.Time
}

// New returns the backend over c (whose scheme knows v1alpha1) for the cluster info
// describes; releases (nil: none known) resolves release versions to AMIs.
func New(c client.Client, info ClusterInfo, releases Releases) *Backend {
	info.Cluster.Version = MinorVersion(info.Cluster.Version)
	return &Backend{c: c, info: info, releases: releases, now: time.Now}
}

// MinorVersion is a Kubernetes version as EKS names it, major.minor ("v1.37.2" is
// "1.37"): eksctl refuses any other form in DescribeClusterVersions.
func MinorVersion(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return strings.TrimPrefix(v, "v")
	}
	return parts[0] + "." + strings.TrimSuffix(parts[1], "+") // discovery's "37+"
}

func (b *Backend) account() Account {
	return Account{Cluster: b.info.Cluster.Name, Region: b.info.Region, AccountID: b.info.AccountID,
		Version: b.info.Cluster.Version, NodeRole: b.info.NodeRole, Subnets: b.info.Subnets, Releases: b.releases}
}

// cluster checks that name is the cluster's.
func (b *Backend) cluster(name string) error {
	if name != b.info.Cluster.Name {
		return eksapi.NotFound("No cluster found for name: %s.", name)
	}
	return nil
}

// ListClusters names the one cluster.
func (b *Backend) ListClusters(context.Context) ([]string, error) {
	return []string{b.info.Cluster.Name}, nil
}

// DescribeCluster is the cluster's info, with the endpoint the caller's network
// reaches.
func (b *Backend) DescribeCluster(ctx context.Context, name string) (eksapi.Cluster, error) {
	if err := b.cluster(name); err != nil {
		return eksapi.Cluster{}, err
	}
	c := b.info.Cluster
	if b.info.PublicEndpoint != "" && !eksapi.VPCCaller(ctx) {
		c.Endpoint = b.info.PublicEndpoint
	}
	if c.Tags == nil {
		c.Tags = map[string]string{}
	}
	return c, nil
}

// ClusterVersions are the info's versions, or the cluster's own as the default.
func (b *Backend) ClusterVersions(context.Context) ([]eksapi.ClusterVersion, error) {
	if len(b.info.Versions) > 0 {
		return b.info.Versions, nil
	}
	return []eksapi.ClusterVersion{{ClusterVersion: b.info.Cluster.Version, ClusterType: "eks", DefaultVersion: true,
		Status: "STANDARD_SUPPORT", VersionStatus: "STANDARD_SUPPORT", DefaultPlatformVersion: b.info.Cluster.PlatformVersion}}, nil
}

// get reads a node group of the cluster.
func (b *Backend) get(ctx context.Context, cluster, name string) (*v1alpha1.NodeGroup, error) {
	if err := b.cluster(cluster); err != nil {
		return nil, err
	}
	var ng v1alpha1.NodeGroup
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, eksapi.NotFound("No node group found for name: %s.", name)
	}
	if err := b.c.Get(ctx, client.ObjectKey{Name: name}, &ng); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, eksapi.NotFound("No node group found for name: %s.", name)
		}
		return nil, fmt.Errorf("reading NodeGroup %s: %w", name, err)
	}
	return &ng, nil
}

// DescribeNodegroup maps the NodeGroup object.
func (b *Backend) DescribeNodegroup(ctx context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	ng, err := b.get(ctx, cluster, name)
	if err != nil {
		return eksapi.Nodegroup{}, err
	}
	return Nodegroup(ng, b.account()), nil
}

// ListNodegroups names the NodeGroup objects, sorted.
func (b *Backend) ListNodegroups(ctx context.Context, cluster string) ([]string, error) {
	if err := b.cluster(cluster); err != nil {
		return nil, err
	}
	var l v1alpha1.NodeGroupList
	if err := b.c.List(ctx, &l); err != nil {
		return nil, fmt.Errorf("listing NodeGroups: %w", err)
	}
	names := make([]string, 0, len(l.Items))
	for _, ng := range l.Items {
		names = append(names, ng.Name)
	}
	slices.Sort(names)
	return names, nil
}

// DeleteNodegroup deletes the object; the controller's finalizer drains the nodes and
// deletes the Auto Scaling group and launch template, and the group reads DELETING
// until it is gone.
func (b *Backend) DeleteNodegroup(ctx context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	ng, err := b.get(ctx, cluster, name)
	if err != nil {
		return eksapi.Nodegroup{}, err
	}
	if err := b.c.Delete(ctx, ng, client.Preconditions{UID: &ng.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return eksapi.Nodegroup{}, eksapi.NotFound("No node group found for name: %s.", name)
		}
		return eksapi.Nodegroup{}, fmt.Errorf("deleting NodeGroup %s: %w", name, err)
	}
	d := Nodegroup(ng, b.account())
	d.Status = string(v1alpha1.PhaseDeleting)
	return d, nil
}

// CreateNodegroup creates the NodeGroup object EKS's request describes.
func (b *Backend) CreateNodegroup(ctx context.Context, cluster string, in *eksapi.CreateNodegroupRequest) (eksapi.Nodegroup, error) {
	if err := b.cluster(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	if err := b.checkLaunchTemplate(ctx, in); err != nil {
		return eksapi.Nodegroup{}, err
	}
	ng, err := b.FromRequest(in)
	if err != nil {
		return eksapi.Nodegroup{}, err
	}
	if err := b.c.Create(ctx, ng); err != nil {
		switch {
		case apierrors.IsAlreadyExists(err):
			if old, gerr := b.get(ctx, cluster, in.NodegroupName); gerr == nil && in.ClientRequestToken != "" && old.Annotations[TokenAnnotation] == in.ClientRequestToken {
				return Nodegroup(old, b.account()), nil
			}
			return eksapi.Nodegroup{}, eksapi.InUse("NodeGroup already exists with name %s and cluster name %s", in.NodegroupName, cluster)
		case apierrors.IsInvalid(err):
			return eksapi.Nodegroup{}, eksapi.InvalidParameter("the node group is not valid: %s", invalidText(err))
		}
		return eksapi.Nodegroup{}, fmt.Errorf("creating NodeGroup %s: %w", in.NodegroupName, err)
	}
	return Nodegroup(ng, b.account()), nil
}

// FromRequest is the NodeGroup a CreateNodegroup request describes, defaulted and
// validated: an *eksapi.Error names what does not fit.
func (b *Backend) FromRequest(in *eksapi.CreateNodegroupRequest) (*v1alpha1.NodeGroup, error) {
	if errs := validation.IsDNS1123Label(in.NodegroupName); len(errs) > 0 {
		return nil, eksapi.InvalidParameter("nodegroupName: %q: the local EKS keeps node groups as Kubernetes objects, whose names are lowercase letters, digits and '-', starting and ending with a letter or digit", in.NodegroupName)
	}
	if in.Version != "" && in.Version != b.info.Cluster.Version {
		return nil, eksapi.InvalidParameter("version: the cluster runs Kubernetes %s, and its node groups run it too, not %s", b.info.Cluster.Version, in.Version)
	}
	fam, ok := FamilyOf(in.AmiType)
	if in.AmiType == AmiTypeCustom && in.LaunchTemplate != nil {
		// The template's user data is used alone: the family only names the OS.
		fam, ok = v1alpha1.AMIFamilyAmazonLinux2023, true
	}
	if !ok {
		return nil, eksapi.InvalidParameter("amiType: the local EKS does not run %q", in.AmiType)
	}
	ng := &v1alpha1.NodeGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.NodeGroupKind},
		ObjectMeta: metav1.ObjectMeta{Name: in.NodegroupName, Annotations: map[string]string{}},
		Spec: v1alpha1.NodeGroupSpec{
			Scaling: scaling(in.ScalingConfig),
			Subnets: slices.Clone(in.Subnets),
			Template: v1alpha1.NodeTemplate{
				AMIFamily: fam, InstanceTypes: slices.Clone(in.InstanceTypes), CapacityType: v1alpha1.CapacityType(in.CapacityType),
				Labels: maps.Clone(in.Labels), InstanceProfile: roleName(in.NodeRole),
			},
		},
	}
	if len(ng.Spec.Subnets) == 0 {
		ng.Spec.Subnets = nil
	}
	if lt := in.LaunchTemplate; lt != nil {
		ng.Spec.Template.LaunchTemplate = &v1alpha1.LaunchTemplateRef{ID: lt.ID, Name: lt.Name, Version: lt.Version}
	}
	taints, err := kubeTaints("taints", in.Taints)
	if err != nil {
		return nil, err
	}
	ng.Spec.Template.Taints = taints
	if u := in.UpdateConfig; u != nil {
		ng.Spec.UpdateConfig = &v1alpha1.UpdateConfig{MaxUnavailable: u.MaxUnavailable, MaxUnavailablePercentage: u.MaxUnavailablePercentage}
		ng.Spec.UpdateStrategy = v1alpha1.UpdateStrategy(u.UpdateStrategy)
	}
	im := Image{AmiType: in.AmiType, DiskSize: in.DiskSize}
	if in.ReleaseVersion != "" {
		ami, err := b.image(fam, in.ReleaseVersion)
		if err != nil {
			return nil, err
		}
		ng.Spec.Template.AMIID, im.ReleaseVersion, im.AMIID = ami, in.ReleaseVersion, ami
	}
	if err := setJSON(ng, ImageAnnotation, im); err != nil {
		return nil, err
	}
	if in.ClientRequestToken != "" {
		ng.Annotations[TokenAnnotation] = in.ClientRequestToken
	}
	if len(in.Tags) > 0 {
		if err := setJSON(ng, TagsAnnotation, in.Tags); err != nil {
			return nil, err
		}
	}
	ng.Default()
	if err := checkValid(ng); err != nil {
		return nil, err
	}
	return ng, nil
}

// image is the AMI of a release of family.
func (b *Backend) image(fam v1alpha1.AMIFamily, release string) (string, error) {
	if b.releases == nil {
		return "", eksapi.InvalidParameter("releaseVersion: the local EKS knows no releases; leave it out to run the cluster's default image")
	}
	ami, ok := b.releases.Image(fam, release)
	if !ok {
		latest, _, _ := b.releases.Latest(fam)
		return "", eksapi.InvalidParameter("releaseVersion: %s is no release of the %s images the local EC2 has (the latest is %q)", release, fam, latest)
	}
	return ami, nil
}

// scaling is the spec's scaling from EKS's, with EKS's defaults for sizes not given:
// desired 2 (within the bounds given), min 1 (at most desired), max 2 (at least
// desired).
func scaling(s *eksapi.ScalingConfig) v1alpha1.ScalingConfig {
	var in eksapi.ScalingConfig
	if s != nil {
		in = *s
	}
	d := int32(2)
	switch {
	case in.DesiredSize != nil:
		d = *in.DesiredSize
	case in.MaxSize != nil && *in.MaxSize < d:
		d = *in.MaxSize
	case in.MinSize != nil && *in.MinSize > d:
		d = *in.MinSize
	}
	out := v1alpha1.ScalingConfig{MinSize: min(1, d), MaxSize: max(2, d), DesiredSize: &d}
	if in.MinSize != nil {
		out.MinSize = *in.MinSize
	}
	if in.MaxSize != nil {
		out.MaxSize = *in.MaxSize
	}
	return out
}

// roleName is the name of the role an ARN names: local instance profiles are named
// after their role.
func roleName(arn string) string {
	_, rest, _ := strings.Cut(arn, ":role/")
	return rest[strings.LastIndex(rest, "/")+1:]
}

func kubeTaints(field string, in []eksapi.Taint) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, t := range in {
		e, ok := KubeEffect(t.Effect)
		if !ok {
			return nil, eksapi.InvalidParameter("%s: taint %s has effect %q; want one of %s", field, t.Key, t.Effect, strings.Join(eksapi.TaintEffects, ", "))
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: e})
	}
	return out, nil
}

// checkValid runs the NodeGroup's validation, naming the EKS parameter of a field.
func checkValid(ng *v1alpha1.NodeGroup) error {
	errs := ng.Validate()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, eksField(e.Field)+": "+e.ErrorBody())
	}
	return eksapi.InvalidParameter("%s", strings.Join(msgs, "; "))
}

// eksField names the EKS parameter of a NodeGroup field path.
func eksField(path string) string {
	for _, m := range []struct{ prefix, name string }{
		{"spec.template.labels", "labels"}, {"spec.template.taints", "taints"},
		{"spec.template.instanceTypes", "instanceTypes"}, {"spec.template.capacityType", "capacityType"},
		{"spec.template.amiID", "releaseVersion"}, {"spec.template.instanceProfile", "nodeRole"},
		{"spec.scaling", "scalingConfig"}, {"spec.updateConfig", "updateConfig"}, {"spec.subnets", "subnets"},
		{"metadata.name", "nodegroupName"}, {"spec.template.launchTemplate", "launchTemplate"},
	} {
		if strings.HasPrefix(path, m.prefix) {
			return m.name + strings.TrimPrefix(path, m.prefix)
		}
	}
	return path
}

func invalidText(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return "the API server refused it"
	}
	var msgs []string
	for _, c := range se.Status().Details.Causes {
		msgs = append(msgs, eksField(c.Field)+": "+c.Message)
	}
	return strings.Join(msgs, "; ")
}

func setJSON(ng *v1alpha1.NodeGroup, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	if ng.Annotations == nil {
		ng.Annotations = map[string]string{}
	}
	ng.Annotations[key] = string(b)
	return nil
}
