// Package sandbox runs `nodejoin up`, `add node`, `down`, `diagnose` and `export logs`:
// a local cluster whose nodes really join, with the control plane (package
// controlplane), nodejoin-controller and the local cloud (sandbox/controller) in this
// process, and local instances (sandbox/launcher, sandbox/instance) whose kubelets —
// real or simulated — join it the way EKS nodes do. It orders the steps and follows the
// joins; the parts live in its subpackages. print.go renders its results as text
// tables for the CLI, which chooses where and in which format they go.
//
// Calls between its files go one way, each calling only those listed before it (steps.go
// and nodes.go fill in the Sandbox that up.go declares):
//
//	sandbox.go      options and result types
//	progress.go     the progress events (sandbox/progress)
//	print.go        text renderings of the results and of progress events
//	statedir.go     a cluster's state directory: paths, records, teardown
//	clusters.go, diagnose*.go, logs.go, images.go
//	                get, list, delete, diagnose, export logs, images: a cluster by name,
//	                through its state directory
//	control.go      the control socket: AddNodesTo and its server
//	asg.go          the local cloud's Auto Scaling launches, through the launcher
//	nodes.go        AddNodes and the cluster's launcher (sandbox/launcher)
//	steps.go        the ordered steps of Start
//	up.go           Sandbox: Start, Stop
package sandbox

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	nodegroupuserdata "github.com/nodejoin/nodejoin/internal/nodegroup/userdata"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
)

// Options configure a sandbox.
type Options struct {
	// Name is the cluster's name. Default controlplane.DefaultName.
	Name string
	// StateDir holds the cluster's state. Default: StateDir(Name).
	StateDir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
	// kubelet; see toolbin.Dir.
	BinDir string
	// Network is where the control plane listens; see controlplane.Options.
	Network controlplane.Network
	// NodeCIDR is the range for the bridge and instances. Default
	// controlplane.DefaultNodeCIDR.
	NodeCIDR netip.Prefix
	// ServiceCIDR is the cluster's service range; kube-dns takes its .10, which the
	// nodes' user data leads nodeadm to as EKS's does. Default
	// controlplane.DefaultServiceCIDR.
	ServiceCIDR netip.Prefix
	// APIPort is the host's loopback port for the API; 0 picks a free one.
	APIPort int
	// Nodes are the nodes Start launches, and the defaults of AddNodes.
	Nodes NodeOptions
	// NodeGroupKubelet is what plays the kubelets of instances the local cloud's Auto
	// Scaling groups launch: "auto" (the default: real where this machine can run real
	// kubelets, else sim), "real" (an error where it cannot) or "sim".
	NodeGroupKubelet instance.KubeletKind
	// groupKubelet is NodeGroupKubelet resolved, by complete.
	groupKubelet KubeletChoice
	// InstanceLimit caps the local account's running instances for Auto Scaling's
	// launches (0: no cap), to see launch failures and the InstanceLimitExceeded
	// health issue.
	InstanceLimit int
	// DHCPDomainName is the domain-name of the local VPC's DHCP options, as a VPC's DHCP
	// options set has on AWS: instance metadata (local-hostname) names instances
	// ip-A-B-C-D.DHCPDomainName while EC2's PrivateDnsName does not change. "" for the
	// default options.
	DHCPDomainName string
	// CertLifetime is the lifetime of the kubelets' client and serving certificates
	// (nodejoin-controller's --client-cert-max-duration and --duration); 0 keeps the
	// controller's defaults (a day and a year). A few minutes lets a test watch the
	// kubelets renew them; at least controller.MinCertLifetime.
	CertLifetime time.Duration
	// ControlPlaneNode runs a control-plane node too (sandbox/cpnode): a real kubelet
	// in the cluster namespace, once the controller has put the node add-ons in place.
	// Experimental; root and NetworkNamespace only.
	ControlPlaneNode bool
	// ControlPlaneNodes is how many control-plane nodes run with ControlPlaneNode: 1
	// (the default) or controlplane.MaxControlPlaneNodes. With two, the controller's
	// chart runs two replicas, one on each, behind its webhook Service.
	ControlPlaneNodes int
	// Control makes the sandbox answer AddNodesTo from other processes on a Unix
	// socket in its state directory.
	Control bool
	// UnsafeNoFsync makes etcd skip fsync (tests and benchmarks).
	UnsafeNoFsync bool
	// Progress receives the steps as they happen; nil discards them.
	Progress Progress
	// Log receives structured diagnostics; nil discards them.
	Log *slog.Logger
}

// NodeOptions say which nodes to launch.
type NodeOptions struct {
	Count        int                        `json:"count"`
	InstanceType string                     `json:"instanceType,omitempty"`
	AMIFamily    nodejoinv1alpha1.AMIFamily `json:"amiFamily,omitempty"`
	Identity     instance.Identity          `json:"identity,omitempty"`
	Kubelet      instance.KubeletKind       `json:"kubelet,omitempty"`
	Timeout      time.Duration              `json:"timeout,omitempty"`
	// KubeletFlags are extra kubelet flags, through a local NodeConfig.
	KubeletFlags []string `json:"kubeletFlags,omitempty"`
	// CredentialsOf is another node (name or instance ID) whose role credentials the
	// new instances' metadata endpoints serve (a stolen-credentials test).
	CredentialsOf string `json:"credentialsOf,omitempty"`
	// ClaimAddress is another node (name or address) whose address the kubelets
	// claim (a foreign-address test).
	ClaimAddress string `json:"claimAddress,omitempty"`
	// UserData, when set, is the instances' user data (AddNodes only): template text
	// whose launcher.UserDataFields are filled in with the cluster's values, or gzip
	// data passed on untouched. UserDataSource names it in errors.
	UserData       []byte `json:"userData,omitempty"`
	UserDataSource string `json:"userDataSource,omitempty"`
}

// OptionError is an invalid option: its name (as the CLI's flag, without dashes),
// the value given, and what is wanted.
type OptionError struct {
	Option string `json:"option"`
	Value  string `json:"value"`
	Want   string `json:"want"`
}

func (e *OptionError) Error() string { return fmt.Sprintf("%s %q: %s", e.Option, e.Value, e.Want) }

// Default node options.
const (
	DefaultInstanceType = "m5.large"
	DefaultAMIFamily    = nodejoinv1alpha1.AMIFamilyAmazonLinux2023
	DefaultIdentity     = instance.IdentityAWSIAM
)

// withDefaults fills what o leaves out from d.
func (o NodeOptions) withDefaults(d NodeOptions) NodeOptions {
	if o.Identity == "" {
		o.Identity = d.Identity
	}
	if o.Kubelet == "" {
		o.Kubelet = d.Kubelet
	}
	if o.InstanceType == "" {
		o.InstanceType = d.InstanceType
	}
	if o.AMIFamily == "" {
		o.AMIFamily = d.AMIFamily
	}
	return o
}

// Validate checks o and sets its defaults; AMIFamily becomes the family's canonical name.
func (o *NodeOptions) Validate() error {
	*o = o.withDefaults(NodeOptions{InstanceType: DefaultInstanceType, AMIFamily: DefaultAMIFamily, Identity: DefaultIdentity})
	if o.Count < 0 {
		return &OptionError{"nodes", fmt.Sprint(o.Count), "want 0 or more"}
	}
	family, err := nodejoinv1alpha1.ParseAMIFamily(string(o.AMIFamily))
	if err != nil || !slices.Contains(nodegroupuserdata.InstanceFamilies, family) {
		names := make([]string, len(nodegroupuserdata.InstanceFamilies))
		for i, f := range nodegroupuserdata.InstanceFamilies {
			names[i] = string(f)
		}
		return &OptionError{"ami-family", string(o.AMIFamily), "want one of " + strings.Join(names, ", ")}
	}
	o.AMIFamily = family
	if o.Identity != instance.IdentityAWSIAM && o.Identity != instance.IdentityBootstrapToken {
		return &OptionError{"identity", string(o.Identity), "want aws-iam or bootstrap-token"}
	}
	if o.Kubelet != "" && o.Kubelet != instance.KubeletReal && o.Kubelet != instance.KubeletSim {
		return &OptionError{"kubelet", string(o.Kubelet), "want real or sim"}
	}
	if o.Timeout == 0 {
		o.Timeout = 5*time.Minute + time.Duration(o.Count)*2*time.Second
	}
	return nil
}

// Node is a node the sandbox launched and how long it took to become Ready.
type Node = launcher.Node

// Cluster describes a cluster.
type Cluster struct {
	Name       string `json:"name"`
	Running    bool   `json:"running"`
	PID        int    `json:"pid,omitempty"`
	Network    string `json:"network,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	StateDir   string `json:"stateDir"`
	LogDir     string `json:"logDir"`
	// Nodes are the nodes launched with up or add node, as they became Ready.
	Nodes []Node `json:"nodes"`
	// AWS is how to reach the cluster's local AWS from the host (one endpoint for every
	// service); nil before its controller started.
	AWS *AWSAccess `json:"aws,omitempty"`
	// NodeGroupKubelet is what plays the kubelets of node groups' instances and why;
	// nil for a cluster that recorded none.
	NodeGroupKubelet *KubeletChoice `json:"nodeGroupKubelet,omitempty"`
}

// AWSAccess is how to reach a cluster's local AWS from the host.
type AWSAccess = controller.AWSAccess

func (o *Options) complete() error {
	if o.Name == "" {
		o.Name = controlplane.DefaultName
	}
	if o.StateDir == "" {
		dir, err := StateDir(o.Name)
		if err != nil {
			return err
		}
		o.StateDir = dir
	}
	if !o.NodeCIDR.IsValid() {
		o.NodeCIDR = controlplane.DefaultNodeCIDR
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = controlplane.DefaultServiceCIDR
	}
	if sc := o.ServiceCIDR; !sc.Addr().Is4() || sc.Bits() < 12 || sc.Bits() > 28 || sc.Masked() != sc || sc.Overlaps(o.NodeCIDR) {
		return &OptionError{"service-cidr", sc.String(), "want an IPv4 network address between /12 and /28, outside the node range " + o.NodeCIDR.String() + ", such as 10.100.0.0/16 or 172.20.0.0/16"}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.InstanceLimit < 0 {
		return &OptionError{"instance-limit", fmt.Sprint(o.InstanceLimit), "want 0 (no limit) or more"}
	}
	if err := o.resolveGroupKubelet(); err != nil {
		return err
	}
	if err := o.completeControlPlaneNodes(); err != nil {
		return err
	}
	if o.CertLifetime != 0 && o.CertLifetime < controller.MinCertLifetime {
		return &OptionError{"cert-lifetime", o.CertLifetime.String(), "want 0 (the controller's defaults) or at least " + controller.MinCertLifetime.String() + ": a kubelet renews at 70-90% of its certificate's life"}
	}
	if d := o.DHCPDomainName; d != "" && localaws.ValidateDHCPDomainName(d) != nil {
		return &OptionError{"dhcp-domain", d, "want one DNS domain such as corp.example (lower-case letters, digits, '-' and '.', no trailing dot, at most 253 characters)"}
	}
	return o.Nodes.Validate()
}

// completeControlPlaneNodes defaults ControlPlaneNodes to one with ControlPlaneNode and
// refuses more than the local VPC has addresses for.
func (o *Options) completeControlPlaneNodes() error {
	if o.ControlPlaneNodes > 0 {
		o.ControlPlaneNode = true
	}
	if o.ControlPlaneNode && o.ControlPlaneNodes == 0 {
		o.ControlPlaneNodes = 1
	}
	if o.ControlPlaneNodes < 0 || o.ControlPlaneNodes > controlplane.MaxControlPlaneNodes {
		return &OptionError{"control-plane-nodes", strconv.Itoa(o.ControlPlaneNodes), "want 1 or " + strconv.Itoa(controlplane.MaxControlPlaneNodes) + ": the local VPC has addresses for that many (the bridge's and a reserved one)"}
	}
	return nil
}

// Check validates opts and checks that no cluster of that name exists, without
// starting anything.
func Check(opts Options) error {
	if err := opts.complete(); err != nil {
		return err
	}
	return controlplane.EnsureNoCluster(opts.StateDir)
}
