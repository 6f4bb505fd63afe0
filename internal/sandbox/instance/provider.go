// Package instance is the local instance provider: it launches what an EC2 instance is on
// AWS, built from local parts. A local instance has its own network namespace, joined
// by a veth pair to the bridge in the cluster's namespace; its own root directory; its
// own instance metadata endpoint (IMDSv2 at 169.254.169.254 inside its namespace),
// serving its user data and instance-role credentials from the local STS; and an entry in
// the local EC2 inventory. Then nodeadm init configures the node inside it and starts
// its own containerd and the real kubelet.
//
// A simulated instance (for scale) has the same EC2 entry, metadata and credentials, but
// no namespace: its IMDS listens on the host's loopback and a kubeletsim.Kubelet plays
// its kubelet.
//
// It owns every part of an instance (namespace, IMDS, root, cgroups, mounts, processes,
// host sysctls), so that creation and teardown mirror each other. It imports the local
// cloud (localaws), netns, nodeadm's bootstrap and the user-data decoder; not the
// sandbox that uses it.
package instance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netns"
)

// Identity is how an instance's kubelet proves who it is.
type Identity string

// The identities a local instance can use.
const (
	// IdentityAWSIAM: an aws-iam-authenticator token from the instance role's
	// credentials (`nodeadm get-token`), mapped by a NodeAccessEntry.
	IdentityAWSIAM Identity = "aws-iam"
	// IdentityBootstrapToken: a bootstrap token, then a client certificate issued
	// through the CSR flow (TLS bootstrapping).
	IdentityBootstrapToken Identity = "bootstrap-token"
)

// KubeletKind says what plays an instance's kubelet.
type KubeletKind string

// Kubelet kinds.
const (
	KubeletReal KubeletKind = "real"
	KubeletSim  KubeletKind = "sim"
)

// RecordFile is the file in each instance's directory that records it.
const RecordFile = "instance.json"

// imdsAddr is where EC2 serves instance metadata, inside every instance namespace.
var imdsAddr = netip.MustParseAddrPort("169.254.169.254:80")

// Config describes the cluster the provider launches instances into.
type Config struct {
	// Cluster is what user data tells nodes about the cluster. Endpoint is the API
	// server as instances reach it (the bridge address in the cluster namespace).
	Cluster ClusterInfo
	// HostEndpoint is the API server as the host reaches it (simulated kubelets).
	HostEndpoint string
	// Dir holds one directory per instance: its record and nodeadm's log.
	Dir string
	// RootBase holds the root directories of instances with real kubelets; default
	// /var/lib/nodejoin/CLUSTER. It is kept short because containerd's and the kubelet's
	// Unix sockets live under each root, and a socket path has at most 107 bytes.
	RootBase string
	// ClusterNS is the cluster's network namespace, holding Bridge; zero allows only
	// simulated instances.
	ClusterNS netns.NS
	Bridge    string
	// NodeCIDR is the bridge's range: the bridge holds Gateway, instances get the
	// addresses from the eleventh on.
	NodeCIDR netip.Prefix
	Gateway  netip.Addr
	// Cloud is the local account: instances are entered into its EC2 inventory and get
	// role credentials from its STS.
	Cloud *localaws.Cloud
	// EC2Endpoint is EC2 as instances reach it (inside the cluster namespace): nodeadm
	// asks it for the node's private DNS name (AWS_ENDPOINT_URL_EC2). Empty: nodeadm
	// names the node from instance metadata, with a warning.
	EC2Endpoint string
	// Zone is the availability zone of the instances (default us-west-2a).
	Zone string
	// DNSDomain names instances ip-A-B-C-D.DNSDomain (default local.internal).
	DNSDomain string
	// Binaries: nodeadm, the kubelet and containerd. The CNI plugins come from the
	// network add-on, into each instance's root (CNIBinDir).
	NodeadmPath, KubeletPath, ContainerdPath string
	// ImageArchives returns the image archives that every real instance's containerd
	// gets before its kubelet starts (Instance.ImportImages), in import order.
	ImageArchives func() ([]string, error)
	Log           *slog.Logger
}

// Spec is one instance to launch.
type Spec struct {
	InstanceType string
	AMIFamily    nodejoinv1alpha1.AMIFamily
	Identity     Identity
	// BootstrapToken is the token of IdentityBootstrapToken. A secret.
	BootstrapToken string
	// Role is the instance profile's role name.
	Role    string
	Kubelet KubeletKind

	// KubeletFlags are appended to the kubelet's command line through a local
	// NodeConfig (to try out what the control plane does with them).
	KubeletFlags []string
	// CredentialsOf makes this instance's metadata endpoint hand out the role
	// credentials of another instance, as if they had been stolen from it: for seeing
	// the control plane refuse a node that presents credentials it does not own.
	CredentialsOf string
	// ClaimAddress gives the instance another node's address too, on its loopback
	// (never answered on the bridge), and makes its kubelet report it as its node IP:
	// its serving certificate request then names an address its instance does not own.
	ClaimAddress string

	// What an Auto Scaling launch sets: UserData replaces the user data the provider
	// renders; Zone (default Config.Zone), SubnetID, ImageID and Tags go into EC2;
	// AutoScalingGroup is recorded.
	UserData         []byte
	Zone             string
	SubnetID         string
	ImageID          string
	Tags             map[string]string
	AutoScalingGroup string
}

// Record is what a launched instance's instance.json says, for `nodejoin diagnose`
// and for cleaning up after a crash.
type Record struct {
	ID           string                     `json:"id"`
	NodeName     string                     `json:"nodeName"`
	IP           string                     `json:"ip"`
	InstanceType string                     `json:"instanceType"`
	AMIFamily    nodejoinv1alpha1.AMIFamily `json:"amiFamily"`
	Identity     Identity                   `json:"identity"`
	Role         string                     `json:"role"`
	Kubelet      KubeletKind                `json:"kubelet"`
	// Zone is the instance's availability zone.
	Zone string `json:"zone,omitempty"`
	// AutoScalingGroup is the group that launched the instance, if one did.
	AutoScalingGroup string `json:"autoScalingGroup,omitempty"`
	// Namespace, Root and CgroupRoot are set for real kubelets.
	Namespace  string    `json:"namespace,omitempty"`
	Root       string    `json:"root,omitempty"`
	CgroupRoot string    `json:"cgroupRoot,omitempty"`
	Launched   time.Time `json:"launched"`
	// Dir is the instance's directory (not stored).
	Dir string `json:"-"`

	// PodCIDR is the pod range routed to the node in ClusterNamespace by nodejoin
	// versions before the network add-on; read only to clean up their instances.
	PodCIDR          string `json:"podCIDR,omitempty"`
	ClusterNamespace string `json:"clusterNamespace,omitempty"`
	// Bridge is the cluster namespace's bridge, where the VPC router keeps the
	// instance's addresses (real kubelets).
	Bridge string `json:"bridge,omitempty"`
}

// NodeadmLog is the file where nodeadm init's output goes, relative to the instance's
// directory.
const NodeadmLog = "nodeadm.log"

// Paths of an instance's daemons' logs, under its root.
const (
	KubeletLog    = "var/log/kubelet.log"
	ContainerdLog = "var/log/containerd.log"
)

// Provider launches and terminates local instances. Safe for concurrent use.
type Provider struct {
	cfg Config

	mu        sync.Mutex
	used      map[netip.Addr]bool
	last      netip.Addr // the address allocate gave last
	instances map[string]*Instance
	launches  int
	closed    bool
}

// New returns a provider for the cluster cfg describes.
func New(cfg Config) (*Provider, error) {
	if cfg.Cloud == nil || cfg.Dir == "" || !cfg.NodeCIDR.IsValid() {
		return nil, errors.New("local provider: Cloud, Dir and NodeCIDR are required")
	}
	if cfg.Zone == "" {
		cfg.Zone = "us-west-2a"
	}
	if cfg.DNSDomain == "" {
		cfg.DNSDomain = "local.internal"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.RootBase == "" {
		cfg.RootBase = RootBase(cfg.Cluster.Name)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	// The local VPC's one subnet is the node range: EC2 gives instances' interfaces
	// their further addresses from it.
	if _, ok := cfg.Cloud.EC2.SubnetOf(localaws.DefaultSubnetID); !ok {
		if err := cfg.Cloud.EC2.AddSubnet(localaws.Subnet{ID: localaws.DefaultSubnetID, VPCID: localaws.DefaultVPCID,
			AvailabilityZone: cfg.Zone, CIDR: cfg.NodeCIDR, Tags: map[string]string{"Name": cfg.Cluster.Name}}); err != nil {
			return nil, fmt.Errorf("node range %s as the VPC's subnet: %w", cfg.NodeCIDR, err)
		}
	}
	p := &Provider{cfg: cfg, used: map[netip.Addr]bool{}, instances: map[string]*Instance{}}
	if cfg.ClusterNS.Name != "" {
		cfg.Cloud.EC2.SetNetworkHooks(p, cfg.Log)
	}
	return p, nil
}

// ClusterName is the name of the cluster the instances join.
func (p *Provider) ClusterName() string { return p.cfg.Cluster.Name }

// Region is the instances' region.
func (p *Provider) Region() string {
	return strings.TrimRight(p.cfg.Zone, "abcdefghijklmnopqrstuvwxyz")
}

// nextRoot names the root directory of the next instance with a real kubelet.
func (p *Provider) nextRoot() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.launches++
	return filepath.Join(p.cfg.RootBase, "n"+strconv.Itoa(p.launches))
}

// RoleARN is the ARN of an instance role of the local account.
func (p *Provider) RoleARN(role string) string {
	return "arn:aws:iam::" + p.cfg.Cloud.AccountID + ":role/" + role
}

// allocate picks a free address from the eleventh of the node range on, as EC2 keeps a
// subnet's first addresses for itself, skipping those EC2 gave out to interfaces. It goes
// round the range from the address after the last it gave, as EC2 does within a subnet:
// an address freed by a terminated instance is not given again at once, while the Node
// named after it (ip-A-B-C-D) may still exist. Reused at once, the next instance's
// kubelet would register as that old Node, which its instance no longer backs.
func (p *Provider) allocate() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.cfg.NodeCIDR.Masked().Addr()
	for range 11 {
		first = first.Next()
	}
	// inRange leaves out the broadcast address.
	inRange := func(a netip.Addr) bool { return p.cfg.NodeCIDR.Contains(a) && p.cfg.NodeCIDR.Contains(a.Next()) }
	if !inRange(first) {
		return netip.Addr{}, fmt.Errorf("node range %s is too small for an instance: give a larger one with --node-cidr", p.cfg.NodeCIDR)
	}
	start := first
	if p.last.IsValid() && inRange(p.last.Next()) {
		start = p.last.Next()
	}
	for a := start; ; {
		if a != p.cfg.Gateway && !p.used[a] && !p.cfg.Cloud.EC2.AddressInUse(a) {
			p.used[a], p.last = true, a
			return a, nil
		}
		if a = a.Next(); !inRange(a) {
			a = first
		}
		if a == start {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("node range %s has no free address left for another instance: give a larger one with --node-cidr", p.cfg.NodeCIDR)
}

func (p *Provider) release(a netip.Addr) {
	p.mu.Lock()
	delete(p.used, a)
	p.mu.Unlock()
}

func newInstanceID() (string, error) {
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "i-" + hex.EncodeToString(b)[:17], nil
}

// dnsName is the instance's private DNS name, such as ip-198-18-0-11.local.internal.
func (p *Provider) dnsName(a netip.Addr) string {
	return "ip-" + strings.ReplaceAll(a.String(), ".", "-") + "." + p.cfg.DNSDomain
}

// Instances returns the running instances, by launch order.
func (p *Provider) Instances() []*Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Instance, 0, len(p.instances))
	for _, i := range p.instances {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Launched.Before(out[b].Launched) })
	return out
}

func writeRecord(r *Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(r.Dir, RecordFile), append(data, '\n'), 0o600)
}

// ReadRecords reads the records of the instances under dir (a cluster's instances
// directory), in launch order. A missing dir holds none.
func ReadRecords(dir string) ([]*Record, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(filepath.Join(d, RecordFile))
		if err != nil {
			continue // launch failed before the record was written
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", filepath.Join(d, RecordFile), err)
		}
		r.Dir = d
		out = append(out, &r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Launched.Before(out[b].Launched) })
	return out, nil
}

// Close terminates every instance.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, inst := range p.Instances() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Terminate(ctx, inst); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := restoreHostState(filepath.Dir(p.cfg.Dir)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
