package sandbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

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

// ControllerLog is the controller's and the local cloud's log, in the state directory.
const ControllerLog = "logs/nodejoin-controller.log"

// controller is what the sandbox runs in its own process beside etcd and
// kube-apiserver: the local cloud's STS, EC2 and IAM endpoints, and nodejoin-controller,
// whose token webhook kube-apiserver calls and whose CSR approver checks nodes against
// EC2.
type controller struct {
	cloud  *localcloud.Cloud
	failed chan struct{} // closed when the controller or the control plane stopped
	done   chan struct{} // closed when the controller stopped
	err    error         // set before done closes
	mu     sync.Mutex
	cpErr  error // the control plane's failure
	cancel context.CancelFunc
	logf   *os.File
	once   sync.Once
	// authenticated holds every username the webhook has accepted a token of.
	authenticated sync.Map
}

// Authenticated reports whether the webhook has accepted a token of user.
func (c *controller) Authenticated(user string) bool {
	_, ok := c.authenticated.Load(user)
	return ok
}

// startController starts the local cloud and nodejoin-controller for cluster cl; their
// logs go to ControllerLog. This is the one place that wires manager.Config.
func startController(ctx context.Context, cl *controlplane.Cluster) (*controller, error) {
	logPath := filepath.Join(cl.StateDir(), ControllerLog)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", logPath, err)
	}
	log := slog.New(slog.NewTextHandler(logf, nil))
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &controller{failed: make(chan struct{}), done: make(chan struct{}), cancel: cancel, logf: logf}
	fail := func(err error) (*controller, error) {
		cancel()
		_ = logf.Close()
		return nil, err
	}
	if c.cloud, err = localcloud.StartCloud(ctx, localAccount, cl.CA(), log); err != nil {
		return fail(err)
	}
	inv := inventory.NewEC2(c.cloud.ControllerConfig(localRegion), inventory.EC2Options{EC2Endpoint: c.cloud.EC2URL, IAMEndpoint: c.cloud.IAMURL})
	p := cl.PKI()
	cert, err := tls.LoadX509KeyPair(p.TokenWebhook.Cert, p.TokenWebhook.Key)
	if err != nil {
		return fail(fmt.Errorf("loading the token webhook's certificate: %w", err))
	}
	wl, err := cl.ListenTokenWebhook()
	if err != nil {
		return fail(fmt.Errorf("listening for token reviews: %w", err))
	}
	ready := make(chan struct{})
	cfg := manager.Config{
		REST:            cl.RESTConfig(),
		Log:             log,
		Signer:          &csr.Signer{CA: cl.CA()},
		Nodes:           inv,
		Instances:       inv,
		WebhookListener: wl,
		WebhookTLS:      &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Verifier: &authn.Verifier{ClusterID: cl.Name(), STSHosts: []string{strings.TrimPrefix(c.cloud.STSURL, "https://")},
			HTTP: c.cloud.STSHTTPClient()},
		InstallRBAC: true,
		InstallCRDs: true,
		// No cloud controller manager runs here: nodejoin-controller initializes Nodes.
		InitializeNodes: true,
		OnStarted:       func() { close(ready) },
		OnAuthenticated: func(user string) { c.authenticated.Store(user, struct{}{}) },
	}
	go func() {
		c.err = manager.Run(ctx, cfg)
		close(c.done)
		c.fail()
	}()
	go func() {
		select {
		case err := <-cl.Failed():
			c.mu.Lock()
			c.cpErr = err
			c.mu.Unlock()
			c.fail()
		case <-c.done:
		}
	}()
	select {
	case <-ready:
		return c, nil
	case <-c.done:
		_ = c.cloud.Wait()
		return fail(fmt.Errorf("nodejoin-controller: %w (log: %s)", c.err, logPath))
	}
}

func (c *controller) fail() { c.once.Do(func() { close(c.failed) }) }

// failure says why the sandbox failed, once failed is closed.
func (c *controller) failure() error {
	<-c.failed
	c.mu.Lock()
	cpErr := c.cpErr
	c.mu.Unlock()
	if cpErr != nil {
		return cpErr
	}
	<-c.done
	if c.err == nil {
		return errors.New("nodejoin-controller stopped")
	}
	return fmt.Errorf("nodejoin-controller: %w", c.err)
}

// stop stops the controller and the local cloud.
func (c *controller) stop() error {
	c.cancel()
	<-c.done
	err := errors.Join(c.err, c.cloud.Wait())
	_ = c.logf.Close()
	return err
}
