// Package userdata is nodejoin's one user-data encoder: it generates the user data of a
// node group's instances for every AMI family (v1alpha1.AMIFamily), as EKS managed node
// groups (Style Managed) and eksctl's self-managed groups (Style SelfManaged) generate
// it, merges the user's own user data the way managed node groups merge it, and renders
// the user data of one instance outside any group (RenderInstance, the sandbox's). Output
// is deterministic: maps are sorted and the MIME boundary is fixed.
//
// Render returns the user data as the instance reads it from instance metadata; a
// launch template's UserData is its base64 encoding. nodeadm's decoder
// (internal/userdata) reads every form back; the package's tests check that. It imports
// the API types and nodeadm's configuration helpers, never the controller or sandbox.
package userdata

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

// Style says whose user data to reproduce.
type Style string

// The styles.
const (
	// Managed is what EKS managed node groups give an instance: EKS's bootstrap merged
	// with the user's user data (nothing merged with a custom AMI).
	Managed Style = "managed"
	// SelfManaged is what eksctl writes into a self-managed group's launch template.
	SelfManaged Style = "eksctl"
)

// Cluster is what user data must say about the cluster the nodes join.
type Cluster struct {
	Name     string
	Endpoint string
	// CertificateAuthority is the cluster CA bundle, PEM.
	CertificateAuthority []byte
	// ServiceCIDR is the cluster's service range (IPv4 or IPv6).
	ServiceCIDR string
	// DNSClusterIP is the cluster DNS address; empty derives it from ServiceCIDR as EKS
	// does (the range's address ending in .10, or ::a).
	DNSClusterIP string
	// BootstrapToken joins the nodes with a bootstrap token (local clusters only). It
	// is a secret: it appears in the user data and nowhere else.
	BootstrapToken string
	// VPCIPv4CIDR is the instances' VPC range, for RenderInstance: where bootstrap.sh's
	// rule picks the right cluster DNS address from it, the user data names none.
	VPCIPv4CIDR string
}

// Template is what a node group says about its instances.
type Template struct {
	Family        v1alpha1.AMIFamily
	Style         Style
	NodeGroupName string
	// InstanceType sizes max pods when MaxPods is nil (managed groups).
	InstanceType string
	// CapacityType is ON_DEMAND (the default) or SPOT.
	CapacityType string
	Labels       map[string]string
	Taints       []corev1.Taint
	// Kubelet is a partial KubeletConfiguration (JSON field names).
	Kubelet map[string]any
	MaxPods *int32
	// PreBootstrapCommands run before the bootstrap: shell commands (PowerShell on Windows).
	PreBootstrapCommands []string
	// UserData is the user's own user data, merged with the generated one.
	UserData string
	// AMIID is a custom AMI. With Style Managed, EKS then merges nothing: the user's
	// UserData is the whole user data and must bootstrap the node itself.
	AMIID string

	// ReleaseAMI is the AMI EKS chose for a managed group without a custom AMI; it is
	// the value of the eks.amazonaws.com/nodegroup-image label (omitted when empty).
	ReleaseAMI string
	// LaunchTemplateID and LaunchTemplateVersion name the launch template version the
	// instances come from; managed groups label nodes with them (omitted when empty).
	LaunchTemplateID      string
	LaunchTemplateVersion string
	// Scaling sizes the Auto Scaling group of RenderCloudFormation (parameter
	// defaults); Render does not use it.
	Scaling *Scaling
}

// Scaling is an Auto Scaling group's size.
type Scaling struct{ Min, Max, Desired int32 }

// The labels EKS managed node groups put on their nodes.
const (
	LabelNodeGroup             = "eks.amazonaws.com/nodegroup"
	LabelNodeGroupImage        = "eks.amazonaws.com/nodegroup-image"
	LabelCapacityType          = "eks.amazonaws.com/capacityType"
	LabelSourceLaunchTemplate  = "eks.amazonaws.com/sourceLaunchTemplateId"
	LabelSourceTemplateVersion = "eks.amazonaws.com/sourceLaunchTemplateVersion"
)

// Render generates the user data for t's instances in cluster c, merged with
// t.UserData. The result is deterministic. It is empty only for a managed group with a
// custom AMI and no user data of its own, which is an error.
func Render(c Cluster, t Template) ([]byte, error) {
	r, err := newRenderer(c, t)
	if err != nil {
		return nil, err
	}
	t = r.t // defaulted
	if t.Style == Managed && t.AMIID != "" {
		// EKS merges nothing into a custom AMI's user data.
		if strings.TrimSpace(t.UserData) == "" {
			return nil, fmt.Errorf("node group %s: a custom AMI (%s) needs user data that bootstraps the node: EKS merges nothing into it", t.NodeGroupName, t.AMIID)
		}
		return []byte(t.UserData), nil
	}
	switch t.Family {
	case v1alpha1.AMIFamilyAmazonLinux2:
		if t.Style == Managed {
			return r.al2Managed()
		}
		return r.al2CloudConfig()
	case v1alpha1.AMIFamilyAmazonLinux2023:
		return r.al2023()
	case v1alpha1.AMIFamilyBottlerocket:
		return r.bottlerocket()
	case v1alpha1.AMIFamilyWindows:
		return r.windows()
	}
	return nil, fmt.Errorf("node group %s: AMI family %q: %w", t.NodeGroupName, t.Family, v1alpha1.ErrUnknownAMIFamily)
}

// renderer holds a validated template and the values derived from it.
type renderer struct {
	c       Cluster
	t       Template
	dns     string
	labels  map[string]string
	maxPods int // 0: not set
	caB64   string
}

//nolint:gocyclo // a flat sequence of independent input checks.
func newRenderer(c Cluster, t Template) (*renderer, error) {
	if t.Style == "" {
		t.Style = Managed
	}
	if t.Style != Managed && t.Style != SelfManaged {
		return nil, fmt.Errorf("style %q: want %s or %s", t.Style, Managed, SelfManaged)
	}
	if t.CapacityType == "" {
		t.CapacityType = "ON_DEMAND"
	}
	where := "node group " + t.NodeGroupName
	if t.NodeGroupName == "" {
		return nil, fmt.Errorf("node group name is required")
	}
	if c.Name == "" || c.Endpoint == "" || len(c.CertificateAuthority) == 0 {
		return nil, fmt.Errorf("%s: the cluster's name, endpoint and CA are all required (got name %q, endpoint %q, %d bytes of CA)", where, c.Name, c.Endpoint, len(c.CertificateAuthority))
	}
	if !strings.HasPrefix(c.Endpoint, "https://") {
		return nil, fmt.Errorf("%s: cluster endpoint %q: want an https:// URL", where, c.Endpoint)
	}
	r := &renderer{c: c, t: t, caB64: b64(c.CertificateAuthority)}
	if c.ServiceCIDR != "" {
		p, err := netip.ParsePrefix(c.ServiceCIDR)
		if err != nil || p.Masked() != p {
			return nil, fmt.Errorf("%s: service CIDR %q: want a network address such as 10.100.0.0/16", where, c.ServiceCIDR)
		}
	}
	switch {
	case c.DNSClusterIP != "":
		if _, err := netip.ParseAddr(c.DNSClusterIP); err != nil {
			return nil, fmt.Errorf("%s: cluster DNS address %q is not an IP address", where, c.DNSClusterIP)
		}
		r.dns = c.DNSClusterIP
	case c.ServiceCIDR != "":
		dns, err := nodeconfig.ClusterDNS(c.ServiceCIDR)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		r.dns = dns
	}
	if err := validateLabels(where, t.Labels); err != nil {
		return nil, err
	}
	if err := validateTaints(where, t.Taints); err != nil {
		return nil, err
	}
	if err := validateKubelet(where, t.Kubelet); err != nil {
		return nil, err
	}
	if t.MaxPods != nil {
		if *t.MaxPods <= 0 {
			return nil, fmt.Errorf("%s: maxPods %d: want a positive number", where, *t.MaxPods)
		}
		if _, ok := t.Kubelet["maxPods"]; ok {
			return nil, fmt.Errorf("%s: maxPods is set twice, in maxPods and in kubelet.maxPods; keep one", where)
		}
		r.maxPods = int(*t.MaxPods)
	}
	if t.BootstrapTokenUnsupported() && c.BootstrapToken != "" {
		return nil, fmt.Errorf("%s: bootstrap tokens are not supported for %s nodes (nodejoin runs no Windows node); join them with their instance identity", where, t.Family)
	}
	r.labels = r.nodeLabels()
	return r, nil
}

// BootstrapTokenUnsupported reports whether t's family cannot carry a bootstrap token.
func (t Template) BootstrapTokenUnsupported() bool { return t.Family == v1alpha1.AMIFamilyWindows }

// nodeLabels are the template's labels plus the ones EKS or eksctl add.
func (r *renderer) nodeLabels() map[string]string {
	labels := map[string]string{}
	// eksctl adds its alpha.eksctl.io labels when it defaults the ClusterConfig, so a
	// self-managed template carries them already (internal/eksctl converts them).
	if r.t.Style == Managed {
		labels[LabelNodeGroup] = r.t.NodeGroupName
		labels[LabelCapacityType] = r.t.CapacityType
		if r.t.ReleaseAMI != "" {
			labels[LabelNodeGroupImage] = r.t.ReleaseAMI
		}
		if r.t.LaunchTemplateID != "" {
			labels[LabelSourceLaunchTemplate] = r.t.LaunchTemplateID
		}
		if r.t.LaunchTemplateVersion != "" {
			labels[LabelSourceTemplateVersion] = r.t.LaunchTemplateVersion
		}
	}
	for k, v := range r.t.Labels {
		labels[k] = v
	}
	return labels
}

// NodeLabels returns the labels Render gives t's nodes in cluster c: the template's,
// and for managed groups those EKS adds.
func NodeLabels(c Cluster, t Template) (map[string]string, error) {
	r, err := newRenderer(c, t)
	if err != nil {
		return nil, err
	}
	return r.labels, nil
}

// managedMaxPods is the max pods EKS computes for a managed group: the template's
// value, else the instance type's standard value capped at 110 (EKS raises the cap to
// 250 above 30 vCPUs, which the instance-type table cannot tell), else 0 (unknown type).
func (r *renderer) managedMaxPods() int {
	if r.maxPods > 0 {
		return r.maxPods
	}
	if v, ok := r.t.Kubelet["maxPods"]; ok {
		if n, ok := toInt(v); ok {
			return n
		}
	}
	info, ok := instancetypes.Lookup(r.t.InstanceType)
	if !ok {
		return 0
	}
	return min(info.StandardMaxPods(), nodeconfig.DefaultMaxPods)
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case float64:
		if n == float64(int(n)) {
			return int(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	}
	return 0, false
}

// labelsArg renders labels as --node-labels takes them: k=v pairs, sorted, comma-separated.
func labelsArg(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + labels[k]
	}
	return strings.Join(kv, ",")
}

// taintsArg renders taints as --register-with-taints takes them.
func taintsArg(taints []corev1.Taint) string {
	out := make([]string, len(taints))
	for i, t := range taints {
		out[i] = taintString(t)
	}
	return strings.Join(out, ",")
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func validateLabels(where string, labels map[string]string) error {
	for _, k := range sortedKeys(labels) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%s: label key %q: %s", where, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("%s: label %s value %q: %s", where, k, labels[k], strings.Join(errs, "; "))
		}
	}
	return nil
}

func validateTaints(where string, taints []corev1.Taint) error {
	seen := map[string]bool{}
	for i, t := range taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("%s: taints[%d] key %q: %s", where, i, t.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("%s: taints[%d] value %q: %s", where, i, t.Value, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("%s: taints[%d] effect %q: want NoSchedule, PreferNoSchedule or NoExecute", where, i, t.Effect)
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			return fmt.Errorf("%s: taints[%d]: key %s with effect %s appears twice", where, i, t.Key, t.Effect)
		}
		seen[id] = true
	}
	return nil
}

// forbiddenKubelet are the kubelet settings the node's join depends on; eksctl refuses
// them for the same reason.
var forbiddenKubelet = []string{"kind", "apiVersion", "address", "clusterDomain", "authentication", "authorization", "serverTLSBootstrap"}

func validateKubelet(where string, kubelet map[string]any) error {
	for _, k := range forbiddenKubelet {
		if _, ok := kubelet[k]; ok {
			return fmt.Errorf("%s: kubelet.%s cannot be set: the node's join depends on it", where, k)
		}
	}
	if _, err := json.Marshal(kubelet); err != nil {
		return fmt.Errorf("%s: kubelet config cannot be encoded as JSON: %w", where, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
