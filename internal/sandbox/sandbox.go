// Package sandbox runs a local cluster whose nodes really join: a control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler), nodejoin-controller and the local cloud in this process, and
// local instances whose kubelets — real or simulated — join it the way EKS nodes do.
//
// Start creates a cluster by running an ordered list of small steps (steps.go) and
// returns a Sandbox that runs until Stop. AddNodes launches more instances into it.
// Functions that take a cluster's name (Get, List, Nodes, Diagnose, ExportLogs, Delete,
// AddNodesTo) work on a cluster run by another process, through its state directory
// and control socket. Results are structs with JSON tags; progress goes to a Progress
// callback. Nothing here prints: the CLI (internal/cmd/nodejoin) does.
//
// The in-process nodejoin-controller and local cloud are wired in package
// sandbox/controller, which tests use too. This package is over 600 lines because it
// holds one product, the local sandbox, whose parts (steps, nodes, control socket,
// diagnosis, logs) share its state and types; each part has a file of its own.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/localaws"
	nodegroupuserdata "github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
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
	// APIPort is the host's loopback port for the API; 0 picks a free one.
	APIPort int
	// Nodes are the nodes Start launches, and the defaults of AddNodes.
	Nodes NodeOptions
	// NodeGroupKubelet is what plays the kubelets of instances the local cloud's Auto
	// Scaling groups launch: "sim" (the default) or "real".
	NodeGroupKubelet string
	// InstanceLimit caps the local account's running instances for Auto Scaling's
	// launches (0: no cap), to see launch failures and the InstanceLimitExceeded
	// health issue.
	InstanceLimit int
	// DHCPDomainName is the domain-name of the local VPC's DHCP options, as a VPC's DHCP
	// options set has on AWS: instance metadata (local-hostname) names instances
	// ip-A-B-C-D.DHCPDomainName while EC2's PrivateDnsName does not change. "" for the
	// default options.
	DHCPDomainName string
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
	Count        int           `json:"count"`
	InstanceType string        `json:"instanceType,omitempty"`
	AMIFamily    string        `json:"amiFamily,omitempty"`
	Identity     string        `json:"identity,omitempty"`
	Kubelet      string        `json:"kubelet,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"`
	// KubeletFlags are extra kubelet flags, through a local NodeConfig.
	KubeletFlags []string `json:"kubeletFlags,omitempty"`
	// CredentialsOf is another node (name or instance ID) whose role credentials the
	// new instances' metadata endpoints serve (a stolen-credentials test).
	CredentialsOf string `json:"credentialsOf,omitempty"`
	// ClaimAddress is another node (name or address) whose address the kubelets
	// claim (a foreign-address test).
	ClaimAddress string `json:"claimAddress,omitempty"`
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
	DefaultAMIFamily    = string(nodejoinv1alpha1.AMIFamilyAmazonLinux2023)
	DefaultIdentity     = string(instance.IdentityAWSIAM)
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

// Validate checks o and sets its defaults.
func (o *NodeOptions) Validate() error {
	*o = o.withDefaults(NodeOptions{InstanceType: DefaultInstanceType, AMIFamily: DefaultAMIFamily, Identity: DefaultIdentity})
	if o.Count < 0 {
		return &OptionError{"nodes", fmt.Sprint(o.Count), "want 0 or more"}
	}
	f, err := nodejoinv1alpha1.ParseAMIFamily(o.AMIFamily)
	if err != nil || !slices.Contains(nodegroupuserdata.InstanceFamilies, f) {
		return &OptionError{"ami-family", o.AMIFamily, "want one of AmazonLinux2023, AmazonLinux2, Bottlerocket"}
	}
	o.AMIFamily = string(f)
	if o.Identity != string(instance.IdentityAWSIAM) && o.Identity != string(instance.IdentityBootstrapToken) {
		return &OptionError{"identity", o.Identity, "want aws-iam or bootstrap-token"}
	}
	if o.Kubelet != "" && o.Kubelet != "real" && o.Kubelet != "sim" {
		return &OptionError{"kubelet", o.Kubelet, "want real or sim"}
	}
	if o.Timeout == 0 {
		o.Timeout = 5*time.Minute + time.Duration(o.Count)*2*time.Second
	}
	return nil
}

// Node is a node the sandbox launched and how long it took to become Ready.
type Node struct {
	Name         string  `json:"name"`
	InstanceID   string  `json:"instanceID"`
	IP           string  `json:"ip"`
	Kubelet      string  `json:"kubelet"`
	ReadySeconds float64 `json:"readySeconds"`
}

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
}

// Sandbox is a cluster this process runs.
type Sandbox struct {
	opts Options
	log  *slog.Logger

	cluster    *controlplane.Cluster
	controller *controller.Controller

	mu    sync.Mutex // serializes AddNodes; guards nodes
	wmu   sync.Mutex // guards w
	w     *workers   // nil until nodes are launched
	nodes []Node

	stopOnce sync.Once
	stopErr  error
}

// StateRoot is where clusters keep their state: $XDG_STATE_HOME/nodejoin, by default
// ~/.local/state/nodejoin.
func StateRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "nodejoin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the state directory: set XDG_STATE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".local", "state", "nodejoin"), nil
}

// StateDir is the state directory of the cluster name.
func StateDir(name string) (string, error) {
	root, err := StateRoot()
	if err != nil {
		return "", err
	}
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return "", fmt.Errorf("cluster name %q is not a plain name", name)
	}
	return filepath.Join(root, name), nil
}

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
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.InstanceLimit < 0 {
		return &OptionError{"instance-limit", fmt.Sprint(o.InstanceLimit), "want 0 (no limit) or more"}
	}
	if k := o.NodeGroupKubelet; k != "" && k != "sim" && k != "real" {
		return &OptionError{"nodegroup-kubelet", k, "want real or sim"}
	}
	if d := o.DHCPDomainName; d != "" && localaws.ValidateDHCPDomainName(d) != nil {
		return &OptionError{"dhcp-domain", d, "want one DNS domain such as corp.example (lower-case letters, digits, '-' and '.', no trailing dot, at most 253 characters)"}
	}
	return o.Nodes.Validate()
}

// Check validates opts and checks that no cluster of that name exists, without
// starting anything.
func Check(opts Options) error {
	if err := opts.complete(); err != nil {
		return err
	}
	return controlplane.EnsureNoCluster(opts.StateDir)
}

// Start creates the cluster: it runs the creation steps in order and returns once every
// node is Ready. On failure it stops what it started and removes the cluster.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	// A cluster of this name is left alone: nothing below may remove it.
	if err := controlplane.EnsureNoCluster(opts.StateDir); err != nil {
		return nil, err
	}
	s := &Sandbox{opts: opts, log: opts.Log}
	st := &state{sandbox: s, progress: newReporter(opts.Progress)}
	for _, step := range creationSteps() {
		if err := step.Run(ctx, st); err != nil {
			err = fmt.Errorf("%s: %w", step.Name(), err)
			if rmErr := s.remove(context.WithoutCancel(ctx)); rmErr != nil {
				err = errors.Join(err, rmErr)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("cluster %s: start interrupted", opts.Name)
			}
			return nil, fmt.Errorf("starting cluster %s: %w", opts.Name, err)
		}
	}
	return s, nil
}

// remove stops what a failed start started and removes the cluster's state.
func (s *Sandbox) remove(ctx context.Context) error {
	return errors.Join(s.Stop(ctx), destroy(ctx, s.opts.StateDir, s.opts.Name))
}

// Info describes the sandbox.
func (s *Sandbox) Info() Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cluster
	return Cluster{
		Name: c.Name(), Running: true, PID: os.Getpid(), Network: string(c.Options().Network),
		Endpoint: c.Endpoint(), Kubeconfig: c.KubeconfigPath(), StateDir: c.StateDir(),
		LogDir: filepath.Join(c.StateDir(), "logs"), Nodes: append([]Node{}, s.nodes...),
	}
}

// Failed is closed when the control plane or the controller stopped on its own; Err
// then says why.
func (s *Sandbox) Failed() <-chan struct{} { return s.controller.Failed() }

// Err is why the sandbox failed, once Failed is closed.
func (s *Sandbox) Err() error { return s.controller.Err() }

// AddNodes launches more instances, with Start's node options for what o leaves out,
// and waits until they are Ready.
func (s *Sandbox) AddNodes(ctx context.Context, o NodeOptions, progress Progress) ([]Node, error) {
	o = o.withDefaults(s.opts.Nodes)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := newReporter(progress)
	w, err := s.ensureWorkers(ctx, rep)
	if err != nil {
		return nil, err
	}
	if o.Identity != string(w.identity) {
		return nil, &OptionError{"identity", o.Identity, fmt.Sprintf("this cluster's nodes use %s (set by `nodejoin up --identity`)", w.identity)}
	}
	if o.Kubelet != "" && o.Kubelet != string(w.kubelet) {
		return nil, &OptionError{"kubelet", o.Kubelet, fmt.Sprintf("this cluster runs %s kubelets", w.kubelet)}
	}
	nodes, err := w.run(ctx, o, rep)
	if err != nil {
		return nil, err
	}
	s.nodes = append(s.nodes, nodes...)
	return nodes, writeNodes(s.opts.StateDir, s.nodes)
}

// Stop stops the nodes, then the controller, then the control plane. It leaves the
// state directory (and its logs); Delete removes it.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		w := s.currentWorkers()
		var errs []error
		if w != nil {
			if err := w.stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the nodes: %w", err))
			}
		}
		if s.controller != nil {
			if err := s.controller.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping nodejoin-controller and the local cloud: %w", err))
			}
		}
		if s.cluster != nil {
			if err := s.cluster.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// destroy stops the cluster in dir and removes everything it made: first its owner
// process (which stops its instances and daemons in order), then whatever a crashed
// owner left — instance processes, mounts, cgroups, namespaces — then the control
// plane's leftovers and the state directory.
func destroy(ctx context.Context, dir, name string) error {
	if s, err := controlplane.ReadState(dir); err == nil && s.Running() && s.Owner.PID != os.Getpid() {
		process.Terminate(s.Owner, 90*time.Second)
	}
	if err := instance.Cleanup(ctx, filepath.Join(dir, "instances"), name); err != nil {
		return err
	}
	return controlplane.Destroy(ctx, dir)
}
