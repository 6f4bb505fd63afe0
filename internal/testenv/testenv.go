// Package testenv gives an integration test a real control plane — etcd and
// kube-apiserver built from the pinned sources — in a few seconds, with an admin client
// and a way to act as any user or group through impersonation.
//
// Binaries come from `make tools` (the repository's bin/, or $NODEJOIN_BIN_DIR). When
// they are missing a test is skipped with the command to run, except in CI (CI=true),
// where a missing binary fails the test: CI must never pass by skipping.
package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Env is a running control plane for one test.
type Env struct {
	Cluster *controlplane.Cluster
	// Config has cluster-admin rights.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
}

// Option changes the cluster options before the cluster starts.
type Option func(*controlplane.Options)

// WholeControlPlane runs kube-controller-manager and kube-scheduler too.
func WholeControlPlane(o *controlplane.Options) { o.APIServerOnly = false }

// RequireIntegration skips the test under -short, the mode of `make test-unit`.
func RequireIntegration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
}

// BinDir returns the directory with the pinned binaries, skipping (or, in CI, failing)
// the test when any of names is missing.
func BinDir(t testing.TB, names ...string) string {
	t.Helper()
	dir := toolbin.Dir()
	for _, n := range names {
		if _, err := toolbin.Find(dir, n); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI needs every pinned binary: %v", err)
			}
			t.Skipf("skipping: %v", err)
		}
	}
	return dir
}

// Start starts a loopback control plane that is stopped when the test ends. The state
// directory (PKI, logs) lives in the test's temporary directory; on failure the logs'
// location is printed. It runs etcd and kube-apiserver only, unless an option clears
// APIServerOnly (see WholeControlPlane).
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	RequireIntegration(t)
	o := controlplane.Options{
		Name:          "test",
		StateDir:      filepath.Join(t.TempDir(), "cluster"),
		BinDir:        BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer),
		Network:       controlplane.NetworkLoopback,
		UnsafeNoFsync: true,
		ReadyTimeout:  3 * time.Minute,
		APIServerOnly: true,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.APIServerOnly {
		BinDir(t, toolbin.KubeControllerManager, toolbin.KubeScheduler)
	}
	c, err := controlplane.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control-plane logs: %s", filepath.Join(o.StateDir, "logs"))
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	cfg := c.RESTConfig()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Cluster: c, Config: cfg, Client: client}
}

// As returns a client that acts as user in groups, through impersonation by the admin.
// The API server then authorizes, admits and records requests as that user's.
func (e *Env) As(t testing.TB, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// WebhookConfig writes the kubeconfig-format file that points kube-apiserver's token
// webhook (--authentication-token-webhook-config-file) at url, trusting caPEM, and
// returns its path.
func WebhookConfig(t testing.TB, url string, caPEM []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := controlplane.WriteWebhookConfig(path, url, caPEM); err != nil {
		t.Fatal(err)
	}
	return path
}
