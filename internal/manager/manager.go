// Package manager runs the parts of nodejoin-controller together: on every replica the
// TokenReview webhook and the NodeAccessEntry watch; on the elected leader only, the CSR
// approver and signer and the bootstrap-token cleanup. nodejoin-controller runs it as a
// process; `nodejoin up` runs it inside its own process.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/leader"
	"github.com/nodejoin/nodejoin/internal/nodeinit"
	"github.com/nodejoin/nodejoin/internal/rbac"
)

// Config says which parts run and with what.
type Config struct {
	// REST connects to the cluster. Required.
	REST *rest.Config
	Log  *slog.Logger
	// Registry receives the metrics; nil makes a private one.
	Registry *prometheus.Registry

	// Signer, when set, turns on CSR approval and signing (on the leader), checking
	// serving certificates against Nodes.
	Signer        *csr.Signer
	Nodes         csr.Inventory
	MaxExpiration time.Duration
	// OnIssued, when set, is called after a certificate was issued.
	OnIssued func(csrName string)
	// InitializeNodes turns on (on the leader) the node initializer: it removes the
	// uninitialized taint of Nodes whose kubelet runs with an external cloud provider,
	// once the Node matches its instance in Nodes. Leave it off where a cloud
	// controller manager does that; the deploy roles do not grant it nodes/update,
	// which it needs.
	InitializeNodes bool
	// OnAuthenticated, when set, is called with the username of every token the
	// webhook accepts.
	OnAuthenticated func(username string)

	// WebhookListener, when set, turns on the TokenReview webhook, served over TLS with
	// WebhookTLS at /authenticate. Verifier checks tokens; Instances is the instance
	// inventory for {{EC2PrivateDNSName}}.
	WebhookListener net.Listener
	WebhookTLS      *tls.Config
	Verifier        *authn.Verifier
	Instances       authn.Instances

	// Election, when set, runs the leader's parts only while this replica holds the
	// Lease; nil runs them at once (a single replica).
	Election *leader.Election
	// InstallRBAC creates or updates nodejoin's roles and bindings at start, binding the
	// controller's roles to Controller when set. InstallCRDs installs NodeAccessEntry.
	InstallRBAC bool
	Controller  *rbacv1.Subject
	InstallCRDs bool
	// TokenCleanupInterval is how often the leader deletes expired bootstrap tokens.
	// Default 10 minutes; negative turns the cleanup off.
	TokenCleanupInterval time.Duration

	// MetricsListener serves /metrics; HealthListener serves /healthz and /readyz.
	MetricsListener net.Listener
	HealthListener  net.Listener
	// OnStarted, when set, is called once RBAC and CRDs are installed and every part runs.
	OnStarted func()
}

// Run runs the configured parts until ctx ends or one of them fails. It closes the
// listeners it was given.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return err
	}
	if err := cfg.install(ctx, client, dyn); err != nil {
		return err
	}
	var handler http.Handler
	var entries *accessEntries
	if cfg.WebhookListener != nil {
		if handler, entries, err = webhook(cfg, client, dyn); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	run := func(name string, fn func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	ready := func() bool { return true }
	if entries != nil {
		ready = entries.informer.HasSynced
		run("NodeAccessEntry watch", entries.Start)
	}
	if handler != nil {
		cfg.Log.Info("serving token reviews", "address", cfg.WebhookListener.Addr().String(), "cluster", cfg.Verifier.ClusterID)
		run("webhook", serve(handler, cfg.WebhookTLS, cfg.WebhookListener))
	}
	if cfg.MetricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
		run("metrics", serve(mux, nil, cfg.MetricsListener))
	}
	if cfg.HealthListener != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
			if !ready() {
				http.Error(rw, "NodeAccessEntries not loaded yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = rw.Write([]byte("ok"))
		})
		run("health", serve(mux, nil, cfg.HealthListener))
	}

	lead := leaderParts(cfg, client)
	if cfg.Election != nil {
		run("leader election", func(ctx context.Context) error { return leader.Run(ctx, client, *cfg.Election, cfg.Log, lead) })
	} else {
		run("controllers", lead)
	}
	cfg.Log.Info("started", "csr", cfg.Signer != nil, "webhook", cfg.WebhookListener != nil, "leaderElection", cfg.Election != nil)
	if cfg.OnStarted != nil {
		cfg.OnStarted()
	}
	<-ctx.Done()
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
	switch {
	case cfg.Signer == nil && cfg.WebhookListener == nil:
		return errors.New("nothing to run: neither CSR signing nor the webhook is configured")
	case cfg.Signer != nil && cfg.Nodes == nil:
		return errors.New("CSR approval needs an instance inventory")
	case cfg.WebhookListener != nil && (cfg.Verifier == nil || cfg.Instances == nil || cfg.WebhookTLS == nil):
		return errors.New("the webhook needs a token verifier, an instance inventory and a serving certificate")
	}
	return nil
}

// install creates or updates nodejoin's roles and CRD, as configured.
func (cfg *Config) install(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) error {
	if cfg.InstallRBAC {
		if err := rbac.Ensure(ctx, client, cfg.Controller); err != nil {
			return fmt.Errorf("installing RBAC: %w", err)
		}
	}
	if cfg.InstallCRDs {
		return EnsureCRD(ctx, dyn, nodejoinv1alpha1.NodeAccessEntryCRD)
	}
	return nil
}

// leaderParts returns what only the leader runs: the CSR controller and the cleanup of
// expired bootstrap tokens.
func leaderParts(cfg Config, client kubernetes.Interface) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 3)
		parts := 0
		if cfg.Signer != nil {
			c := &csr.Controller{
				Client:   client,
				Policy:   &csr.Policy{Inventory: cfg.Nodes, Review: csr.NewAccessReview(client), MaxExpiration: cfg.MaxExpiration},
				Signer:   cfg.Signer,
				Log:      cfg.Log,
				Metrics:  csr.NewMetrics(cfg.Registry),
				OnIssued: cfg.OnIssued,
			}
			parts++
			go func() { errc <- c.Start(ctx) }()
		}
		if cfg.InitializeNodes && cfg.Nodes != nil {
			ni := &nodeinit.Controller{Client: client, Inventory: cfg.Nodes, Log: cfg.Log}
			parts++
			go func() { errc <- ni.Start(ctx) }()
		}
		if cfg.TokenCleanupInterval > 0 {
			parts++
			go func() { errc <- cleanTokens(ctx, client, cfg.TokenCleanupInterval, cfg.Log) }()
		}
		var err error
		for range parts {
			if e := <-errc; e != nil && err == nil {
				err = e
				cancel()
			}
		}
		return err
	}
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
func awsAuth(client kubernetes.Interface) func(ctx context.Context) ([]authn.RoleMapping, error) {
	return authn.AWSAuth{Get: func(ctx context.Context) (*corev1.ConfigMap, error) {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "aws-auth", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return cm, err
	}}.Mappings
}

// entriesServed reports whether the API server serves NodeAccessEntries.
func entriesServed(client kubernetes.Interface) (bool, error) {
	gv := nodejoinv1alpha1.NodeAccessEntryResource.GroupVersion().String()
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

// serve returns a part that serves h on l (over TLS with tlsCfg, when set).
func serve(h http.Handler, tlsCfg *tls.Config, l net.Listener) func(ctx context.Context) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	return func(ctx context.Context) error { return httpserver.Serve(ctx, srv, l) }
}

// webhook builds the TokenReview handler, and the NodeAccessEntry watch it maps roles
// with when the CRD is installed (nil otherwise).
func webhook(cfg Config, client kubernetes.Interface, dyn dynamic.Interface) (http.Handler, *accessEntries, error) {
	var entries *accessEntries
	var entryMappings func(context.Context) ([]authn.RoleMapping, error)
	served, err := entriesServed(client)
	switch {
	case err != nil:
		return nil, nil, err
	case served:
		entries = newAccessEntries(dyn, cfg.Log)
		entryMappings = entries.Mappings
	default:
		// Without the CRD there can be no entry; aws-auth alone maps roles.
		cfg.Log.Warn("the NodeAccessEntry CRD is not installed: only aws-auth maps roles until it is installed and this process restarts")
	}
	w := &authn.Webhook{
		Verifier:   cfg.Verifier,
		Mappings:   authn.Combine(entryMappings, awsAuth(client)),
		Instances:  cfg.Instances,
		Log:        cfg.Log,
		Metrics:    authn.NewMetrics(cfg.Registry),
		OnAccepted: cfg.OnAuthenticated,
	}
	mux := http.NewServeMux()
	mux.Handle("/authenticate", w)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	return mux, entries, nil
}
