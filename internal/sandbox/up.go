package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// Sandbox is a cluster this process runs.
type Sandbox struct {
	opts Options
	log  *slog.Logger

	cluster    *controlplane.Cluster
	controller *controller.Controller
	cpNodes    []*cpnode.Node // Options.ControlPlaneNodes

	mu       sync.Mutex // serializes AddNodes; guards nodes
	nodes    []Node
	lmu      sync.Mutex         // guards launcher, and controller while Start sets it
	launcher *launcher.Launcher // nil until nodes are launched

	stopOnce sync.Once
	stopErr  error
}

// Start creates the cluster: it runs the creation steps in order and returns once every
// node is Ready. On failure it stops what it started and removes the cluster.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	// A cluster of this name is left alone: nothing below may remove it.
	if err := controlplane.EnsureNoCluster(opts.StateDir); err != nil {
		return nil, err
	}
	s := &Sandbox{opts: opts, log: opts.Log}
	st := &state{sandbox: s, progress: progress.NewReporter(opts.Progress)}
	for _, step := range creationSteps() {
		if err := step.Run(ctx, st); err != nil {
			err = fmt.Errorf("%s: %w", step.Name(), err)
			if rmErr := s.remove(context.WithoutCancel(ctx)); rmErr != nil {
				err = errors.Join(err, rmErr)
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("cluster %s: start interrupted", opts.Name)
			}
			return nil, fmt.Errorf("starting cluster %s: %w", opts.Name, err)
		}
	}
	return s, nil
}

// remove stops what a failed start started and removes the cluster's state.
func (s *Sandbox) remove(ctx context.Context) error {
	return errors.Join(s.Stop(ctx), destroy(ctx, s.opts.StateDir, s.opts.Name))
}

// Info describes the sandbox.
func (s *Sandbox) Info() Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cluster
	gk := s.opts.groupKubelet
	return Cluster{
		Name: c.Name(), Running: true, PID: os.Getpid(), Network: string(c.Options().Network),
		Endpoint: c.Endpoint(), Kubeconfig: c.KubeconfigPath(), StateDir: c.StateDir(),
		LogDir: filepath.Join(c.StateDir(), "logs"), Nodes: append([]Node{}, s.nodes...), AWS: s.awsAccess(),
		NodeGroupKubelet: &gk,
	}
}

// awsAccess is how to reach the local AWS, once the controller has started it.
func (s *Sandbox) awsAccess() *AWSAccess {
	if s.controller == nil {
		return nil
	}
	a := s.controller.AWS()
	return &a
}

// Failed is closed when the control plane or the controller stopped on its own; Err
// then says why.
func (s *Sandbox) Failed() <-chan struct{} { return s.controller.Failed() }

// Err is why the sandbox failed, once Failed is closed.
func (s *Sandbox) Err() error { return s.controller.Err() }

// Stop stops the nodes, then the controller, then the control plane. It leaves the
// state directory (and its logs); Delete removes it.
func (s *Sandbox) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		l := s.currentLauncher()
		var errs []error
		if l != nil {
			if err := l.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the nodes: %w", err))
			}
		}
		for _, n := range s.cpNodes {
			if err := n.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the control-plane node %s: %w", n.Name(), err))
			}
		}
		if s.controller != nil {
			if err := s.controller.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping nodejoin-controller and the local cloud: %w", err))
			}
		}
		if s.cluster != nil {
			if err := s.cluster.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}
