// Package bench is `nodejoin bench join`: it starts a fresh local control plane
// (loopback mode, no root), runs nodejoin-controller against it as a child process, and
// starts N simulated kubelets at once; it reports how long until every node is Ready and
// every certificate issued, CSR latencies, the webhook's latency and cache hit rate, API
// and cloud calls per node, the controller's CPU time and peak memory, and what was left
// pending. Each baseline runs the same burst again on a fresh cluster, with
// kube-controller-manager approving and signing the client certificates (kcm) or an
// approver that checks nothing (floor.go), and gives the ratios; a list of sizes runs
// it all at each size (growth). Faults (an API
// server restart, a killed leader) and a soak (nodes joining and leaving with short
// certificate lifetimes) run on the same machinery.
//
// options.go holds the options and the report, bench.go sets a run up, join.go runs the
// burst and its faults, watch.go watches, controller.go runs the controller, report.go
// and figures.go compute the figures, profile.go profiles, plot.go draws, print.go prints,
// soak.go soaks, floor.go is the floor approver and procs.go reads CPU time by process.
package bench

import (
	"context"
	"fmt"
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
	"github.com/nodejoin/nodejoin/internal/kubeletsim"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/process"
)

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
	if len(o.Sizes) > 1 {
		return growth(ctx, o)
	}
	return compare(ctx, o)
}

// compare runs ours, the fault run and each baseline at o.Nodes, each on a fresh
// cluster, and gives the ratios.
func compare(ctx context.Context, o Options) (*Report, error) {
	ours, err := burst(ctx, o, "nodejoin", "nodejoin", "")
	if err != nil {
		return nil, err
	}
	if o.Fault != "" {
		f, err := burst(ctx, o, "fault", "nodejoin", o.Fault)
		if err != nil {
			return nil, err
		}
		ours.Fault = &FaultReport{Kind: o.Fault, InjectedAtSeconds: f.faultAt, ExtraSeconds: round(f.AllIssuedSeconds-ours.AllIssuedSeconds, 2), Run: f.Report}
	}
	for _, b := range o.baselines {
		base, err := burst(ctx, o, b, b, "")
		if err != nil {
			return nil, err
		}
		ours.Baselines = append(ours.Baselines, base.Report)
		switch b {
		case BaselineKCM:
			ours.RatioAllIssuedKCM = ratio(ours.AllIssuedSeconds, base.AllIssuedSeconds)
		case BaselineFloor:
			ours.RatioAllIssuedFloor = ratio(ours.AllIssuedSeconds, base.AllIssuedSeconds)
		}
	}
	return ours.Report, nil
}

// growth runs the comparison at each size in turn; the report is the last size's,
// with a point for every size.
func growth(ctx context.Context, o Options) (*Report, error) {
	var points []GrowthPoint
	var last *Report
	for _, n := range o.Sizes {
		o.Nodes = n
		fmt.Fprintf(o.Progress, "size %d of %s\n", n, o.sizeList())
		r, err := compare(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("%d nodes: %w", n, err)
		}
		p := GrowthPoint{Nodes: n, AllIssuedSeconds: r.AllIssuedSeconds, MedianJoinSeconds: r.MedianJoinSeconds,
			SecondsPerNode: r.SecondsPerNode, APIRequestsPerNode: r.APIRequestsPerNode, KubeletsMiBPerNode: r.KubeletsMiBPerNode,
			JoinedSeconds: r.JoinedSeconds}
		for _, b := range r.Baselines {
			if p.RatioAllIssued == nil {
				p.RatioAllIssued = map[string]float64{}
			}
			p.RatioAllIssued[b.Approver] = ratio(r.AllIssuedSeconds, b.AllIssuedSeconds)
		}
		points = append(points, p)
		last = r
	}
	last.Growth = points
	return last, nil
}

// run is one burst in progress.
type run struct {
	opts  Options
	label string
	dir   string
	// approver approves and signs the client certificates: "nodejoin", BaselineKCM or
	// BaselineFloor (which signs the serving certificates too).
	approver string
	fault    string
	// floor is the floor approver's process, in a floor run.
	floor   *process.Process
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
func burst(ctx context.Context, o Options, label, approver, fault string) (res *burstResult, err error) {
	if len(o.Sizes) > 1 {
		// Each size's runs have their own logs and profiles: 500-nodejoin, 500-floor.
		label = fmt.Sprintf("%d-%s", o.Nodes, label)
	}
	r := &run{opts: o, label: label, dir: filepath.Join(o.StateDir, label), approver: approver, fault: fault, rec: newRecorder()}
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
		UpstreamKubeletClientCSRs: r.approver == BaselineKCM, Profiling: r.opts.ProfileDir != "",
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
// A bootstrap token's instance needs a node role too (the CSR policy approves its
// client certificate only for an instance of its node group with a node role), so the
// entry is made in both cases.
func (r *run) nodeAccess(ctx context.Context) (string, error) {
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
	// The webhook and the CSR policy read NodeAccessEntries from their caches: wait
	// until the role would be known, which the first node's first request would
	// otherwise race.
	time.Sleep(time.Second)
	if r.opts.Identity == IdentityBootstrapToken {
		return bootstraptoken.Mint(ctx, r.client, nodeGroup, 2*time.Hour, time.Now())
	}
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
	// Tagged as a node group's instances are: a bootstrap token joins only instances
	// tagged for its group and the cluster (csr.NodeGroupTag, csr.ClusterTagPrefix;
	// bench does not import the control plane).
	return inst, r.cloud.EC2.Launch(inst, localaws.WithTags(map[string]string{
		"eks:nodegroup-name": nodeGroup, "kubernetes.io/cluster/" + r.cluster.Name(): "owned",
	}))
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
