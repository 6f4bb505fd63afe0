// Package bench is `nodejoin bench join`: it starts a fresh local control plane
// (loopback mode, no root), runs nodejoin-controller against it as a child process, and
// starts N simulated kubelets at once; it reports how long until every node is Ready and
// every certificate issued, CSR latencies, the webhook's latency and cache hit rate, API
// and cloud calls per node, the controller's CPU time and peak memory, and what was left
// pending. With a baseline it runs the same burst again with kube-controller-manager
// approving and signing the client certificates, and gives the ratios. Faults (an API
// server restart, a killed leader) and a soak (nodes joining and leaving with short
// certificate lifetimes) run on the same machinery.
// Files: options.go holds the options and the report, bench.go runs, watch.go watches,
// controller.go runs the controller, figures.go computes, plot.go draws, print.go
// prints, soak.go soaks.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// counters are the cumulative figures read before, during and after a burst.
type counters struct {
	api           counter
	calls         map[string]float64 // per node, by call
	sts, ec2, iam int
}

// apiRequests reads apiserver_request_total, summed over its labels.
func (r *run) apiRequests(ctx context.Context) (float64, error) {
	calls, err := r.apiRequestsByCall(ctx)
	return total(calls), err
}

// apiRequestsByCall reads apiserver_request_total, summed by verb and resource.
func (r *run) apiRequestsByCall(ctx context.Context) (map[string]float64, error) {
	raw, err := r.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	s, err := parseMetrics(strings.NewReader(string(raw)), "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	return byCall(s), nil
}

// join runs the burst: N kubelets at once, until every node is Ready with every
// certificate issued.
//
//nolint:gocyclo // the burst's steps in order, read top to bottom.
func (r *run) join(ctx context.Context) (*burstResult, error) {
	n := r.opts.Nodes
	token, err := r.nodeAccess(ctx)
	if err != nil {
		return nil, err
	}
	r.instances = make([]localaws.Instance, n)
	for i := range n {
		if r.instances[i], err = r.launch(i); err != nil {
			return nil, err
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := r.rec.start(watchCtx, r.client); err != nil {
		return nil, err
	}
	var c counters
	callsBefore, err := r.apiRequestsByCall(ctx)
	if err != nil {
		return nil, err
	}
	c.api.observe(total(callsBefore))
	sts0, ec20, iam0 := r.cloud.STS.Calls(), r.cloud.EC2.Calls(), r.cloud.IAM.Calls()
	m0 := r.controllerMetrics(ctx)
	for _, rep := range r.replicas {
		rep.cpuAtBurst = rep.sample().cpuSeconds
	}
	load, _ := os.ReadFile("/proc/loadavg")

	r.progress("starting %d simulated kubelets at once", n)
	simCtx, stopSims := context.WithCancel(context.WithoutCancel(ctx))
	kubelets := make([]*kubeletsim.Kubelet, n)
	stopProfiles := r.burstProfiles(ctx)
	defer stopProfiles()
	start := time.Now()
	for i, inst := range r.instances {
		k, err := kubeletsim.Start(simCtx, r.kubeletConfig(inst, token))
		if err != nil {
			stopSims()
			return nil, err
		}
		kubelets[i] = k
	}
	defer func() {
		stopSims()
		for _, k := range kubelets {
			_ = k.Wait()
		}
	}()

	var faultAt time.Duration
	var faultOnce sync.Once
	var faultErr error
	deadline := start.Add(r.opts.Timeout)
	for {
		done, failed := 0, ""
		for _, k := range kubelets {
			st := k.Status()
			if st.Ready && st.ServingCertificate.Issued > 0 && (token == "" || st.ClientCertificate.Issued > 0) {
				done++
			}
			if st.Phase == kubeletsim.PhaseFailed && failed == "" {
				failed = st.Node + ": " + st.LastError
			}
		}
		if failed != "" {
			return nil, fmt.Errorf("node %s", failed)
		}
		if done == n {
			break
		}
		if r.fault != "" && done >= n/2 {
			faultOnce.Do(func() {
				faultAt = time.Since(start)
				r.progress("%d of %d nodes joined: injecting %s", done, n, r.fault)
				faultErr = r.inject(ctx, &c)
			})
			if faultErr != nil {
				return nil, faultErr
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d nodes joined after %s", done, n, r.opts.Timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.progress("all %d nodes joined after %.1fs", n, time.Since(start).Seconds())
	stopProfiles()
	// Whatever is still on its way (a late duplicate CSR) has a moment to settle.
	time.Sleep(time.Second)

	callsAfter, err := r.apiRequestsByCall(ctx)
	if err != nil {
		return nil, err
	}
	c.api.observe(total(callsAfter))
	if !c.api.restarted {
		c.calls = callsPerNode(callsBefore, callsAfter, n)
	}
	m1 := r.controllerMetrics(ctx)
	c.sts, c.ec2, c.iam = r.cloud.STS.Calls()-sts0, r.cloud.EC2.Calls()-ec20, r.cloud.IAM.Calls()-iam0
	var cpu, peak float64
	for _, rep := range r.replicas {
		st := rep.final
		if !rep.killed {
			st = rep.sample()
		}
		cpu += st.cpuSeconds - rep.cpuAtBurst
		peak = max(peak, st.peakMiB)
	}
	if r.opts.ProfileDir != "" {
		r.heapProfiles(ctx)
	}
	csrs, ready := r.rec.snapshot()
	rep := r.report(start, kubelets, csrs, ready, &c, m0, m1)
	rep.ControllerCPUSeconds = round(cpu, 2)
	rep.ControllerPeakRSSMiB = round(peak, 1)
	rep.Load = loadAvg(load)
	return &burstResult{Report: rep, faultAt: seconds(faultAt)}, nil
}

// report computes the figures from what was recorded.
func (r *run) report(start time.Time, kubelets []*kubeletsim.Kubelet, csrs []csrSeen, ready map[string]time.Time, c *counters, m0, m1 []sample) *Report {
	n := len(kubelets)
	rep := &Report{Nodes: n, Identity: r.opts.Identity, Approver: "nodejoin", CSRs: len(csrs)}
	if r.kcm {
		rep.Approver = BaselineKCM
	}
	var toApproved, toIssued, createToIssued []time.Duration
	var lastIssued time.Time
	issuedBy := map[string]time.Time{} // CSR name → issued
	for _, s := range csrs {
		switch {
		case s.denied:
			rep.Denied++
		case s.failed:
		case s.issued.IsZero():
			rep.LeftPending++
		}
		if len(s.certs) > 1 {
			rep.IssuedTwice++
		}
		if !s.approved.IsZero() {
			toApproved = append(toApproved, s.approved.Sub(s.created))
		}
		if !s.issued.IsZero() {
			toIssued = append(toIssued, s.issued.Sub(s.approved))
			createToIssued = append(createToIssued, s.issued.Sub(s.created))
			issuedBy[s.name] = s.issued
			if s.issued.After(lastIssued) {
				lastIssued = s.issued
			}
		}
	}
	rep.CSRCreateToApprovedMS = percentiles(toApproved)
	rep.CSRApprovedToIssuedMS = percentiles(toIssued)
	rep.CSRCreateToIssuedMS = percentiles(createToIssued)
	var lastReady time.Time
	joined := make([]float64, 0, n)
	for _, k := range kubelets {
		st := k.Status()
		at := ready[st.Node]
		if at.After(lastReady) {
			lastReady = at
		}
		for _, name := range []string{st.ServingCertificate.CSR, st.ClientCertificate.CSR} {
			if t, ok := issuedBy[name]; ok && t.After(at) {
				at = t
			}
		}
		joined = append(joined, seconds(at.Sub(start)))
	}
	slices.Sort(joined)
	rep.JoinedSeconds = joined
	if len(joined) > 0 {
		rep.MedianJoinSeconds = joined[len(joined)/2]
		rep.AllIssuedSeconds = joined[len(joined)-1]
	}
	if !lastReady.IsZero() {
		rep.AllReadySeconds = seconds(lastReady.Sub(start))
	}
	rep.APIRequestsPerNode = perNode(c.api.total, n)
	rep.APIRequestsPerNodeByCall = c.calls
	rep.CloudCalls = CloudCalls{STS: c.sts, EC2: c.ec2, IAM: c.iam}
	rep.CloudCallsPerNode = perNode(float64(c.sts+c.ec2+c.iam), n)
	rep.DescribeInstancesPerNode = perNode(float64(c.ec2), n)
	rep.TokenReviews = int(sum(m1, "nodejoin_token_reviews_total") - sum(m0, "nodejoin_token_reviews_total"))
	lookups := sum(m1, "nodejoin_token_cache_lookups_total") - sum(m0, "nodejoin_token_cache_lookups_total")
	hits := sum(m1, "nodejoin_token_cache_hits_total") - sum(m0, "nodejoin_token_cache_hits_total")
	rep.WebhookCacheHitRate = ratio(hits, lookups)
	delta := histogramDelta(m0, m1, "nodejoin_token_review_seconds_bucket")
	rep.WebhookMS = Webhook{P50: round(1000*histogramQuantile(delta, "nodejoin_token_review_seconds_bucket", 0.5), 1),
		P99: round(1000*histogramQuantile(delta, "nodejoin_token_review_seconds_bucket", 0.99), 1)}
	return rep
}

// histogramDelta subtracts the buckets of before from after, label set by label set.
func histogramDelta(before, after []sample, name string) []sample {
	key := func(s sample) string {
		keys := make([]string, 0, len(s.labels))
		for k, v := range s.labels {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		return strings.Join(keys, ",")
	}
	prev := map[string]float64{}
	for _, s := range before {
		if s.name == name {
			prev[key(s)] += s.value
		}
	}
	var out []sample
	for _, s := range after {
		if s.name == name {
			s.value -= prev[key(s)]
			out = append(out, s)
		}
	}
	return out
}

// controllerMetrics reads every live replica's metrics (the webhook's figures), added
// up by the callers.
func (r *run) controllerMetrics(ctx context.Context) []sample {
	var all []sample
	for _, rep := range r.replicas {
		if rep.killed {
			continue
		}
		raw, err := fetch(ctx, rep.metricsURL)
		if err != nil {
			r.progress("warning: reading controller %s's metrics: %v", rep.id, err)
			continue
		}
		s, err := parseMetrics(strings.NewReader(string(raw)), "nodejoin_token_reviews_total", "nodejoin_token_cache_lookups_total",
			"nodejoin_token_cache_hits_total", "nodejoin_token_review_seconds_bucket")
		if err == nil {
			all = append(all, s...)
		}
	}
	return all
}

// heapProfiles saves each live replica's heap profile.
func (r *run) heapProfiles(ctx context.Context) {
	for _, rep := range r.replicas {
		if rep.killed || rep.pprofURL == "" {
			continue
		}
		data, err := fetch(ctx, rep.pprofURL+"heap")
		if err == nil {
			err = os.WriteFile(filepath.Join(r.opts.ProfileDir, r.label+"-"+rep.id+".heap.pprof"), data, 0o644) //nolint:gosec // G306: a heap profile for the operator's tools, no secrets.
		}
		if err != nil {
			r.progress("warning: heap profile of controller %s: %v", rep.id, err)
		}
	}
}

// inject injects the run's fault.
func (r *run) inject(ctx context.Context, c *counters) error {
	switch r.fault {
	case FaultAPIServerRestart:
		// The request counter starts again at zero: count what it had reached.
		if v, err := r.apiRequests(ctx); err == nil {
			c.api.observe(v)
		}
		if err := r.cluster.RestartAPIServer(ctx); err != nil {
			return fmt.Errorf("restarting kube-apiserver: %w", err)
		}
		return nil
	case FaultLeaderKill:
		lease, err := r.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "nodejoin-controller", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the leader's Lease: %w", err)
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, rep := range r.replicas {
			if rep.id == holder {
				rep.sample()
				rep.killed = true
				rep.proc.Kill()
				r.progress("killed the leader, replica %s", rep.id)
				return nil
			}
		}
		return fmt.Errorf("the Lease's holder %q is none of the replicas", holder)
	}
	return nil
}

// pendingCSRs counts CSRs neither decided nor issued, for the soak.
func pendingCSRs(csrs []csrSeen) int {
	n := 0
	for _, s := range csrs {
		if !s.denied && !s.failed && s.issued.IsZero() {
			n++
		}
	}
	return n
}

// loadAvg keeps /proc/loadavg's three averages.
func loadAvg(raw []byte) string {
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}
