package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Identities of the simulated nodes.
const (
	IdentityBootstrapToken = "bootstrap-token"
	IdentityAWSIAM         = "aws-iam"
)

// Baselines. BaselineKCM: kube-controller-manager approves and signs the client
// certificates instead of nodejoin (serving certificates stay nodejoin's).
// BaselineFloor (floor.go): an approver that checks nothing. BaselinePeer, the stack a
// self-managed cluster runs, cannot be built here (peerUnavailable).
const (
	BaselineKCM  = "kcm"
	BaselinePeer = "peer"
)

// peerModule is the module the peer baseline's serving-CSR approver is built from.
const peerModule = "github.com/postfinance/kubelet-csr-approver"

// peerUnavailable is why --baseline peer is refused: its approver cannot be built on
// this machine, and a benchmark of a stand-in would not be the peer's figure.
var peerUnavailable = fmt.Sprintf("--baseline peer: kube-controller-manager with postfinance/kubelet-csr-approver needs the module %s, "+
	"which `make tools` builds from the Go module proxy, and the proxy here refuses it (403 Forbidden, \"This module version is not available\", "+
	"for @latest and every version tried: v1.2.10, v1.2.3, v1.1.0); no copy of its code is vendored. "+
	"Use --baseline kcm,floor (kube-controller-manager's client-certificate approver, and an approver that checks nothing)", peerModule)

// Faults.
const (
	FaultAPIServerRestart = "apiserver-restart"
	FaultLeaderKill       = "leader-kill"
)

const (
	region    = "us-west-2"
	accountID = "000000000000"
	nodeRole  = "bench-node"
	nodeGroup = "workers"
)

// Options configure a benchmark.
type Options struct {
	// Nodes is how many simulated kubelets start at once. Sizes, when it holds more
	// than one, runs the whole comparison at each size in turn (Nodes is set to each)
	// and reports the growth; one size is the same as Nodes.
	Nodes int
	Sizes []int
	// Identity is the nodes' identity: IdentityBootstrapToken (default) or IdentityAWSIAM.
	Identity string
	// Baseline is a comma list of baselines (BaselineKCM, BaselineFloor), each run
	// after ours on a fresh cluster with the same burst.
	Baseline  string
	baselines []string
	// Fault, when set, runs the burst a second time with the fault injected once half
	// the nodes have joined, and reports the extra time.
	Fault string
	// Duration, when set, runs a soak instead of a burst (see Soak).
	Duration time.Duration
	// CertificateLifetime, when set, is the lifetime of the certificates the controller
	// issues, at least 10 minutes (the soak's default is 10 minutes, so that nodes rotate).
	CertificateLifetime time.Duration
	// ProfileDir, when set, receives the controller's CPU profile (the whole run) and
	// heap profile (at the end of the burst), and CPU profiles of the burst taken from
	// kube-apiserver and from this process, which runs the simulated kubelets.
	ProfileDir string
	// CSRWorkers is the controller's --csr-workers; 0 leaves its default.
	CSRWorkers int
	// ControllerArgs are added to nodejoin-controller's command line (--kube-api-qps=500),
	// to measure what a setting changes.
	ControllerArgs []string
	// StateDir holds the runs' clusters and logs; default a temporary directory,
	// removed afterwards unless KeepState.
	StateDir  string
	KeepState bool
	// BinDir holds kube-apiserver, etcd, kube-controller-manager, kube-scheduler and
	// nodejoin-controller; see toolbin.Dir.
	BinDir string
	// ControllerBin is nodejoin-controller; default found in BinDir. ControllerEnv is
	// added to its environment (tests run their own binary as the controller).
	ControllerBin string
	ControllerEnv []string
	// FloorCommand runs the floor approver (FloorApproverArgs) when its flags are
	// added; default this executable's `bench floor-approver`. FloorEnv is added to
	// its environment.
	FloorCommand []string
	FloorEnv     []string
	// Timeout bounds each burst; default 10 minutes.
	Timeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

//nolint:gocyclo // a flat sequence of defaults and independent option checks.
func (o *Options) complete() error {
	if o.Identity == "" {
		o.Identity = IdentityBootstrapToken
	}
	if o.CSRWorkers < 0 {
		return fmt.Errorf("--csr-workers %d: want at least 1 (or 0 for the controller's default)", o.CSRWorkers)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.BinDir == "" {
		o.BinDir = toolbin.Dir()
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int{o.Nodes}
	}
	for _, n := range o.Sizes {
		if n < 1 || n > 60000 {
			return fmt.Errorf("--nodes %d: want between 1 and 60000", n)
		}
	}
	o.Nodes = o.Sizes[0]
	var err error
	if o.baselines, err = parseBaselines(o.Baseline); err != nil {
		return err
	}
	switch {
	case o.Identity != IdentityBootstrapToken && o.Identity != IdentityAWSIAM:
		return fmt.Errorf("--identity %q: want %q or %q", o.Identity, IdentityBootstrapToken, IdentityAWSIAM)
	case len(o.baselines) > 0 && o.Identity != IdentityBootstrapToken:
		return fmt.Errorf("--baseline %s compares client certificates too, which only nodes with bootstrap tokens ask for: use --identity %s", o.Baseline, IdentityBootstrapToken)
	case len(o.Sizes) > 1 && (o.Fault != "" || o.Duration > 0):
		return fmt.Errorf("--nodes %s runs a size after another: give it without --fault and --duration", o.sizeList())
	case o.Fault != "" && o.Fault != FaultAPIServerRestart && o.Fault != FaultLeaderKill:
		return fmt.Errorf("--fault %q: want %q or %q", o.Fault, FaultAPIServerRestart, FaultLeaderKill)
	case o.Duration < 0:
		return fmt.Errorf("--duration %s: want a positive duration", o.Duration)
	case o.CertificateLifetime != 0 && o.CertificateLifetime < 10*time.Minute:
		return fmt.Errorf("--cert-lifetime %s: the signer issues nothing shorter than 10m (Kubernetes' minimum expirationSeconds)", o.CertificateLifetime)
	case o.Duration > 0 && (o.Fault != "" || o.Baseline != ""):
		return errors.New("--duration runs a soak: give it without --fault and --baseline")
	}
	if o.ControllerBin == "" {
		bin, err := toolbin.Find(o.BinDir, "nodejoin-controller")
		if err != nil {
			return fmt.Errorf("finding nodejoin-controller (build it with `make build`): %w", err)
		}
		o.ControllerBin = bin
	}
	if len(o.FloorCommand) == 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this executable to run the floor approver: %w", err)
		}
		o.FloorCommand = []string{self, "bench", "floor-approver"}
	}
	return nil
}

// parseBaselines reads --baseline's comma list: each known baseline once.
func parseBaselines(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimSpace(b)
		switch {
		case b == BaselinePeer:
			return nil, errors.New(peerUnavailable)
		case b != BaselineKCM && b != BaselineFloor:
			return nil, fmt.Errorf("--baseline %q: %q is no baseline; want a comma list of %q (kube-controller-manager) and %q (an approver that checks nothing)", list, b, BaselineKCM, BaselineFloor)
		case slices.Contains(out, b):
			return nil, fmt.Errorf("--baseline %q: %q is named twice", list, b)
		}
		out = append(out, b)
	}
	return out, nil
}

func (o *Options) sizeList() string {
	s := make([]string, len(o.Sizes))
	for i, n := range o.Sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// CloudCalls counts the local cloud's API calls during a burst.
type CloudCalls struct {
	STS  int `json:"sts"`
	EC2  int `json:"ec2_describe_instances"`
	IAM  int `json:"iam"`
	Node int `json:"-"`
}

// Webhook is the token webhook's latency, estimated from its histogram.
type Webhook struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Report is one burst's figures; Baselines hold the baselines', Fault the fault run's.
type Report struct {
	Nodes    int    `json:"nodes"`
	Identity string `json:"identity"`
	// Approver is who approved and signed client certificates: nodejoin, kcm or floor.
	Approver         string  `json:"approver"`
	AllReadySeconds  float64 `json:"all_ready_seconds"`
	AllIssuedSeconds float64 `json:"all_issued_seconds"`
	// MedianJoinSeconds is the median node's join time (Ready with every certificate).
	MedianJoinSeconds     float64     `json:"median_join_seconds"`
	CSRCreateToApprovedMS Percentiles `json:"csr_create_to_approved_ms"`
	CSRApprovedToIssuedMS Percentiles `json:"csr_approved_to_issued_ms"`
	CSRCreateToIssuedMS   Percentiles `json:"csr_create_to_issued_ms"`
	WebhookMS             Webhook     `json:"webhook_ms"`
	TokenReviews          int         `json:"token_reviews"`
	WebhookCacheHitRate   float64     `json:"webhook_cache_hit_rate"`
	APIRequestsPerNode    float64     `json:"api_requests_per_node"`
	// APIRequestsPerNodeByCall splits APIRequestsPerNode by verb and resource
	// ("PUT certificatesigningrequests/approval"); left out when kube-apiserver
	// restarted during the burst, which starts its counters again.
	APIRequestsPerNodeByCall map[string]float64 `json:"api_requests_per_node_by_call,omitempty"`
	CloudCallsPerNode        float64            `json:"cloud_calls_per_node"`
	CloudCalls               CloudCalls         `json:"cloud_calls"`
	// DescribeInstancesPerNode is EC2 DescribeInstances calls per node.
	DescribeInstancesPerNode float64 `json:"describe_instances_per_node"`
	// ControllerCPUSeconds and ControllerPeakRSSMiB are nodejoin-controller's, or the
	// floor approver's in a floor run.
	ControllerCPUSeconds float64 `json:"controller_cpu_seconds"`
	ControllerPeakRSSMiB float64 `json:"controller_peak_rss_mib"`
	CSRs                 int     `json:"csrs"`
	LeftPending          int     `json:"left_pending"`
	Denied               int     `json:"denied"`
	// IssuedTwice counts CSRs that carried two different certificates.
	IssuedTwice int `json:"issued_twice"`
	// Load is /proc/loadavg's 1, 5 and 15 minute averages when the burst started.
	Load string `json:"load"`
	// JoinedSeconds are the nodes' join times, sorted: the plot's data.
	JoinedSeconds []float64 `json:"joined_seconds"`

	// SecondsPerNode is AllIssuedSeconds divided by the nodes.
	SecondsPerNode float64 `json:"seconds_per_node"`
	// CPUSeconds is each process's CPU time during the burst (user + system, from
	// /proc): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
	// nodejoin-controller or floor-approver, and "kubelets", the benchmark's own
	// process, which runs the simulated kubelets, the local cloud and the watchers.
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
	// KubeletsMiBPerNode is how much the benchmark's resident memory grew from before
	// the kubelets started to when all had joined, per node: what a simulated kubelet
	// (with its share of the watchers' caches) costs.
	KubeletsMiBPerNode float64 `json:"kubelets_mib_per_node"`

	Fault *FaultReport `json:"fault,omitempty"`
	// Baselines are the baselines' runs, in --baseline's order; their Approver names
	// them. RatioAllIssuedKCM and RatioAllIssuedFloor are ours / theirs.
	Baselines           []*Report   `json:"baselines,omitempty"`
	RatioAllIssuedKCM   float64     `json:"ratio_all_issued_kcm,omitempty"`
	RatioAllIssuedFloor float64     `json:"ratio_all_issued_floor,omitempty"`
	Soak                *SoakReport `json:"soak,omitempty"`
	// Growth holds one point per size of --nodes when it names several; the report
	// around it is the last size's.
	Growth []GrowthPoint `json:"growth,omitempty"`
}

// GrowthPoint is one size's figures in a growth run.
type GrowthPoint struct {
	Nodes              int     `json:"nodes"`
	AllIssuedSeconds   float64 `json:"all_issued_seconds"`
	MedianJoinSeconds  float64 `json:"median_join_seconds"`
	SecondsPerNode     float64 `json:"seconds_per_node"`
	APIRequestsPerNode float64 `json:"api_requests_per_node"`
	KubeletsMiBPerNode float64 `json:"kubelets_mib_per_node"`
	// RatioAllIssued is ours / each baseline's, by baseline.
	RatioAllIssued map[string]float64 `json:"ratio_all_issued,omitempty"`
	JoinedSeconds  []float64          `json:"joined_seconds"`
}

// FaultReport is a burst with a fault injected, against the clean burst.
type FaultReport struct {
	Kind string `json:"kind"`
	// InjectedAtSeconds is when, after the burst started, the fault was injected.
	InjectedAtSeconds float64 `json:"injected_at_seconds"`
	// ExtraSeconds is the fault run's all-issued time less the clean run's.
	ExtraSeconds float64 `json:"extra_seconds"`
	Run          *Report `json:"run"`
}

// AddFlags binds the options of `nodejoin bench join` to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.IntSliceVar(&o.Sizes, "nodes", []int{100}, "simulated kubelets started at once; a comma list (100,500,1000) runs each size in turn and reports the growth")
	f.StringVar(&o.Identity, "identity", IdentityBootstrapToken, "the nodes' identity: bootstrap-token or aws-iam")
	f.StringVar(&o.Baseline, "baseline", "", `comma list of baselines, each run after ours on a fresh cluster: "kcm" (kube-controller-manager approves and signs client certificates), "floor" (an approver that checks nothing approves and signs every kubelet CSR); "peer" cannot be built here`)
	f.StringVar(&o.Fault, "fault", "", "run the burst again with a fault once half the nodes joined: apiserver-restart or leader-kill")
	f.DurationVar(&o.Duration, "duration", 0, "run a soak this long instead of a burst (nodes join and leave, certificates rotate)")
	f.DurationVar(&o.CertificateLifetime, "cert-lifetime", 0, "lifetime of the certificates issued, at least 10m (default a year; 10m in a soak)")
	f.StringVar(&o.ProfileDir, "profile", "", "write CPU profiles of the burst (the controller, kube-apiserver, and the simulated kubelets with the local cloud) and the controller's heap profile into DIR")
	f.IntVar(&o.CSRWorkers, "csr-workers", 0, "the controller's --csr-workers (default its own)")
	f.StringArrayVar(&o.ControllerArgs, "controller-arg", nil, "add this flag to nodejoin-controller's command line (repeatable), such as --controller-arg=--kube-api-qps=500")
	f.StringVar(&o.StateDir, "state-dir", "", "where the runs' clusters and logs go (default a temporary directory, removed afterwards)")
	f.BoolVar(&o.KeepState, "keep-state", false, "keep the temporary state directory (logs) afterwards")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up on a burst after this long")
}
