// Package controlplane runs a real Kubernetes control plane — etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler — as child processes on one machine, with a
// freshly generated PKI. kube-controller-manager and kube-scheduler (unless
// Options.APIServerOnly) each have a client certificate of their own and are restarted
// whenever they exit.
//
// As root the control plane lives in a network namespace of its own (the cluster
// namespace), bound to a bridge address there that local instances later attach to, and
// the host reaches the API through a loopback port that this package forwards into the
// namespace. Without root it runs on the host's loopback interface.
//
// options.go, pki.go, state.go (the state file), daemons.go, components.go (the
// restarted components), health.go and cluster.go hold its parts. It imports pki, netns,
// process and toolbin; nothing of the nodes or the cloud.
package controlplane

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"time"
)

// Network says where the control plane listens.
type Network string

// The networks a cluster can use.
const (
	// NetworkNamespace runs the control plane in a network namespace of its own. Root only.
	NetworkNamespace Network = "namespace"
	// NetworkLoopback runs the control plane on the host's loopback interface.
	NetworkLoopback Network = "loopback"
)

// StepPhase is where a step of Start is.
type StepPhase string

// The phases OnStep reports.
const (
	StepStarted StepPhase = "started"
	StepDone    StepPhase = "done"
	StepFailed  StepPhase = "failed"
)

// Defaults.
const (
	DefaultName = "nodejoin"
	// BridgeName is the bridge inside the cluster namespace that instances attach to.
	BridgeName = "nj0"
	// apiserverPort is the API server's port inside the cluster namespace; the host sees
	// it through the forwarded loopback port instead.
	apiserverPort = 6443
	// tokenWebhookPort is the token webhook's port inside the cluster namespace.
	tokenWebhookPort = 21362
)

var (
	// DefaultNodeCIDR is reserved for benchmarking (RFC 2544) and never routed, so it
	// does not collide with real networks; it exists only inside nodejoin's namespaces.
	DefaultNodeCIDR = netip.MustParsePrefix("198.18.0.0/16")
	// DefaultServiceCIDR matches the one EKS picks for VPCs outside 10.0.0.0/8.
	DefaultServiceCIDR = netip.MustParsePrefix("10.100.0.0/16")
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Options configure a cluster.
type Options struct {
	// Name is the cluster's name: lower-case letters, digits and '-', at most 32
	// characters. Default "nodejoin".
	Name string
	// StateDir holds the cluster's PKI, etcd data, logs, kubeconfig and state file. It
	// must not hold a cluster already. Required.
	StateDir string
	// BinDir holds kube-apiserver and etcd; see toolbin.Dir.
	BinDir string
	// Network is where the control plane listens. Default: NetworkNamespace as root,
	// NetworkLoopback otherwise.
	Network Network
	// NodeCIDR is the range inside the cluster namespace for the bridge and instances.
	// The bridge takes its first address. Default 198.18.0.0/16: the local VPC, whose
	// one subnet gives nodes and pods their addresses (docs/network.md).
	NodeCIDR netip.Prefix
	// ServiceCIDR is the cluster's service range; its first address is the
	// kubernetes service's. Default 10.100.0.0/16.
	ServiceCIDR netip.Prefix
	// APIPort is the host's loopback port for the API; 0 picks a free one.
	APIPort int
	// TokenWebhookConfigFile, when set, is passed to kube-apiserver as
	// --authentication-token-webhook-config-file (a kubeconfig-format file).
	TokenWebhookConfigFile string
	// TokenWebhook makes kube-apiserver send bearer tokens it does not know itself to a
	// webhook that the caller serves on Cluster.ListenTokenWebhook, with a serving
	// certificate from the cluster CA (PKI().TokenWebhook).
	TokenWebhook bool
	// TokenWebhookService, when valid (an address of ServiceCIDR), is where kube-apiserver
	// calls the token webhook instead (port 443): a Service in front of webhook replicas
	// on control-plane nodes, which kube-proxy on the first one routes from the cluster
	// namespace. The serving certificate names it too.
	TokenWebhookService netip.Addr
	// APIServerOnly starts etcd and kube-apiserver alone, without kube-controller-manager
	// and kube-scheduler: tests of one controller use it, so that upstream's controllers
	// (node lifecycle taints, garbage collection, service accounts) leave their objects
	// alone and the test machine runs two daemons fewer.
	APIServerOnly bool
	// UpstreamKubeletClientCSRs makes kube-controller-manager approve (csrapproving) and
	// sign (the kubernetes.io/kube-apiserver-client-kubelet signer) kubelet client
	// certificates, as upstream clusters do, instead of leaving them to
	// nodejoin-controller: the baseline `nodejoin bench join --baseline kcm` measures
	// against. Serving certificates stay nodejoin-controller's either way.
	UpstreamKubeletClientCSRs bool
	// KubeletSigners makes kube-controller-manager sign for both kubelet signers with
	// the cluster CA while its approver stays off: nodejoin-controller --csr=approve
	// (the chart's default) approves, and no CA key is in the controller.
	KubeletSigners bool
	// Profiling serves kube-apiserver's /debug/pprof/ (its --profiling) to clients
	// with the cluster-admin role: `nodejoin bench join --profile` reads its CPU
	// profile during the burst. Off by default, as in upstream's hardening guides.
	Profiling bool
	// UnsafeNoFsync makes etcd skip fsync: faster, and fine for throw-away test clusters.
	UnsafeNoFsync bool
	// ReadyTimeout bounds the wait for each daemon to become ready. Default 2 minutes.
	ReadyTimeout time.Duration
	// Progress receives one line per step as the cluster starts; nil discards them.
	Progress io.Writer
	// OnStep, when set, is called as each step starts and ends.
	OnStep func(step string, phase StepPhase, elapsed time.Duration)
	// Log receives structured diagnostics; nil discards them.
	Log *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Network == "" {
		o.Network = NetworkLoopback
		if os.Geteuid() == 0 {
			o.Network = NetworkNamespace
		}
	}
	if !o.NodeCIDR.IsValid() {
		o.NodeCIDR = DefaultNodeCIDR
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) validate() error {
	if !nameRE.MatchString(o.Name) {
		return fmt.Errorf("cluster name %q: use 1 to 32 lower-case letters, digits and '-', starting and ending with a letter or digit", o.Name)
	}
	if o.StateDir == "" {
		return fmt.Errorf("cluster %s: no state directory given", o.Name)
	}
	switch o.Network {
	case NetworkLoopback:
	case NetworkNamespace:
		if os.Geteuid() != 0 {
			return fmt.Errorf("network %q needs root (network namespaces); run as root or use network %q", NetworkNamespace, NetworkLoopback)
		}
	default:
		return fmt.Errorf("network %q: want %q or %q", o.Network, NetworkNamespace, NetworkLoopback)
	}
	if !o.NodeCIDR.Addr().Is4() || o.NodeCIDR.Bits() > 30 || o.NodeCIDR.Bits() < 8 {
		return fmt.Errorf("node CIDR %s: want an IPv4 range between /8 and /30", o.NodeCIDR)
	}
	if !o.ServiceCIDR.Addr().Is4() || o.ServiceCIDR.Bits() > 28 || o.ServiceCIDR.Bits() < 12 {
		return fmt.Errorf("service CIDR %s: want an IPv4 range between /12 and /28", o.ServiceCIDR)
	}
	if o.NodeCIDR.Overlaps(o.ServiceCIDR) {
		return fmt.Errorf("node CIDR %s overlaps service CIDR %s", o.NodeCIDR, o.ServiceCIDR)
	}
	if o.TokenWebhookService.IsValid() && (!o.TokenWebhook || !o.ServiceCIDR.Contains(o.TokenWebhookService)) {
		return fmt.Errorf("cluster %s: the token webhook's Service address %s needs the token webhook on and an address of the service CIDR %s", o.Name, o.TokenWebhookService, o.ServiceCIDR)
	}
	if o.TokenWebhook && o.TokenWebhookConfigFile != "" {
		return fmt.Errorf("cluster %s: give a token webhook configuration file or let the cluster serve one, not both", o.Name)
	}
	if o.APIPort < 0 || o.APIPort > 65535 {
		return fmt.Errorf("API port %d out of range", o.APIPort)
	}
	return nil
}

// BridgeAddr is the bridge's address in the cluster namespace: the node CIDR's first
// address. The API server listens there.
func (o *Options) BridgeAddr() netip.Addr { return o.NodeCIDR.Masked().Addr().Next() }

// MaxControlPlaneNodes is how many control-plane nodes ControlPlaneNodeAddr has an
// address for.
const MaxControlPlaneNodes = 2

// ControlPlaneNodeAddr is the address of control-plane node i (from 0): the first is
// the bridge's (it runs in the cluster namespace, beside kube-apiserver); the second
// has the node CIDR's fourth address, which the local EC2 never gives out (the first
// four of a subnet are reserved, as on AWS: network, router, DNS, reserved).
func (o *Options) ControlPlaneNodeAddr(i int) (netip.Addr, error) {
	switch i {
	case 0:
		return o.BridgeAddr(), nil
	case 1:
		return o.BridgeAddr().Next().Next(), nil
	}
	return netip.Addr{}, fmt.Errorf("control-plane node %d: a cluster has at most %d", i+1, MaxControlPlaneNodes)
}

// serviceIP is the kubernetes service's cluster IP: the service CIDR's first address.
func (o *Options) serviceIP() netip.Addr { return o.ServiceCIDR.Masked().Addr().Next() }
