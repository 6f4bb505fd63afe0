// Package bench is `nodejoin bench join`: it starts a fresh local control plane
// (loopback mode, no root), runs nodejoin-controller against it as a child process, and
// starts N simulated kubelets at once; it reports how long until every node is Ready and
// every certificate issued, CSR latencies, the webhook's latency and cache hit rate, API
// and cloud calls per node, the controller's CPU time and peak memory, and what was left
// pending. With a baseline it runs the same burst again with kube-controller-manager
// approving and signing the client certificates, and gives the ratios. Faults (an API
// server restart, a killed leader) and a soak (nodes joining and leaving with short
// certificate lifetimes) run on the same machinery.
//
// bench.go sets a run up, join.go runs the burst and its faults, watch.go watches,
// controller.go runs the controller, report.go and figures.go compute the figures,
// profile.go profiles, plot.go draws and soak.go soaks.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/sandbox/kubeletsim"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Identities of the simulated nodes.
const (
	IdentityBootstrapToken = "bootstrap-token"
	IdentityAWSIAM         = "aws-iam"
)

// BaselineKCM is the one baseline: kube-controller-manager approving and signing the
// client certificates instead of nodejoin.
const BaselineKCM = "kcm"

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
	// Nodes is how many simulated kubelets start at once. Required.
	Nodes int
	// Identity is the nodes' identity: IdentityBootstrapToken (default) or IdentityAWSIAM.
	Identity string
	// Baseline, when BaselineKCM, runs the burst a second time with
	// kube-controller-manager approving and signing the client certificates.
	Baseline string
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
	switch {
	case o.Nodes < 1 || o.Nodes > 60000:
		return fmt.Errorf("--nodes %d: want between 1 and 60000", o.Nodes)
	case o.Identity != IdentityBootstrapToken && o.Identity != IdentityAWSIAM:
		return fmt.Errorf("--identity %q: want %q or %q", o.Identity, IdentityBootstrapToken, IdentityAWSIAM)
	case o.Baseline != "" && o.Baseline != BaselineKCM:
		return fmt.Errorf("--baseline %q: the only baseline is %q (kube-controller-manager)", o.Baseline, BaselineKCM)
	case o.Baseline == BaselineKCM && o.Identity != IdentityBootstrapToken:
		return fmt.Errorf("--baseline kcm compares client certificates, which only nodes with bootstrap tokens ask for: use --identity %s", IdentityBootstrapToken)
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
	return nil
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

// Report is one burst's figures; Baseline holds the baseline's, Fault the fault run's.
type Report struct {
	Nodes    int    `json:"nodes"`
	Identity string `json:"identity"`
	// Approver is who approved and signed client certificates: nodejoin or kcm.
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
	ControllerCPUSeconds     float64 `json:"controller_cpu_seconds"`
	ControllerPeakRSSMiB     float64 `json:"controller_peak_rss_mib"`
	CSRs                     int     `json:"csrs"`
	LeftPending              int     `json:"left_pending"`
	Denied                   int     `json:"denied"`
	// IssuedTwice counts CSRs that carried two different certificates.
	IssuedTwice int `json:"issued_twice"`
	// Load is /proc/loadavg's 1, 5 and 15 minute averages when the burst started.
	Load string `json:"load"`
	// JoinedSeconds are the nodes' join times, sorted: the plot's data.
	JoinedSeconds []float64 `json:"joined_seconds"`

	Fault          *FaultReport `json:"fault,omitempty"`
	Baseline       *Report      `json:"baseline,omitempty"`
	RatioAllIssued float64      `json:"ratio_all_issued,omitempty"`
	Soak           *SoakReport  `json:"soak,omitempty"`
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

// Run runs the benchmark.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	if o.StateDir == "" {
		dir, err := os.MkdirTemp("", "nodejoin-bench-")
		if err != nil {
			return nil, err
		}
		o.StateDir = dir
		if !o.KeepState {
			defer func() { _ = os.RemoveAll(dir) }()
		}
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil { //nolint:gosec // G301: profiles for the operator's tools, no secrets.
			return nil, fmt.Errorf("--profile %s: %w", o.ProfileDir, err)
		}
	}
	if o.Duration > 0 {
		return soak(ctx, o)
	}
	ours, err := burst(ctx, o, "nodejoin", false, "")
	if err != nil {
		return nil, err
	}
	if o.Fault != "" {
		f, err := burst(ctx, o, "fault", false, o.Fault)
		if err != nil {
			return nil, err
		}
		ours.Fault = &FaultReport{Kind: o.Fault, InjectedAtSeconds: f.faultAt, ExtraSeconds: round(f.AllIssuedSeconds-ours.AllIssuedSeconds, 2), Run: f.Report}
	}
	if o.Baseline == BaselineKCM {
		base, err := burst(ctx, o, "kcm", true, "")
		if err != nil {
			return nil, err
		}
		ours.Baseline = base.Report
		ours.RatioAllIssued = ratio(ours.AllIssuedSeconds, base.AllIssuedSeconds)
	}
	return ours.Report, nil
}

// run is one burst in progress.
type run struct {
	opts    Options
	label   string
	dir     string
	kcm     bool
	fault   string
	cluster *controlplane.Cluster
	cloud   *localaws.Cloud
	client  *kubernetes.Clientset
	rec     *recorder

	replicas []*replica
	webhook  string
	// instances are the nodes' EC2 instances, by index.
	instances []localaws.Instance
}

// burstResult is a burst's report and when its fault was injected.
type burstResult struct {
	*Report
	faultAt float64
}

func (r *run) progress(format string, args ...any) {
	fmt.Fprintf(r.opts.Progress, "%s: %s\n", r.label, fmt.Sprintf(format, args...))
}

// burst runs one burst on a fresh cluster.
func burst(ctx context.Context, o Options, label string, kcm bool, fault string) (res *burstResult, err error) {
	r := &run{opts: o, label: label, dir: filepath.Join(o.StateDir, label), kcm: kcm, fault: fault, rec: newRecorder()}
	cleanup, err := r.setUp(ctx, fault == FaultLeaderKill)
	defer cleanup()
	if err != nil {
		return nil, fmt.Errorf("%s run: %w", label, err)
	}
	res, err = r.join(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s run: %w (logs: %s)", label, err, r.dir)
	}
	return res, nil
}

// setUp starts the control plane, the local cloud and the controller. The function it
// returns stops them, whatever happened.
func (r *run) setUp(ctx context.Context, twoReplicas bool) (func(), error) {
	var stops []func()
	cleanup := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return cleanup, err
	}
	r.progress("starting the control plane")
	cl, err := controlplane.Start(ctx, controlplane.Options{
		Name: "bench", StateDir: filepath.Join(r.dir, "cluster"), BinDir: r.opts.BinDir,
		Network: controlplane.NetworkLoopback, TokenWebhook: true, UnsafeNoFsync: true,
		UpstreamKubeletClientCSRs: r.kcm, Profiling: r.opts.ProfileDir != "",
	})
	if cl != nil {
		stops = append(stops, func() { _ = cl.Stop(context.WithoutCancel(ctx)) })
	}
	if err != nil {
		return cleanup, err
	}
	r.cluster = cl
	cloudCtx, stopCloud := context.WithCancel(context.WithoutCancel(ctx))
	logf, err := os.Create(filepath.Join(r.dir, "localcloud.log"))
	if err != nil {
		stopCloud()
		return cleanup, err
	}
	r.cloud, err = localaws.StartCloud(cloudCtx, accountID, cl.CA(), slog.New(slog.NewTextHandler(logf, nil)))
	if err != nil {
		stopCloud()
		_ = logf.Close()
		return cleanup, err
	}
	stops = append(stops, func() { stopCloud(); _ = r.cloud.Wait(); _ = logf.Close() })
	if r.client, err = kubernetes.NewForConfig(cl.RESTConfig()); err != nil {
		return cleanup, err
	}
	// kube-apiserver calls the webhook at the address its configuration names: take it
	// from the listener the cluster would have served on, and let the controller bind it.
	l, err := cl.ListenTokenWebhook()
	if err != nil {
		return cleanup, err
	}
	r.webhook = l.Addr().String()
	if err := l.Close(); err != nil {
		return cleanup, err
	}
	r.progress("starting nodejoin-controller")
	specs := []replicaSpec{{id: "a", webhook: r.webhook, profileDir: r.opts.ProfileDir}}
	if twoReplicas {
		// Both replicas elect a leader for the CSR controller; the webhook is served by
		// the first alone (one address), and bootstrap-token nodes do not need it.
		specs = []replicaSpec{{id: "a", leaderElect: true, webhook: r.webhook, profileDir: r.opts.ProfileDir},
			{id: "b", leaderElect: true, profileDir: r.opts.ProfileDir}}
	}
	for _, spec := range specs {
		rep, err := r.startReplica(ctx, spec)
		if err != nil {
			return cleanup, err
		}
		r.replicas = append(r.replicas, rep)
		stops = append(stops, func() { rep.sample(); rep.proc.Stop(10 * time.Second) })
	}
	return cleanup, nil
}

// nodeAccess lets the nodes in: a bootstrap token of their node group, or a
// NodeAccessEntry for their instance role. It returns the token ("" for aws-iam).
func (r *run) nodeAccess(ctx context.Context) (string, error) {
	if r.opts.Identity == IdentityBootstrapToken {
		return bootstraptoken.Mint(ctx, r.client, nodeGroup, 2*time.Hour, time.Now())
	}
	dyn, err := dynamic.NewForConfig(r.cluster.RESTConfig())
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion,
		"kind":       "NodeAccessEntry",
		"metadata":   map[string]any{"name": nodeRole},
		"spec": map[string]any{"principalARN": "arn:aws:iam::" + accountID + ":role/" + nodeRole,
			"type": string(nodejoinv1alpha1.AccessEntryEC2Linux)},
	}}
	if _, err := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating the NodeAccessEntry of role %s: %w", nodeRole, err)
	}
	// The webhook maps roles from its cache of NodeAccessEntries: wait until a token of
	// the role would be accepted, which the first node's first request would otherwise
	// race.
	time.Sleep(time.Second)
	return "", nil
}

// launch enters node i's instance into the local EC2 as running.
func (r *run) launch(i int) (localaws.Instance, error) {
	addr := netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(10 + i%250)}) //nolint:gosec // G115: complete() bounds the node count far below 250*256.
	inst := localaws.Instance{
		ID: fmt.Sprintf("i-0%016x", i+1), Type: "m5.large", AvailabilityZone: region + "a", PrivateIPv4: addr.String(),
		Role: nodeRole, VPCIPv4CIDRs: []string{"198.18.0.0/15"},
	}
	if err := localaws.InstanceDefaults(&inst); err != nil {
		return inst, err
	}
	return inst, r.cloud.EC2.Launch(inst)
}

// kubeletConfig is node i's simulated kubelet, as nodeadm would configure a real one.
func (r *run) kubeletConfig(inst localaws.Instance, token string) kubeletsim.Config {
	cfg := kubeletsim.Config{
		NodeName: inst.PrivateDNSName, InternalIP: inst.PrivateIPv4, ProviderID: "aws:///" + inst.AvailabilityZone + "/" + inst.ID,
		InstanceType: inst.Type, Zone: inst.AvailabilityZone, Region: region,
		Labels: map[string]string{"eks.amazonaws.com/nodegroup": nodeGroup},
		Server: r.cluster.Endpoint(), CAData: r.cluster.CA().CertPEM(),
		BootstrapToken: token,
	}
	if token == "" {
		cfg.Token = r.tokenSource(inst)
	}
	return cfg
}

// tokenSource mints node identity tokens for an instance in this process, with the
// credentials its role gets from the local STS, as `nodeadm get-token` does on the node.
func (r *run) tokenSource(inst localaws.Instance) func(context.Context) (string, time.Time, error) {
	return func(ctx context.Context) (string, time.Time, error) {
		c, err := r.cloud.STS.InstanceCredentials(inst.ID, inst.Role)
		if err != nil {
			return "", time.Time{}, err
		}
		cfg := aws.Config{Region: region, BaseEndpoint: aws.String(r.cloud.STSURL),
			Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}
		return identity.Mint(ctx, cfg, r.cluster.Name())
	}
}
