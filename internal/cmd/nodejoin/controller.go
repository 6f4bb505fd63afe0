package nodejoin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/sandbox/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/localcloud"
)

// localAccount and localRegion are the local cloud's account and region.
const (
	localAccount = "000000000000"
	localRegion  = "us-west-2"
)

// controlPlane is what `up` runs in its own process beside etcd and kube-apiserver: the
// local cloud's STS, EC2 and IAM endpoints, and nodejoin-controller, whose token webhook
// kube-apiserver calls and whose CSR approver checks nodes against EC2.
type controlPlane struct {
	Cloud    *localcloud.Cloud
	finished chan struct{}
	err      error // set before finished closes
	stop     context.CancelFunc
	logf     *os.File
	// authenticated holds every username the webhook has accepted a token of.
	authenticated sync.Map
}

// Authenticated reports whether the webhook has accepted a token of user.
func (cp *controlPlane) Authenticated(user string) bool {
	_, ok := cp.authenticated.Load(user)
	return ok
}

// startControlPlane starts the local cloud and the controller for cluster c. Their logs
// go to the cluster's logs/nodejoin-controller.log.
func startControlPlane(ctx context.Context, c *controlplane.Cluster, progress io.Writer) (*controlPlane, error) {
	start := time.Now()
	fmt.Fprintln(progress, " • starting nodejoin-controller (token webhook, CSR approver and signer)")
	logPath := filepath.Join(c.StateDir(), "logs", "nodejoin-controller.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", logPath, err)
	}
	log := slog.New(slog.NewTextHandler(logf, nil))
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cp := &controlPlane{finished: make(chan struct{}), stop: cancel, logf: logf}
	fail := func(err error) (*controlPlane, error) {
		cancel()
		_ = logf.Close()
		fmt.Fprintf(progress, " ✗ starting nodejoin-controller failed after %s\n", time.Since(start).Round(100*time.Millisecond))
		return nil, err
	}
	if cp.Cloud, err = localcloud.StartCloud(ctx, localAccount, c.CA(), log); err != nil {
		return fail(err)
	}
	inv := inventory.NewEC2(cp.Cloud.ControllerConfig(localRegion), inventory.EC2Options{EC2Endpoint: cp.Cloud.EC2URL, IAMEndpoint: cp.Cloud.IAMURL})
	p := c.PKI()
	cert, err := tls.LoadX509KeyPair(p.TokenWebhook.Cert, p.TokenWebhook.Key)
	if err != nil {
		return fail(fmt.Errorf("loading the token webhook's certificate: %w", err))
	}
	wl, err := c.ListenTokenWebhook()
	if err != nil {
		return fail(fmt.Errorf("listening for token reviews: %w", err))
	}
	cfg := manager.Config{
		REST:            c.RESTConfig(),
		Log:             log,
		Signer:          &csr.Signer{CA: c.CA()},
		Nodes:           inv,
		Instances:       inv,
		WebhookListener: wl,
		WebhookTLS:      &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Verifier: &authn.Verifier{ClusterID: c.Name(), STSHosts: []string{strings.TrimPrefix(cp.Cloud.STSURL, "https://")},
			HTTP: cp.Cloud.STSHTTPClient()},
		InstallRBAC: true,
		InstallCRDs: true,
		// No cloud controller manager runs here: nodejoin-controller initializes Nodes.
		InitializeNodes: true,
	}
	ready := make(chan struct{})
	cfg.OnStarted = func() { close(ready) }
	cfg.OnAuthenticated = func(user string) { cp.authenticated.Store(user, struct{}{}) }
	go func() {
		cp.err = manager.Run(ctx, cfg)
		close(cp.finished)
	}()
	select {
	case <-ready:
	case <-cp.finished:
		_ = cp.Cloud.Wait()
		return fail(fmt.Errorf("nodejoin-controller: %w (log: %s)", cp.err, logPath))
	}
	fmt.Fprintf(progress, " ✓ starting nodejoin-controller (%s)\n", time.Since(start).Round(100*time.Millisecond))
	return cp, nil
}

// Finished is closed when the controller has stopped, on its own or by Stop.
func (cp *controlPlane) Finished() <-chan struct{} { return cp.finished }

// Err is why the controller stopped, once Finished is closed.
func (cp *controlPlane) Err() error {
	<-cp.finished
	if cp.err == nil {
		return fmt.Errorf("nodejoin-controller stopped")
	}
	return fmt.Errorf("nodejoin-controller: %w", cp.err)
}

// Stop stops the controller and the local cloud.
func (cp *controlPlane) Stop() error {
	cp.stop()
	<-cp.finished
	err := errors.Join(cp.err, cp.Cloud.Wait())
	_ = cp.logf.Close()
	return err
}
