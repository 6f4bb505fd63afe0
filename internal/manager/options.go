package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/logging"
	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/rbac"
)

// The client-side rate limit towards the API server. client-go's own default (5 a
// second, bursts of 10) held a burst of joining nodes back: each node costs the
// controller about six requests (two SubjectAccessReviews, two approvals, two
// certificates) and the node initializer's. At 100/200 a burst of 1,000 joining nodes
// was issued in 60 s, at 1,000/2,000 in 22 s, with a median join equal to that under
// an approver that checks nothing (docs/benchmarks.md, 2026-11-28). The API server's own fairness is the real
// guard: the chart's FlowSchema puts these requests at workload-high, whose share the
// server enforces whatever a client's limit.
const (
	DefaultKubeAPIQPS   = 1000
	DefaultKubeAPIBurst = 2000
)

// Options are the options of nodejoin-controller's `run` (all of them) and `webhook`
// (the webhook's), as its flags set them; Run turns them into a Config.
type Options struct {
	kubeconfig string
	inventoryOptions

	// CSR approval and signing.
	caCert, caKey            string
	servingCACert, servingCA string
	maxExpiration, duration  time.Duration
	clientMaxDuration        time.Duration

	// Webhook.
	webhookListen, tlsCert, tlsKey string
	// webhookClientCA verifies kube-apiserver's client certificate; insecureNoClientCert
	// serves anyone instead. maxInFlight caps the webhook's requests at once.
	webhookClientCA                string
	insecureNoClientCert           bool
	maxInFlight                    int
	clusterID, region, stsCABundle string
	stsHosts                       []string
	// stsEndpoint, when set, is the STS every token is verified by (authn.Verifier.Endpoint).
	stsEndpoint string
	// Instance proofs (authn.InstanceProofs).
	identityCert string
	requireProof bool
	proofMaxAge  time.Duration

	// Running.
	leaderElect, installRBAC, installCRDs bool
	accessPolicies                        bool
	leaseNamespace, identity              string
	leaseDuration, renewDeadline, retry   time.Duration
	controllerUser                        string
	tokenCleanup                          time.Duration
	metricsAddr, healthAddr, pprofAddr    string
	cpuProfile                            string
	accessReviewTTL                       time.Duration
	csrWorkers                            int
	csrSigners                            []string
	maxSANs, maxServingPerNode            int
	kubeAPIQPS                            float32
	kubeAPIBurst                          int
	addons                                addonOptions
	nodegroups                            nodeGroupOptions
	csr                                   csrOptions
}

// AddFlags binds the flags of `nodejoin-controller run` to f.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	o.commonFlags(f)
	f.StringVar(&o.caCert, "ca-cert", "", "PEM certificate of the CA that signs kubelet certificates (required with --csr=sign)")
	f.StringVar(&o.caKey, "ca-key", "", "PEM private key of that CA (required with --csr=sign)")
	f.StringVar(&o.servingCACert, "serving-ca-cert", "", "a separate CA for kubelet serving certificates (optional)")
	f.StringVar(&o.servingCA, "serving-ca-key", "", "its private key")
	f.DurationVar(&o.maxExpiration, "max-expiration", 365*24*time.Hour, "longest certificate lifetime a CSR may ask for; longer ones are denied")
	f.DurationVar(&o.duration, "duration", 365*24*time.Hour, "lifetime of certificates whose CSR asks for none, as kubelets' do (at least 1m; below 10m only to watch renewals)")
	f.DurationVar(&o.clientMaxDuration, "client-cert-max-duration", csr.DefaultClientMaxDuration, "longest lifetime of a kubelet client certificate, whatever its CSR asks; the kubelet renews it at 70-90% of its life (at least 1m)")
	f.StringVar(&o.webhookListen, "webhook-listen", "", "serve TokenReviews over HTTPS at ADDR/authenticate (default: no webhook)")
	f.IntVar(&o.csrWorkers, "csr-workers", DefaultCSRWorkers, "how many CSRs are settled at once (the CSR controller's concurrent reconciles)")
	f.DurationVar(&o.accessReviewTTL, "access-review-cache-ttl", DefaultAccessReviewTTL, "how long a SubjectAccessReview that allowed a CSR's requester is remembered (denials never are; 0: ask every time)")
	f.IntVar(&o.maxSANs, "max-serving-sans", csr.DefaultMaxSANs, "most DNS and IP subjectAltNames a kubelet serving CSR may ask for; CSRs with more are denied")
	f.IntVar(&o.maxServingPerNode, "max-serving-csrs-per-node", csr.DefaultMaxServingPerNode, "most serving CSRs approved for one node within an hour; more are denied")
	f.StringSliceVar(&o.csrSigners, "csr-signers", nil, "settle only the CSRs of these kubelet signers (default both: kubernetes.io/kubelet-serving,kubernetes.io/kube-apiserver-client-kubelet)")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "", "serve Go's /debug/pprof/ profiles at http://ADDR (default: off; loopback only)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the whole run to FILE when the controller stops")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "run the CSR controller only while holding the nodejoin-controller Lease")
	f.StringVar(&o.leaseNamespace, "leader-election-namespace", "kube-system", "namespace of the leader-election Lease")
	f.StringVar(&o.identity, "identity", "", "this replica's name in leader election (default: the host name)")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease holds before another replica may take it after the leader stops renewing")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	f.DurationVar(&o.retry, "leader-election-retry-period", 2*time.Second, "how often replicas try to take or renew the Lease")
	f.BoolVar(&o.installRBAC, "install-rbac", true, "create or update nodejoin's roles and bindings at start (needs RBAC rights the deployed controller does not have)")
	f.BoolVar(&o.accessPolicies, "access-policies", false, "bind the access policies of STANDARD NodeAccessEntries (the leader; needs the chart's accessPolicies roles)")
	f.BoolVar(&o.installCRDs, "install-crds", true, "create or update the NodeAccessEntry CustomResourceDefinition (and NodeGroup's, with --nodegroups) at start")
	f.StringVar(&o.controllerUser, "controller-user", "", "user to bind to the controller's least-privilege roles (with --install-rbac)")
	f.DurationVar(&o.tokenCleanup, "token-cleanup-interval", 0, "how often expired bootstrap tokens are deleted (0: never, the default: kube-controller-manager's tokencleaner deletes them; needs list and delete of Secrets in kube-system, which deploy/ does not grant)")
	f.StringVar(&o.healthAddr, "health-probe-bind-address", "", "serve /healthz and /readyz at http://ADDR (default: off)")
	// The flag's name before it followed controller-runtime's.
	f.StringVar(&o.healthAddr, "health-bind-address", "", "serve /healthz and /readyz at http://ADDR")
	_ = f.MarkDeprecated("health-bind-address", "use --health-probe-bind-address")
	o.addons.register(f)
	o.nodegroups.register(f)
	o.csr.register(f)
}

// AddWebhookFlags binds the flags of `nodejoin-controller webhook` to f.
func (o *Options) AddWebhookFlags(f *pflag.FlagSet) {
	o.commonFlags(f)
	f.StringVar(&o.webhookListen, "listen", ":21362", "address to serve HTTPS on")
}

// Run runs the CSR controller, and the webhook when --webhook-listen is given, until
// ctx ends.
func (o *Options) Run(ctx context.Context) error { return o.run(ctx, true) }

// RunWebhook serves the webhook alone until ctx ends.
func (o *Options) RunWebhook(ctx context.Context) error { return o.run(ctx, false) }

// commonFlags are the flags of both commands.
func (o *Options) commonFlags(f *pflag.FlagSet) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, else in-cluster)")
	o.flags(f)
	f.StringVar(&o.tlsCert, "tls-cert", "", "the webhook's serving certificate (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "the webhook's serving key (PEM)")
	f.StringVar(&o.webhookClientCA, "webhook-client-ca-file", "", "PEM CA of kube-apiserver's client certificate for the webhook: TLS handshakes without a certificate it signed fail (required with the webhook)")
	f.BoolVar(&o.insecureNoClientCert, "webhook-insecure-no-client-cert", false, "serve token reviews to any client, without --webhook-client-ca-file (anyone reaching the port can spend the webhook's STS budget)")
	f.IntVar(&o.maxInFlight, "webhook-max-in-flight", httpserver.DefaultMaxInFlight, "token review requests handled at once; more are answered 429 with Retry-After")
	f.StringVar(&o.clusterID, "cluster-id", "", "this cluster's name, which tokens must be bound to and bootstrap-token instances tagged for (kubernetes.io/cluster/NAME)")
	f.StringVar(&o.region, "region", "", "STS region: accepts sts.REGION.amazonaws.com and sts.amazonaws.com")
	f.StringArrayVar(&o.stsHosts, "sts-host", nil, "an STS host tokens may point at (repeatable; replaces the region's)")
	f.StringVar(&o.stsEndpoint, "sts-endpoint", "", "send every token's GetCallerIdentity request to this STS (https://host:port), with the host the token names as its Host header, instead of to that host: for a cluster whose STS is not AWS's (a local cloud's)")
	f.StringVar(&o.stsCABundle, "sts-ca-bundle", "", "PEM CAs to trust for STS (default: the system's)")
	f.StringVar(&o.identityCert, "instance-identity-cert", "", "PEM certificates of the keys that sign instance identity documents (AWS's of the cluster's regions, or the local cloud's): nodes' instance proofs are checked against them")
	f.BoolVar(&o.requireProof, "require-instance-proof", false, "require every node to prove it is the instance it names (a signed instance identity document with its token); otherwise only nodes whose NodeAccessEntry is annotated "+authn.InstanceProofAnnotation+"=required")
	f.DurationVar(&o.proofMaxAge, "instance-proof-max-age", 0, "refuse the first proof of an instance launched longer ago than this (0: no limit)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at http://ADDR/metrics (default: off)")
	f.Float32Var(&o.kubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "requests a second to the API server, sustained (client-side rate limit)")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "requests to the API server in a burst above --kube-api-qps")
}

func (o *Options) validate(signing bool) error {
	webhook := o.webhookListen != ""
	switch {
	case signing && o.csr.validate() != nil:
		return o.csr.validate()
	case signing && o.csr.signs() && (o.caCert == "" || o.caKey == ""):
		return errors.New("--ca-cert and --ca-key are required with --csr=sign: the CA that signs kubelet certificates (--csr=approve leaves signing to kube-controller-manager)")
	case webhook && (o.tlsCert == "" || o.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key are required: kube-apiserver calls the webhook over HTTPS")
	case webhook && o.clusterID == "":
		return errors.New("--cluster-id is required: tokens are bound to one cluster")
	case webhook:
		if err := o.validateWebhookCallers(); err != nil {
			return err
		}
	}
	if err := o.inventoryOptions.validate(); err != nil {
		return err
	}
	if webhook && len(o.stsHosts) == 0 && o.region == "" {
		return errors.New("give --region or --sts-host: the STS hosts tokens may point at")
	}
	return o.validateSTSEndpoint()
}

// validateSTSEndpoint refuses an --sts-endpoint that is not https://host[:port].
func (o *Options) validateSTSEndpoint() error {
	if o.stsEndpoint == "" {
		return nil
	}
	if u, err := url.Parse(o.stsEndpoint); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("--sts-endpoint %q is not an https://host[:port] URL: tokens' presigned requests are sent there, so only TLS is allowed", o.stsEndpoint)
	}
	return nil
}

// validateWebhookCallers checks the flags that say who may call the webhook.
func (o *Options) validateWebhookCallers() error {
	switch {
	case o.webhookClientCA == "" && !o.insecureNoClientCert:
		return errors.New("--webhook-client-ca-file is required: the CA of the client certificate kube-apiserver presents to the webhook (its webhook kubeconfig's client-certificate); --webhook-insecure-no-client-cert serves any client instead")
	case o.webhookClientCA != "" && o.insecureNoClientCert:
		return errors.New("give --webhook-client-ca-file or --webhook-insecure-no-client-cert, not both")
	case o.maxInFlight < 1:
		return fmt.Errorf("--webhook-max-in-flight %d: want at least 1", o.maxInFlight)
	}
	return nil
}

// webhookTLS is the webhook's TLS configuration: its serving certificate, and client
// certificates of --webhook-client-ca-file required when that is given.
func (o *Options) webhookTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading the webhook's serving certificate: %w", err)
	}
	if o.webhookClientCA == "" {
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	data, err := os.ReadFile(o.webhookClientCA)
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--webhook-client-ca-file %s holds no PEM certificate", o.webhookClientCA)
	}
	return httpserver.MutualTLS(cert, pool), nil
}

// restConfig reads a kubeconfig file, or $KUBECONFIG, or the in-cluster configuration,
// in that order.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster configuration: %w", err)
	}
	return cfg, nil
}

func (o *Options) signer() (*csr.Signer, error) {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--duration", o.duration}, {"--client-cert-max-duration", o.clientMaxDuration}} {
		if d.value < csr.MinConfiguredDuration {
			return nil, fmt.Errorf("%s %s: want at least %s: a kubelet renews at 70-90%% of its certificate's life, and a shorter certificate could expire before its successor is issued", d.flag, d.value, csr.MinConfiguredDuration)
		}
	}
	ca, err := pki.LoadCA(o.caCert, o.caKey)
	if err != nil {
		return nil, err
	}
	s := &csr.Signer{CA: ca, Duration: o.duration, MaxDuration: o.maxExpiration, ClientMaxDuration: o.clientMaxDuration}
	if o.servingCACert != "" {
		if s.ServingCA, err = pki.LoadCA(o.servingCACert, o.servingCA); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// instanceProofs is the checker of nodes' instance proofs the flags describe.
func (o *Options) instanceProofs() (*authn.InstanceProofs, error) {
	p := &authn.InstanceProofs{Required: o.requireProof, MaxAge: o.proofMaxAge}
	if o.region != "" {
		p.Regions = []string{o.region}
	}
	if o.identityCert == "" {
		if o.requireProof {
			return nil, errors.New("--require-instance-proof needs --instance-identity-cert: the certificates proofs are checked against")
		}
		return p, nil
	}
	data, err := os.ReadFile(o.identityCert)
	if err != nil {
		return nil, fmt.Errorf("--instance-identity-cert: %w", err)
	}
	if p.Certs, err = authn.ParseCertificates(data); err != nil {
		return nil, fmt.Errorf("--instance-identity-cert %s: %w", o.identityCert, err)
	}
	return p, nil
}

func (o *Options) verifier() (*authn.Verifier, error) {
	hosts := o.stsHosts
	if len(hosts) == 0 {
		hosts = []string{"sts." + o.region + ".amazonaws.com", "sts.amazonaws.com"}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.stsCABundle != "" {
		pem, err := os.ReadFile(o.stsCABundle)
		if err != nil {
			return nil, fmt.Errorf("--sts-ca-bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--sts-ca-bundle %s holds no PEM certificate", o.stsCABundle)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &authn.Verifier{ClusterID: o.clusterID, STSHosts: hosts, Endpoint: strings.TrimSuffix(o.stsEndpoint, "/"), HTTP: hc}, nil
}

// listen opens a TCP listener, or none for an empty address.
func listen(ctx context.Context, addr, what string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listening on %s: %w", what, addr, err)
	}
	return l, nil
}

// signingConfig fills in what the CSR controller and its leader election need.
func (o *Options) signingConfig(cfg *Config) error {
	var err error
	if o.csr.signs() {
		if cfg.Signer, err = o.signer(); err != nil {
			return err
		}
	}
	o.csr.config(cfg)
	if o.tokenCleanup > 0 {
		cfg.TokenCleanupInterval = o.tokenCleanup
	}
	if o.csrWorkers < 1 {
		return fmt.Errorf("--csr-workers %d: want at least 1", o.csrWorkers)
	}
	cfg.CSRWorkers = o.csrWorkers
	switch {
	case o.accessReviewTTL < 0:
		return fmt.Errorf("--access-review-cache-ttl %s: want 0 (off) or more", o.accessReviewTTL)
	case o.accessReviewTTL == 0:
		cfg.AccessReviewTTL = -1
	default:
		cfg.AccessReviewTTL = o.accessReviewTTL
	}
	cfg.CSRSigners = o.csrSigners
	if o.controllerUser != "" {
		u := rbac.User(o.controllerUser)
		cfg.Controller = &u
	}
	if !o.leaderElect {
		return nil
	}
	id := o.identity
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return fmt.Errorf("choosing a leader-election identity (give --identity): %w", err)
		}
	}
	if o.retry <= 0 || o.retry >= o.renewDeadline || o.renewDeadline >= o.leaseDuration {
		return fmt.Errorf("leader election: want 0 < --leader-election-retry-period (%s) < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s)", o.retry, o.renewDeadline, o.leaseDuration)
	}
	cfg.LeaderElection = &LeaderElection{Namespace: o.leaseNamespace, Name: o.csr.leaseName, Identity: id,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retry}
	return nil
}

// run runs the manager; signing says whether this is `run` (CSR controller on) or
// `webhook` (webhook alone).
//
//nolint:gocyclo // a flat sequence of setup steps, each failing with its own error.
func (o *Options) run(ctx context.Context, signing bool) error {
	if !signing && o.webhookListen == "" {
		return errors.New("--listen is required")
	}
	if err := o.validate(signing); err != nil {
		return err
	}
	cfg := Config{
		Log:                   logging.FromContext(ctx),
		MaxExpiration:         o.maxExpiration,
		ClusterName:           o.clusterID,
		MaxSANs:               o.maxSANs,
		MaxServingCSRsPerNode: o.maxServingPerNode,
		InstallRBAC:           signing && o.installRBAC,
		InstallCRDs:           signing && o.installCRDs,
		AccessPolicies:        signing && o.accessPolicies,
		TokenCleanupInterval:  -1,
	}
	if signing {
		if err := o.addons.config(&cfg); err != nil {
			return err
		}
	}
	var err error
	if cfg.REST, err = restConfig(o.kubeconfig); err != nil {
		return err
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-qps %g and --kube-api-burst %d: want both above 0", o.kubeAPIQPS, o.kubeAPIBurst)
	}
	cfg.REST.QPS, cfg.REST.Burst = o.kubeAPIQPS, o.kubeAPIBurst
	inv, err := o.open(ctx)
	if err != nil {
		return err
	}
	cfg.Nodes, cfg.Instances = inv, inv
	if signing {
		if err := o.signingConfig(&cfg); err != nil {
			return err
		}
		if err := o.nodegroups.config(ctx, o, &cfg); err != nil {
			return err
		}
	}
	if o.webhookListen != "" {
		if cfg.Verifier, err = o.verifier(); err != nil {
			return err
		}
		if cfg.WebhookTLS, err = o.webhookTLS(); err != nil {
			return err
		}
		cfg.WebhookLimits = httpserver.Limits{MaxInFlight: o.maxInFlight}
		if cfg.InstanceProofs, err = o.instanceProofs(); err != nil {
			return err
		}
	}
	closeAll := func(ls ...net.Listener) {
		for _, l := range ls {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	if cfg.WebhookListener, err = listen(ctx, o.webhookListen, "webhook"); err != nil {
		return err
	}
	if cfg.MetricsListener, err = listen(ctx, o.metricsAddr, "metrics"); err != nil {
		closeAll(cfg.WebhookListener)
		return err
	}
	if cfg.HealthListener, err = listen(ctx, o.healthAddr, "health"); err != nil {
		closeAll(cfg.WebhookListener, cfg.MetricsListener)
		return err
	}
	if cfg.PprofListener, err = listen(ctx, o.pprofAddr, "pprof"); err != nil {
		closeAll(cfg.WebhookListener, cfg.MetricsListener, cfg.HealthListener)
		return err
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			closeAll(cfg.WebhookListener, cfg.MetricsListener, cfg.HealthListener, cfg.PprofListener)
			return err
		}
		defer stop()
	}
	return Run(ctx, cfg)
}

// startCPUProfile profiles the process's CPU into path until the returned function runs.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
