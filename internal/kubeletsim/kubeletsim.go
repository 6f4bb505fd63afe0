// Package kubeletsim is a simulated kubelet: it speaks the kubelet's protocol with the
// API server — TLS bootstrapping or an exec credential plugin, Node registration, the
// node Lease, node status heartbeats, serving-certificate CSRs with rotation, and the
// pod lifecycle of the pods bound to it — without running containers, so that hundreds
// of nodes can join one control plane on a small machine.
//
// Each simulated node is shared-nothing: its own clients, credentials and watches, as
// separate kubelets would have. Containers are never started: a pod bound to the node
// is reported Running and Ready at once, and a pod being deleted is confirmed deleted
// at once.
//
// certs.go holds the credentials and certificate rotation, node.go registration and
// leases, pods.go the pods. Of nodejoin it imports only internal/addons.
package kubeletsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults.
const (
	DefaultVersion        = "v1.37.1"
	DefaultLeaseDuration  = 40 * time.Second
	DefaultStatusInterval = time.Minute
	DefaultQPS            = 5
	DefaultBurst          = 10
	// containerRuntimeVersion is what the node reports as its runtime.
	containerRuntimeVersion = "containerd://1.6.20-sim"
	// statusCheckInterval is how often the kubelet computes its node status
	// (nodeStatusUpdateFrequency); it posts it when it changed or when StatusInterval
	// has passed since the last post.
	statusCheckInterval = 10 * time.Second
)

// Config describes one simulated node and how it reaches the API server.
type Config struct {
	// NodeName is the Node's name, as the kubelet's --hostname-override sets it. Required.
	NodeName string
	// InternalIP is the instance's private IPv4 address. Required: the kubelet asks for
	// no serving certificate without an IP address.
	InternalIP string
	// InternalDNS is the instance's private DNS name; default NodeName. It is reported
	// as the node's Hostname and InternalDNS addresses and is its hostname label.
	InternalDNS string
	// ProviderID is the Node's spec.providerID, such as aws:///us-west-2a/i-0123....
	ProviderID string
	// Labels are added to the kubelet's own labels (hostname, os, arch, and instance
	// type, zone and region when given). NodeRestriction refuses labels a kubelet may
	// not set; registration then fails and is retried.
	Labels map[string]string
	// InstanceType, Zone and Region become the well-known node labels when set.
	InstanceType, Zone, Region string
	// RegisterWithTaints are the Node's taints at registration, as the kubelet's
	// --register-with-taints; ExternalCloudProvider adds the uninitialized taint a
	// kubelet with --cloud-provider=external registers with, for a controller to remove
	// once it has checked the Node against its instance.
	RegisterWithTaints    []corev1.Taint
	ExternalCloudProvider bool
	// Capacity defaults to cpu 2, memory 8Gi, pods 110, ephemeral-storage 20Gi.
	// Allocatable defaults to Capacity less the kubelet's default hard eviction
	// thresholds (memory 100Mi, 10% of ephemeral storage).
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	// PodCIDR is the range pod IPs are taken from; default a /24 derived from
	// InternalIP (see DefaultPodCIDR).
	PodCIDR netip.Prefix
	// Version is the kubelet version the node reports; default v1.37.1.
	Version string

	// Server is the API server's URL; CAData the cluster CA (PEM) that verifies it.
	Server string
	CAData []byte
	// Exactly one of Exec and BootstrapToken. Exec is the credential plugin of the
	// kubelet's kubeconfig (nodeadm get-token). BootstrapToken ("<id>.<secret>") makes
	// the node bootstrap a client certificate through a
	// kubernetes.io/kube-apiserver-client-kubelet CSR and rotate it.
	Exec           *clientcmdapi.ExecConfig
	BootstrapToken string
	// Token, instead of Exec, gives the node's bearer token in this process (a
	// benchmark of a thousand nodes would otherwise run a thousand credential
	// plugins): it returns the token and when to ask for a new one.
	Token func(ctx context.Context) (token string, refreshAt time.Time, err error)
	// ClientCertificate, with BootstrapToken, is a client certificate kept from an
	// earlier run of this node, as the kubelet keeps kubelet-client-current.pem: while
	// it is valid it is used instead of bootstrapping again (a registered node's
	// bootstrap CSR is denied). Kubelet.ClientCertificate returns the current one.
	ClientCertificate *tls.Certificate

	// LeaseDuration is the node Lease's duration; it is renewed every quarter of it.
	// Default 40s.
	LeaseDuration time.Duration
	// StatusInterval is how often node status is posted when nothing changed (the
	// kubelet's nodeStatusReportFrequency). Default 1 minute.
	StatusInterval time.Duration
	// QPS and Burst limit the node's API requests; default 5 and 10.
	QPS   float32
	Burst int
	// Log receives the node's diagnostics; nil discards them.
	Log *slog.Logger

	// rotationDeadline, when set, replaces the kubelet's rotation deadline (a random
	// point between 70% and 90% of a certificate's lifetime). Tests only.
	rotationDeadline func(cert *x509.Certificate) time.Time
}

// bootstrapTokenRE is the bootstrap token format kube-apiserver accepts.
var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// complete validates cfg and fills in defaults.
func (cfg *Config) complete() error {
	if err := cfg.validate(); err != nil {
		return err
	}
	cfg.setDefaults()
	if cfg.LeaseDuration < time.Second || cfg.LeaseDuration > time.Hour {
		return fmt.Errorf("kubeletsim: node %s: lease duration %s: want between 1s and 1h", cfg.NodeName, cfg.LeaseDuration)
	}
	return nil
}

func (cfg *Config) validate() error {
	if cfg.NodeName == "" {
		return errors.New("kubeletsim: no node name")
	}
	ip, err := netip.ParseAddr(cfg.InternalIP)
	if err != nil || !ip.Is4() {
		return fmt.Errorf("kubeletsim: node %s: internal IP %q is not an IPv4 address", cfg.NodeName, cfg.InternalIP)
	}
	if cfg.Server == "" || len(cfg.CAData) == 0 {
		return fmt.Errorf("kubeletsim: node %s: the API server's URL and CA are required", cfg.NodeName)
	}
	switch {
	case countSet(cfg.Exec != nil, cfg.BootstrapToken != "", cfg.Token != nil) != 1:
		return fmt.Errorf("kubeletsim: node %s: give exactly one of an exec credential plugin, a token source and a bootstrap token", cfg.NodeName)
	case cfg.BootstrapToken != "" && !bootstrapTokenRE.MatchString(cfg.BootstrapToken):
		// Never echo the token.
		return fmt.Errorf("kubeletsim: node %s: the bootstrap token is not of the form <6 characters>.<16 characters>", cfg.NodeName)
	}
	return nil
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

func (cfg *Config) setDefaults() {
	if cfg.InternalDNS == "" {
		cfg.InternalDNS = cfg.NodeName
	}
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	if cfg.QPS <= 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Capacity == nil {
		cfg.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("2"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		}
	}
	if cfg.Allocatable == nil {
		cfg.Allocatable = defaultAllocatable(cfg.Capacity)
	}
	if !cfg.PodCIDR.IsValid() {
		cfg.PodCIDR = DefaultPodCIDR(netip.MustParseAddr(cfg.InternalIP))
	}
	if cfg.rotationDeadline == nil {
		cfg.rotationDeadline = jitteredDeadline
	}
}

// defaultAllocatable subtracts the kubelet's default hard eviction thresholds.
func defaultAllocatable(capacity corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	if m, ok := out[corev1.ResourceMemory]; ok {
		m.Sub(resource.MustParse("100Mi"))
		out[corev1.ResourceMemory] = m
	}
	if s, ok := out[corev1.ResourceEphemeralStorage]; ok {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(s.Value()/10*9, resource.BinarySI)
	}
	return out
}

// DefaultPodCIDR is the /24 a node takes pod IPs from when Config.PodCIDR is not
// set: 10.(128 + third octet mod 128).(fourth octet).0/24 of its IPv4 address — in
// 10.128.0.0/9, away from the nodes' own ranges, and distinct for nodes whose
// addresses differ only in their last 15 bits.
func DefaultPodCIDR(nodeIP netip.Addr) netip.Prefix {
	a := nodeIP.As4()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 128 | a[2]&0x7f, a[3], 0}), 24)
}

// Phase is where a node is in its life.
type Phase string

// The phases in order.
const (
	PhaseStarting      Phase = "Starting"
	PhaseBootstrapping Phase = "Bootstrapping" // waiting for the first client certificate
	PhaseRegistering   Phase = "Registering"
	PhaseRunning       Phase = "Running"
	PhaseStopped       Phase = "Stopped"
	PhaseFailed        Phase = "Failed"
)

// CSRState is the state of a node's latest CSR of one signer.
type CSRState string

// CSR states.
const (
	CSRPending  CSRState = "Pending"
	CSRApproved CSRState = "Approved"
	CSRIssued   CSRState = "Issued"
	CSRDenied   CSRState = "Denied"
	CSRFailed   CSRState = "Failed"
)

// Certificate is what a node knows of one of its certificates.
type Certificate struct {
	// CSR is the name of the latest CSR; State its state; Reason and Message the
	// Denied or Failed condition's.
	CSR             string
	State           CSRState
	Reason, Message string
	// NotAfter is the current certificate's expiry (zero before the first one).
	NotAfter time.Time
	// Issued counts certificates received: 1 after the first, more after rotations.
	Issued int
}

// Status is what a node has done so far.
type Status struct {
	Node  string
	Phase Phase
	// Authenticated: the API server accepted the node's credentials (a request made
	// with them succeeded).
	Authenticated bool
	// Registered: the Node object exists (created or taken over).
	Registered bool
	// Ready: the node posted a Ready condition that is True.
	Ready bool
	// ClientCertificate is the TLS-bootstrapped client certificate (bootstrap tokens only).
	ClientCertificate Certificate
	// ServingCertificate is the kubelet-serving certificate.
	ServingCertificate Certificate
	// LeaseRenewals counts successful Lease writes; LastLeaseRenewal is the latest.
	LeaseRenewals    int
	LastLeaseRenewal time.Time
	// PodsStarted and PodsDeleted count pod lifecycle operations.
	PodsStarted, PodsDeleted int
	// LastError is the latest failure (retried unless Phase is Failed), with its time.
	LastError     string
	LastErrorTime time.Time
}

// Kubelet is one running simulated node.
type Kubelet struct {
	cfg    Config
	bootID string
	log    *slog.Logger
	done   chan struct{}
	err    error

	mu     sync.Mutex
	status Status
	rest   *rest.Config // the node's own credentials, once it has them

	client *kubernetes.Clientset
	creds  *credentials
}

// Run runs a node until ctx ends; it returns an error only when the node cannot go on
// (invalid configuration, or its bootstrap client certificate was denied).
func Run(ctx context.Context, cfg Config) error {
	k, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	return k.Wait()
}

// Start validates cfg and starts the node in the background; it runs until ctx ends.
func Start(ctx context.Context, cfg Config) (*Kubelet, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	bootID, err := newBootID()
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		cfg:    cfg,
		bootID: bootID,
		log:    cfg.Log.With("node", cfg.NodeName),
		done:   make(chan struct{}),
		status: Status{Node: cfg.NodeName, Phase: PhaseStarting},
	}
	go func() {
		defer close(k.done)
		k.err = k.run(ctx)
		k.update(func(s *Status) {
			if k.err != nil {
				s.Phase = PhaseFailed
				s.LastError, s.LastErrorTime = k.err.Error(), time.Now()
			} else {
				s.Phase = PhaseStopped
			}
		})
	}()
	return k, nil
}

// Wait returns when the node has stopped, with the error that stopped it, if any.
func (k *Kubelet) Wait() error {
	<-k.done
	return k.err
}

// Done is closed when the node has stopped.
func (k *Kubelet) Done() <-chan struct{} { return k.done }

// Status returns what the node has done so far.
func (k *Kubelet) Status() Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.status
}

// Name returns the node's name.
func (k *Kubelet) Name() string { return k.cfg.NodeName }

// RESTConfig returns a copy of the configuration the node talks to the API server
// with, under its own identity (its client certificate, rotated as the node rotates
// it, or its credential plugin); nil before it has credentials.
func (k *Kubelet) RESTConfig() *rest.Config {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.rest == nil {
		return nil
	}
	return rest.CopyConfig(k.rest)
}

func (k *Kubelet) update(fn func(*Status)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	fn(&k.status)
}

// fail records a failure that will be retried.
func (k *Kubelet) fail(msg string, err error, args ...any) {
	k.log.Warn(msg, append(args, "err", err.Error())...)
	k.update(func(s *Status) { s.LastError, s.LastErrorTime = msg+": "+err.Error(), time.Now() })
}

func (k *Kubelet) run(ctx context.Context) error {
	creds, err := k.credentials(ctx)
	if err != nil {
		return unlessStopped(ctx, err)
	}
	k.mu.Lock()
	k.creds = creds
	k.mu.Unlock()
	client, err := kubernetes.NewForConfig(creds.rest)
	if err != nil {
		return fmt.Errorf("node %s: %w", k.cfg.NodeName, err)
	}
	k.client = client
	k.mu.Lock()
	k.rest = creds.rest
	k.mu.Unlock()

	k.update(func(s *Status) { s.Phase = PhaseRegistering })
	node, err := k.register(ctx)
	if err != nil {
		return unlessStopped(ctx, err)
	}
	k.update(func(s *Status) { s.Phase = PhaseRunning })

	var wg sync.WaitGroup
	for _, part := range []func(context.Context){
		func(ctx context.Context) { k.runLease(ctx, node) },
		k.runStatus,
		k.runPods,
		k.runServingCertificate,
		k.runClientRotation,
	} {
		wg.Add(1)
		go func() { defer wg.Done(); part(ctx) }()
	}
	wg.Wait()
	return nil
}

// unlessStopped returns err unless ctx has ended: stopping is not a failure.
func unlessStopped(ctx context.Context, err error) error {
	select {
	case <-ctx.Done():
		return nil
	default:
		return err
	}
}

// sleep waits for d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
