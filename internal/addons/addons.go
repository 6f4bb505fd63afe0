// Package addons renders the add-ons a cluster gets at creation, as EKS's cluster
// bootstrap installs them: kube-proxy (a DaemonSet in iptables mode), CoreDNS (a
// Deployment behind the kube-dns Service at the cluster DNS address) and aws-node (the
// VPC CNI's DaemonSet, running nodejoin-netagent). The objects are
// typed k8s.io/api values; nodejoin-controller applies them (internal/manager).
package addons

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

// Add-on names, as --addons takes them.
const (
	KubeProxy = "kube-proxy"
	CoreDNS   = "coredns"
)

// Names are the add-ons this package renders, in the order they are applied.
var Names = []string{KubeProxy, CoreDNS, AWSNode}

// Label is on every object of an add-on, its value the add-on's name: the controller
// watches the objects by it and applies them again when they are deleted or changed.
const Label = "nodejoin.io/addon"

// SimulatedNodeLabel is on the Nodes of simulated kubelets (internal/kubeletsim).
// Node add-ons keep off them: a simulated node has no network namespace to program, and
// a thousand of them must not cost a thousand add-on pods.
const SimulatedNodeLabel = "nodejoin.io/simulated"

// NoInstanceLabel is on Nodes that are no EC2 instance (the local cluster's
// control-plane node): the VPC network add-on, which reads its node's instance from
// IMDS and gives pods addresses of its ENIs, keeps off them.
const NoInstanceLabel = "nodejoin.io/no-instance"

// Defaults.
const (
	DefaultKubeProxyImage = "registry.k8s.io/kube-proxy:v1.37.1"
	DefaultCoreDNSImage   = "registry.k8s.io/coredns/coredns:v1.14.6"
	DefaultClusterDomain  = "cluster.local"
)

var (
	// DefaultPodCIDR is the range local nodes take their pod ranges from
	// (10.244.<n>.0/24 per node).
	DefaultPodCIDR = netip.MustParsePrefix("10.244.0.0/16")
	// DefaultServiceCIDR is EKS's for VPCs outside 10.0.0.0/8.
	DefaultServiceCIDR = netip.MustParsePrefix("10.100.0.0/16")
)

// Options say which add-ons to render and for which cluster.
type Options struct {
	// Enabled names the add-ons (Names); empty renders none.
	Enabled []string
	// APIServer is the API server's real address (https://host:port) as nodes reach it.
	// kube-proxy connects to it directly: the kubernetes Service's ClusterIP works only
	// once kube-proxy runs. Required for kube-proxy.
	APIServer string
	// PodCIDR is the cluster's pod range: kube-proxy's clusterCIDR, inside which it
	// does not masquerade. Default DefaultPodCIDR.
	PodCIDR netip.Prefix
	// ServiceCIDR is the service range. Default DefaultServiceCIDR.
	ServiceCIDR netip.Prefix
	// DNSIP is the kube-dns Service's address. Default: derived from ServiceCIDR as
	// nodeadm derives the kubelet's clusterDNS (nodeconfig.ClusterDNS), so the two agree.
	DNSIP netip.Addr
	// ClusterDomain is the DNS domain CoreDNS serves. Default DefaultClusterDomain.
	ClusterDomain string
	// Images; defaults DefaultKubeProxyImage and DefaultCoreDNSImage.
	KubeProxyImage, CoreDNSImage string
	// AWSNode configures aws-node.
	AWSNode AWSNodeOptions
}

// ParseNames parses a comma-separated list of add-on names ("kube-proxy,coredns");
// "" and "none" mean none.
func ParseNames(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []string
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("unknown add-on %q: choose from %s, or none", n, strings.Join(Names, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Complete fills in defaults and checks the options.
func (o *Options) Complete() error {
	var errs []error
	for _, n := range o.Enabled {
		if !slices.Contains(Names, n) {
			errs = append(errs, fmt.Errorf("unknown add-on %q: choose from %s", n, strings.Join(Names, ", ")))
		}
	}
	if !o.PodCIDR.IsValid() {
		o.PodCIDR = DefaultPodCIDR
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	o.PodCIDR, o.ServiceCIDR = o.PodCIDR.Masked(), o.ServiceCIDR.Masked()
	if o.PodCIDR.Overlaps(o.ServiceCIDR) {
		errs = append(errs, fmt.Errorf("pod range %s overlaps service range %s: give ranges that do not overlap", o.PodCIDR, o.ServiceCIDR))
	}
	if !o.DNSIP.IsValid() {
		s, err := nodeconfig.ClusterDNS(o.ServiceCIDR.String())
		if err != nil {
			errs = append(errs, err)
		} else if o.DNSIP, err = netip.ParseAddr(s); err != nil {
			errs = append(errs, fmt.Errorf("cluster DNS address %q: %w", s, err))
		}
	}
	if o.DNSIP.IsValid() && !o.ServiceCIDR.Contains(o.DNSIP) {
		errs = append(errs, fmt.Errorf("cluster DNS address %s is outside the service range %s", o.DNSIP, o.ServiceCIDR))
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.KubeProxyImage == "" {
		o.KubeProxyImage = DefaultKubeProxyImage
	}
	if o.CoreDNSImage == "" {
		o.CoreDNSImage = DefaultCoreDNSImage
	}
	if o.enabled(KubeProxy) {
		if err := o.checkAPIServer(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := o.AWSNode.complete(); err != nil && o.enabled(AWSNode) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkAPIServer checks the address kube-proxy connects to.
func (o *Options) checkAPIServer() error {
	u, err := url.Parse(o.APIServer)
	switch {
	case o.APIServer == "":
		return errors.New("kube-proxy needs the API server's address (https://host:port, as nodes reach it; not the kubernetes Service's ClusterIP)")
	case err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/"):
		return fmt.Errorf("API server address %q: want https://host:port", o.APIServer)
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && o.ServiceCIDR.Contains(a) {
		return fmt.Errorf("API server address %q is in the service range %s: kube-proxy needs the real address, which works before any Service does", o.APIServer, o.ServiceCIDR)
	}
	return nil
}

func (o *Options) enabled(name string) bool { return slices.Contains(o.Enabled, name) }

// Objects returns the objects of the enabled add-ons, with their apiVersion and kind
// set, in the order to apply them (each add-on's identities and roles before its
// workload). It completes a copy of o.
func Objects(o Options) ([]runtime.Object, error) {
	o.Enabled = slices.Clone(o.Enabled)
	if err := o.Complete(); err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, n := range Names {
		if !o.enabled(n) {
			continue
		}
		var objs []runtime.Object
		var err error
		switch n {
		case KubeProxy:
			objs, err = kubeProxy(&o)
		case CoreDNS:
			objs = coreDNS(&o)
		case AWSNode:
			objs = awsNode(&o)
		}
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// notSimulated keeps a pod off the Nodes of simulated kubelets.
func notSimulated() *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: SimulatedNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
			}}},
		},
	}}
}

func labels(addon string, extra map[string]string) map[string]string {
	l := map[string]string{Label: addon}
	for k, v := range extra {
		l[k] = v
	}
	return l
}
