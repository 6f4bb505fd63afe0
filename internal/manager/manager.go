// Package manager runs the parts of nodejoin-controller in one controller-runtime
// manager: on every replica the TokenReview webhook (with the NodeAccessEntry cache it
// maps roles with), the health probes and the metrics; on the elected leader only, the
// CSR approver and signer, the node initializer, the NodeGroup controller, the
// bootstrap-token cleanup and the add-ons the cluster gets at creation (addons.go).
// nodejoin-controller runs it as a process, configured by Options from its flags;
// `nodejoin up` runs it inside its own process.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/cloudnode"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
	"github.com/nodejoin/nodejoin/internal/rbac"
)

// Component names nodejoin-controller: the source of its Events and its field manager
// in server-side apply.
const Component = "nodejoin-controller"

// Default numbers of concurrent reconciles. Settling a CSR is a few round trips to the
// API server (a SubjectAccessReview, the approval, the certificate) and little CPU: the
// controller's CPU profile under a burst of joining nodes shows it busy about 6% of
// the time, and its work queue's metrics show a CSR waiting longer for a worker than
// being settled. Thirty-two workers keep that many CSRs in flight (with 200 nodes
// joining at once, every certificate was issued about a fifth sooner than with 16); each
// CSR is still settled by one worker at a time.
const (
	DefaultCSRWorkers  = 32
	DefaultNodeWorkers = 2
)

// DefaultAccessReviewTTL is how long an allowed SubjectAccessReview is remembered: the
// client CSRs of a burst of nodes that share a bootstrap token ask one question. An
// RBAC change drops every remembered answer at once (forgetOnRBACChange); a change
// through another authorizer is seen at most this much later.
const DefaultAccessReviewTTL = 10 * time.Second

var setGlobalLogger sync.Once

// Config says which parts run and with what.
type Config struct {
	// REST connects to the cluster. Required.
	REST *rest.Config
	Log  *slog.Logger
	// Registry receives nodejoin's own metrics; nil makes a private one. The metrics
	// endpoint serves them next to controller-runtime's (workqueue, client, Go and
	// process collectors).
	Registry *prometheus.Registry

	// Signer, when set, turns on CSR approval and signing (on the leader), checking
	// serving certificates against Nodes.
	Signer        *csr.Signer
	ApproveOnly   bool // approve or deny without a Signer: kube-controller-manager signs
	Nodes         csr.Inventory
	MaxExpiration time.Duration
	// ClusterName is the cluster's name: a bootstrap token's client CSR is approved only
	// for an instance tagged kubernetes.io/cluster/<ClusterName> (csr.Policy); without
	// it, bootstrap tokens get no certificate.
	ClusterName string
	// MaxSANs and MaxServingCSRsPerNode cap serving CSRs (csr.Policy.MaxSANs,
	// MaxServingPerNode); 0: csr's defaults.
	MaxSANs, MaxServingCSRsPerNode int
	// CSRWorkers is how many CSRs are settled at once; default DefaultCSRWorkers.
	CSRWorkers int
	// AccessReviewTTL is how long the CSR controller remembers a SubjectAccessReview
	// that allowed a requester (csr.ReviewCache); default
	// DefaultAccessReviewTTL, negative: never.
	AccessReviewTTL time.Duration
	// CSRSigners, when set, limits the CSR controller to these kubelet signers (see
	// csr.Controller.Signers); default both.
	CSRSigners []string
	// OnIssued, when set, is called after a certificate was issued.
	OnIssued func(csrName string)
	// InitializeNodes turns on (on the leader) the node initializer: it removes the
	// uninitialized taint of Nodes whose kubelet runs with an external cloud provider,
	// once the Node matches its instance in Nodes. Leave it off where a cloud
	// controller manager does that; the deploy roles do not grant it nodes/update,
	// which it needs.
	InitializeNodes bool
	// NodeWorkers is how many Nodes the initializer checks at once; default
	// DefaultNodeWorkers.
	NodeWorkers int
	// OnAuthenticated, when set, is called with the username of every token the
	// webhook accepts.
	OnAuthenticated func(username string)

	// WebhookListener, when set, turns on the TokenReview webhook, served over TLS with
	// WebhookTLS at /authenticate. Verifier checks tokens; Instances is the instance
	// inventory for {{EC2PrivateDNSName}}.
	// WebhookTLS should require client certificates of kube-apiserver's client CA
	// (httpserver.MutualTLS); WebhookLimits bounds the webhook's timeouts and the
	// requests it handles at once (zero fields: httpserver's defaults).
	WebhookListener net.Listener
	WebhookTLS      *tls.Config
	WebhookLimits   httpserver.Limits
	Verifier        *authn.Verifier
	Instances       authn.Instances
	// InstanceProofs checks nodes' instance identity documents (nil: none checked).
	InstanceProofs *authn.InstanceProofs
	// Roles gives a role's unique ID, pinned on a NodeAccessEntry's first use; default
	// Instances when it has a RoleID method (the EC2 inventory), else no pinning.
	Roles RoleIDs

	// LeaderElection, when set, runs the leader's parts only while this replica holds
	// the Lease; nil runs them at once (a single replica).
	LeaderElection *LeaderElection
	// InstallRBAC applies nodejoin's roles and bindings at start, binding the
	// controller's roles to Controller when set. InstallCRDs applies NodeAccessEntry.
	InstallRBAC bool
	Controller  *rbacv1.Subject
	InstallCRDs bool
	// ChartRBAC leaves nodejoin's core roles and bindings (rbac.For) to the chart,
	// deployed beside this process, which owns them; InstallRBAC then applies only
	// those of the parts this process runs (add-ons, node groups, access policies).
	ChartRBAC bool
	// TokenCleanupInterval is how often the leader deletes expired bootstrap tokens.
	// Default 10 minutes; negative turns the cleanup off.
	TokenCleanupInterval time.Duration

	// MetricsListener serves /metrics; HealthListener serves /healthz and /readyz.
	MetricsListener net.Listener
	HealthListener  net.Listener
	// PprofListener, when set, serves net/http/pprof's /debug/pprof/ (CPU and heap
	// profiles for `nodejoin bench join --profile`). Never expose it beyond loopback.
	PprofListener net.Listener
	// OnStarted, when set, is called once RBAC and CRDs are installed, the caches are
	// filled and every part runs.
	OnStarted func()

	// Addons, when set with add-ons enabled, makes the leader apply them at start and
	// again whenever one is deleted or changed (addonInstaller), as EKS's cluster
	// bootstrap does. With InstallRBAC and Controller, the roles that allows
	// (rbac.ForAddons) are installed too. AddonsResync is how often they are applied
	// anyway; default DefaultAddonsResync.
	Addons       *addons.Options
	AddonsResync time.Duration
	addonObjects []runtime.Object

	// NodeGroups, when set, runs the NodeGroup controller on the leader
	// (internal/nodegroup); its Log and Registry default to the manager's. With
	// InstallCRDs the NodeGroup CRD is applied too, and with InstallRBAC and Controller
	// the role it needs (rbac.ForNodeGroups).
	NodeGroups *nodegroup.Options

	// AccessPolicies binds the access policies of STANDARD access entries: the leader
	// runs rbac.AccessPolicyController (namespace scopes), and with InstallRBAC the
	// cluster-scope bindings (and with Controller the role it needs) of
	// rbac.ForAccessPolicies are applied.
	AccessPolicies bool
}

// LeaderElection configures the Lease the leader holds.
type LeaderElection struct {
	// Namespace and Name of the Lease. Defaults kube-system, nodejoin-controller.
	Namespace, Name string
	// Identity names this replica (its pod or host name). Required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod; defaults 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run runs the configured parts until ctx ends or one of them fails. It closes the
// listeners it was given. A replica that loses the Lease returns an error: its
// process restarts and campaigns again, as controller-runtime's managers do.
func Run(ctx context.Context, cfg Config) error {
	err := run(ctx, &cfg)
	for _, l := range []net.Listener{cfg.WebhookListener, cfg.MetricsListener, cfg.HealthListener, cfg.PprofListener} {
		if l != nil {
			_ = l.Close()
		}
	}
	return err
}

func run(ctx context.Context, cfg *Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	if err := cfg.completeAddons(); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(protobufREST(cfg.REST))
	if err != nil {
		return err
	}
	if err := cfg.install(ctx, client); err != nil {
		return err
	}
	mgr, err := newManager(cfg, client)
	if err != nil {
		return err
	}
	ready := healthz.Ping
	if cfg.WebhookListener != nil {
		entries, err := webhook(ctx, cfg, mgr, client)
		if err != nil {
			return err
		}
		if entries != nil {
			ready = entries.Ready
		}
	}
	if err := addServers(cfg, mgr, ready); err != nil {
		return err
	}
	if err := addLeaderParts(cfg, mgr, client); err != nil {
		return err
	}
	if cfg.OnStarted != nil {
		// Runnables that need no election start once the caches are filled.
		if err := mgr.Add(notElected(func(context.Context) error { cfg.OnStarted(); return nil })); err != nil {
			return err
		}
	}
	csrMode := map[bool]string{true: "sign", false: "off"}[cfg.Signer != nil]
	if cfg.ApproveOnly {
		csrMode = "approve"
	}
	cfg.Log.Info("starting", "csr", csrMode, "csrWorkers", cfg.CSRWorkers, "webhook", cfg.WebhookListener != nil, "addons", len(cfg.addonObjects) > 0,
		"nodegroups", cfg.NodeGroups != nil, "leaderElection", cfg.LeaderElection != nil)
	return mgr.Start(ctx)
}

// complete fills in defaults and checks that the parts asked for have what they need.
func (cfg *Config) complete() error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.TokenCleanupInterval == 0 {
		cfg.TokenCleanupInterval = 10 * time.Minute
	}
	if cfg.CSRWorkers <= 0 {
		cfg.CSRWorkers = DefaultCSRWorkers
	}
	if cfg.NodeWorkers <= 0 {
		cfg.NodeWorkers = DefaultNodeWorkers
	}
	switch {
	case cfg.REST == nil:
		return errors.New("no cluster configuration")
	case cfg.runsNothing():
		return errors.New("nothing to run: neither CSR signing nor the webhook is configured")
	case cfg.csrController() && cfg.Nodes == nil:
		return errors.New("CSR approval needs an instance inventory")
	case cfg.WebhookListener != nil && (cfg.Verifier == nil || cfg.Instances == nil || cfg.WebhookTLS == nil):
		return errors.New("the webhook needs a token verifier, an instance inventory and a serving certificate")
	}
	if le := cfg.LeaderElection; le != nil {
		if le.Namespace == "" {
			le.Namespace = metav1.NamespaceSystem
		}
		if le.Name == "" {
			le.Name = rbac.LeaseName
		}
		if le.LeaseDuration == 0 {
			le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
		}
		if le.Identity == "" {
			return errors.New("leader election needs an identity for this replica")
		}
	}
	return nil
}

// completeAddons renders the add-ons asked for.
func (cfg *Config) completeAddons() error {
	if cfg.Addons == nil || len(cfg.Addons.Enabled) == 0 {
		return nil
	}
	objs, err := addons.Objects(*cfg.Addons)
	if err != nil {
		return fmt.Errorf("add-ons: %w", err)
	}
	cfg.addonObjects = objs
	if cfg.AddonsResync <= 0 {
		cfg.AddonsResync = DefaultAddonsResync
	}
	return nil
}

// Scheme is the types nodejoin-controller reads: Kubernetes' own and nodejoin.io's.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := nodejoinv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// newManager makes the controller-runtime manager. Its own metrics server and health
// probes are off: they are served on the listeners given (addServers).
func newManager(cfg *Config, client kubernetes.Interface) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	opts := ctrl.Options{
		Scheme:  scheme,
		Logger:  logr.FromSlogHandler(cfg.Log.Handler()),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several managers may run in one process (tests, a sandbox with replicas).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if le := cfg.LeaderElection; le != nil {
		opts.LeaderElection = true
		opts.LeaderElectionNamespace, opts.LeaderElectionID = le.Namespace, le.Name
		opts.LeaderElectionResourceLockInterface = &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		}
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod
		// A replica that stops releases the Lease, so a successor need not wait for it
		// to expire.
		opts.LeaderElectionReleaseOnCancel = true
	}
	// controller-runtime's packages log through its global logger when no context
	// carries one; the first manager's logger takes it, so that nothing goes to stderr.
	setGlobalLogger.Do(func() { ctrl.SetLogger(opts.Logger) })
	mgr, err := ctrl.NewManager(cfg.REST, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	return mgr, nil
}

// addServers adds the metrics and health endpoints, served on every replica.
func addServers(cfg *Config, mgr ctrl.Manager, ready healthz.Checker) error {
	if l := cfg.MetricsListener; l != nil {
		mux := http.NewServeMux()
		all := prometheus.Gatherers{crmetrics.Registry, cfg.Registry}
		mux.Handle("/metrics", promhttp.HandlerFor(all, promhttp.HandlerOpts{}))
		if err := mgr.Add(server("metrics", mux, l)); err != nil {
			return err
		}
	}
	if l := cfg.PprofListener; l != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		if err := mgr.Add(server("pprof", mux, l)); err != nil {
			return err
		}
	}
	if l := cfg.HealthListener; l != nil {
		mux := http.NewServeMux()
		probe := func(path string, checks map[string]healthz.Checker) {
			h := http.StripPrefix(path, &healthz.Handler{Checks: checks})
			mux.Handle(path, h)
			mux.Handle(path+"/", h)
		}
		probe("/healthz", map[string]healthz.Checker{"ping": healthz.Ping})
		probe("/readyz", map[string]healthz.Checker{"nodeaccessentries": ready})
		if err := mgr.Add(server("health", mux, l)); err != nil {
			return err
		}
	}
	return nil
}

// addLeaderParts adds what only the leader runs: the CSR controller, the node
// initializer, the NodeGroup controller and the cleanup of expired bootstrap tokens.
func addLeaderParts(cfg *Config, mgr ctrl.Manager, client kubernetes.Interface) error {
	rec := mgr.GetEventRecorder(Component)
	if cfg.csrController() {
		ttl := cfg.AccessReviewTTL
		if ttl == 0 {
			ttl = DefaultAccessReviewTTL
		}
		reviews := csr.NewReviewCache(csr.NewAccessReview(client), ttl)
		if err := forgetOnRBACChange(mgr, reviews); err != nil {
			return err
		}
		c := &csr.Controller{
			Client: client,
			Policy: &csr.Policy{Inventory: cfg.Nodes, Review: reviews.Review, MaxExpiration: cfg.MaxExpiration,
				NodeRegistered: csr.NewNodeRegistered(client), Issued: &csr.ConfigMapRecord{Client: client, Instances: instancesByID(cfg.Nodes)},
				ClusterName: cfg.ClusterName, NodeRoles: csr.EntryNodeRoles{Reader: mgr.GetClient()},
				MaxSANs: cfg.MaxSANs, MaxServingPerNode: cfg.MaxServingCSRsPerNode},
			Signer:   cfg.Signer,
			Replica:  replicaName(cfg.LeaderElection),
			Log:      cfg.Log,
			Metrics:  csr.NewMetrics(cfg.Registry),
			OnIssued: cfg.OnIssued,
			Recorder: rec,
			Signers:  cfg.CSRSigners,
		}
		if err := c.SetupWithManager(mgr, cfg.CSRWorkers); err != nil {
			return fmt.Errorf("setting up the CSR controller: %w", err)
		}
	}
	if cfg.InitializeNodes && cfg.Nodes != nil {
		ni := &cloudnode.Controller{Client: client, Inventory: cfg.Nodes, Log: cfg.Log, Recorder: rec}
		if err := ni.SetupWithManager(mgr, cfg.NodeWorkers); err != nil {
			return fmt.Errorf("setting up the node initializer: %w", err)
		}
		nl := &cloudnode.Lifecycle{Client: client, Inventory: cfg.Nodes, Log: cfg.Log, Recorder: rec}
		if err := nl.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the node lifecycle controller: %w", err)
		}
	}
	if cfg.AccessPolicies {
		ap := &rbac.AccessPolicyController{Client: client, Reader: mgr.GetClient(), FieldManager: Component, Log: cfg.Log.With("part", "access-policies")}
		if err := ap.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the access policies' controller: %w", err)
		}
	}
	if cfg.NodeGroups != nil {
		o := *cfg.NodeGroups
		if o.Log == nil {
			o.Log = cfg.Log.With("part", "nodegroups")
		}
		if o.Registry == nil {
			o.Registry = cfg.Registry
		}
		r, err := nodegroup.New(mgr.GetClient(), mgr.GetAPIReader(), rec, o)
		if err != nil {
			return err
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the NodeGroup controller: %w", err)
		}
	}
	if cfg.addonObjects != nil {
		dyn, err := dynamic.NewForConfig(cfg.REST)
		if err != nil {
			return err
		}
		a := &addonInstaller{objects: cfg.addonObjects, client: client, dyn: dyn, log: cfg.Log.With("part", "addons"), resync: cfg.AddonsResync}
		if err := mgr.Add(a); err != nil {
			return err
		}
	}
	if cfg.TokenCleanupInterval > 0 {
		// A RunnableFunc runs on the leader only.
		return mgr.Add(ctrlmanager.RunnableFunc(func(ctx context.Context) error {
			return cleanTokens(ctx, client, cfg.TokenCleanupInterval, cfg.Log)
		}))
	}
	return nil
}

// cleanTokens deletes expired bootstrap tokens now and then every interval.
func cleanTokens(ctx context.Context, client kubernetes.Interface, interval time.Duration, log *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := bootstraptoken.Clean(ctx, client, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("cleaning expired bootstrap tokens failed", "err", err)
		case n > 0:
			log.Info("deleted expired bootstrap tokens", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// awsAuth reads kube-system/aws-auth's role mappings; no ConfigMap means no mappings.
// What is malformed or refused in it is logged and counted, and skipped.
func awsAuth(client kubernetes.Interface, log *slog.Logger, metrics *authn.Metrics) func(ctx context.Context) ([]authn.RoleMapping, error) {
	return authn.AWSAuth{
		Get: func(ctx context.Context) (*corev1.ConfigMap, error) {
			cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "aws-auth", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return cm, err
		},
		Invalid: func(err error) {
			log.Warn("aws-auth ignored in part", "err", err.Error())
			metrics.AWSAuthInvalid.Inc()
		},
	}.Mappings
}

// entriesServed reports whether the API server serves NodeAccessEntries.
func entriesServed(client kubernetes.Interface) (bool, error) {
	gv := nodejoinv1alpha1.GroupVersion.String()
	list, err := client.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == nodejoinv1alpha1.NodeAccessEntryResource.Resource {
			return true, nil
		}
	}
	return false, nil
}

// server is an HTTP endpoint on l that runs on every replica.
func server(name string, h http.Handler, l net.Listener) *ctrlmanager.Server {
	return &ctrlmanager.Server{
		Name:            name,
		Server:          &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		Listener:        l,
		ShutdownTimeout: ptr.To(5 * time.Second),
	}
}

// notElected is a runnable that runs on every replica, once the caches are filled.
type notElected func(ctx context.Context) error

func (f notElected) Start(ctx context.Context) error { return f(ctx) }
func (notElected) NeedLeaderElection() bool          { return false }

// webhook adds the TokenReview endpoint to mgr, and returns the NodeAccessEntry cache
// it maps roles with when the CRD is installed (nil otherwise).
func webhook(ctx context.Context, cfg *Config, mgr ctrl.Manager, client kubernetes.Interface) (*accessEntries, error) {
	var entries *accessEntries
	var entryMappings func(context.Context) ([]authn.RoleMapping, error)
	served, err := entriesServed(client)
	switch {
	case err != nil:
		return nil, err
	case served:
		if entries, err = newAccessEntries(ctx, mgr.GetCache(), cfg.Log); err != nil {
			return nil, err
		}
		entries.client = mgr.GetClient()
		entries.roles = cfg.Roles
		if entries.roles == nil {
			entries.roles, _ = cfg.Instances.(RoleIDs)
		}
		if entries.roles == nil {
			cfg.Log.Warn("no IAM to ask for role IDs: NodeAccessEntries do not pin their role's unique ID")
		}
		entryMappings = entries.Mappings
	default:
		// Without the CRD there can be no entry; aws-auth alone maps roles.
		cfg.Log.Warn("the NodeAccessEntry CRD is not installed: only aws-auth maps roles until it is installed and this process restarts")
	}
	metrics := authn.NewMetrics(cfg.Registry)
	awsAuthMappings := awsAuth(client, cfg.Log, metrics)
	switch watch, err := canWatchAWSAuth(ctx, client); {
	case err != nil:
		return nil, err
	case watch:
		c := newAWSAuthCache(client, cfg.Log, metrics)
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		awsAuthMappings = c.Mappings
	default:
		cfg.Log.Warn("the controller may not list and watch aws-auth and ClusterRoleBindings: aws-auth is read per review, and groups bound to cluster-admin are not refused")
	}
	w := &authn.Webhook{
		Verifier:   cfg.Verifier,
		Mappings:   authn.Combine(entryMappings, awsAuthMappings),
		Instances:  cfg.Instances,
		Log:        cfg.Log,
		Metrics:    metrics,
		OnAccepted: cfg.OnAuthenticated,
		// Pins are per webhook: each replica trusts an instance's first document itself.
		InstanceProofs: cfg.InstanceProofs,
	}
	mux := http.NewServeMux()
	mux.Handle("/authenticate", w)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	cfg.Log.Info("serving token reviews", "address", cfg.WebhookListener.Addr().String(), "cluster", cfg.Verifier.ClusterID)
	limits := cfg.WebhookLimits
	rejected := limits.Rejected
	limits.Rejected = func() {
		metrics.Rejected.Inc()
		if rejected != nil {
			rejected()
		}
	}
	if cfg.WebhookTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		cfg.Log.Warn("the token webhook does not require client certificates: anyone who reaches its port can make it review tokens")
	}
	return entries, mgr.Add(&ctrlmanager.Server{
		Name:            "webhook",
		Server:          httpserver.NewLimited(mux, limits),
		Listener:        tls.NewListener(cfg.WebhookListener, cfg.WebhookTLS),
		ShutdownTimeout: ptr.To(5 * time.Second),
	})
}

// protobufREST returns a copy of cfg whose requests and answers are protobuf, as
// kube-controller-manager's and the kubelet's are: the clientset talks only about
// built-in types, which kube-apiserver encodes in protobuf with less CPU and fewer
// bytes than JSON (the CSR controller's writes during a burst of joining nodes). The
// answer may still be JSON (application/json is accepted too). The controller-runtime
// client picks protobuf for built-in types by itself and JSON for nodejoin's CRDs.
func protobufREST(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	if out.ContentType == "" {
		out.ContentType = runtime.ContentTypeProtobuf
		out.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	return out
}

// forgetOnRBACChange makes the CSR controller forget its remembered
// SubjectAccessReviews whenever a ClusterRole or ClusterRoleBinding is added, changed
// or deleted (certificatesigningrequests are cluster-scoped: only these grant them).
// The handlers are added before the manager starts, and the informers replay every
// object they list to them, so nothing remembered before the informers synced
// survives that.
func forgetOnRBACChange(mgr ctrl.Manager, reviews *csr.ReviewCache) error {
	forget := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { reviews.Forget() },
		UpdateFunc: func(any, any) { reviews.Forget() },
		DeleteFunc: func(any) { reviews.Forget() },
	}
	for _, obj := range []ctrlclient.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
		// Before the manager starts, this registers the informer without waiting.
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err == nil {
			_, err = inf.AddEventHandler(forget)
		}
		if err != nil {
			return fmt.Errorf("watching %T for the SubjectAccessReview cache: %w", obj, err)
		}
	}
	return nil
}
