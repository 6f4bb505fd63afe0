package sandbox

import (
	"context"
	"net/netip"
	"time"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// step is one step of creating a cluster. Start runs creationSteps in order and stops
// at the first error; Sandbox.Stop then undoes whatever the earlier steps started.
type step interface {
	Name() string
	Run(ctx context.Context, s *state) error
}

// state is what the steps share: the sandbox they fill in, and where progress goes.
type state struct {
	sandbox  *Sandbox
	progress *progress.Reporter
}

// creationSteps are the steps of Start, in order.
func creationSteps() []step {
	return []step{
		controlPlaneStep{},     // certificates, network, etcd, kube-apiserver, kubeconfig, KCM, scheduler
		controllerStep{},       // local cloud (STS, EC2, IAM) and nodejoin-controller
		controlPlaneNodeStep{}, // the control-plane node (Options.ControlPlaneNode), cpnode.go
		deployControllerStep{}, // the controller's chart on it (Options.ControlPlaneNode), deploy.go
		nodeAccessStep{},       // the nodes' access entry or bootstrap token, the instance provider
		nodesStep{},            // launch the instances, wait until every node is Ready
		controlSocketStep{},
	}
}

// controlPlaneStep starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, with kube-apiserver sending unknown tokens to the controller's webhook.
type controlPlaneStep struct{}

func (controlPlaneStep) Name() string { return "starting the control plane" }

func (controlPlaneStep) Run(ctx context.Context, s *state) error {
	o := s.sandbox.opts
	c, err := controlplane.Start(ctx, controlplane.Options{
		Name:          o.Name,
		StateDir:      o.StateDir,
		BinDir:        o.BinDir,
		Network:       o.Network,
		NodeCIDR:      o.NodeCIDR,
		ServiceCIDR:   o.ServiceCIDR,
		APIPort:       o.APIPort,
		UnsafeNoFsync: o.UnsafeNoFsync,
		Log:           o.Log,
		OnStep: func(step string, phase controlplane.StepPhase, elapsed time.Duration) {
			kind := map[controlplane.StepPhase]EventKind{controlplane.StepStarted: StepStarted, controlplane.StepDone: StepDone, controlplane.StepFailed: StepFailed}[phase]
			s.progress.Report(Event{Kind: kind, Step: step, Elapsed: elapsed})
		},
		// nodejoin-controller, run by this process, authenticates node tokens.
		TokenWebhook: true,
		// With a control-plane node, kube-controller-manager's kubelet signers sign
		// what the deployed controller approves (the chart's default, csr.mode approve).
		KubeletSigners: o.ControlPlaneNode,
		// and its replicas serve the token webhook behind the chart's Service.
		TokenWebhookService: deployedWebhookService(o),
	})
	if c != nil && err == nil {
		s.sandbox.cluster = c
	}
	return err
}

// controllerStep starts the local cloud and nodejoin-controller in this process.
type controllerStep struct{}

func (controllerStep) Name() string { return "starting nodejoin-controller" }

func (controllerStep) Run(ctx context.Context, s *state) error {
	return s.progress.Timed("starting nodejoin-controller", func() error {
		sb := s.sandbox
		s.progress.Note("node groups' instances get " + sb.opts.groupKubelet.String())
		if err := writeGroupKubelet(sb.opts.StateDir, sb.opts.groupKubelet); err != nil {
			return err
		}
		c, err := controller.Start(ctx, controller.Config{Cluster: sb.cluster,
			// The local cloud's Auto Scaling groups launch local instances.
			Launcher: &asgAdapter{
				ensure:  func(ctx context.Context) (*launcher.Launcher, error) { return sb.ensureLauncher(ctx, nil) },
				current: sb.currentLauncher, kubelet: sb.opts.groupKubelet.Kubelet,
			},
			NodeInstanceProfile: launcher.NodeRole(sb.opts.Name), InstanceLimit: sb.opts.InstanceLimit,
			DHCPDomainName: sb.opts.DHCPDomainName, CertLifetime: sb.opts.CertLifetime,
			// With a control-plane node, the deployed controller's pods settle CSRs.
			Deployed: sb.opts.ControlPlaneNode})
		sb.lmu.Lock() // ensureLauncher reads it for Auto Scaling launches, in another goroutine
		sb.controller = c
		sb.lmu.Unlock()
		return err
	})
}

// nodeAccessStep lets the nodes in: it maps their instance role to the node identity
// (aws-iam) or mints a bootstrap token, and readies the instance provider.
type nodeAccessStep struct{}

func (nodeAccessStep) Name() string { return "preparing node access" }

func (nodeAccessStep) Run(ctx context.Context, s *state) error {
	if s.sandbox.opts.Nodes.Count == 0 {
		return nil
	}
	_, err := s.sandbox.ensureLauncher(ctx, s.progress)
	return err
}

// nodesStep launches the instances and waits until every node is Ready.
type nodesStep struct{}

func (nodesStep) Name() string { return "launching nodes" }

func (nodesStep) Run(ctx context.Context, s *state) error {
	sb := s.sandbox
	if sb.opts.Nodes.Count == 0 {
		return writeNodes(sb.opts.StateDir, nil)
	}
	nodes, err := sb.currentLauncher().Run(ctx, sb.opts.Nodes.request(), s.progress)
	if err != nil {
		return err
	}
	sb.nodes = nodes
	return writeNodes(sb.opts.StateDir, nodes)
}

// controlSocketStep answers AddNodesTo from other processes (Options.Control).
type controlSocketStep struct{}

func (controlSocketStep) Name() string { return "serving the control socket" }

func (controlSocketStep) Run(ctx context.Context, s *state) error {
	if !s.sandbox.opts.Control {
		return nil
	}
	if err := serveControl(ctx, s.sandbox.opts.StateDir, s.sandbox.log, s.sandbox.AddNodes); err != nil {
		// The cluster works without it; only `nodejoin add node` cannot reach it.
		s.progress.Note("warning: `nodejoin add node` will not reach this cluster: " + err.Error())
	}
	return nil
}

// deployedWebhookService is the fixed ClusterIP of the chart's webhook Service when its
// pods serve the token webhook (Options.ControlPlaneNode), invalid otherwise: the
// service range's 21st address, in its static band (kube-dns has the 10th). The cluster
// names it in kube-apiserver's webhook kubeconfig and the webhook's certificate, and the
// chart's Service takes it (deploy.go reads it back from the cluster's options).
func deployedWebhookService(o Options) netip.Addr {
	if !o.ControlPlaneNode {
		return netip.Addr{}
	}
	a := o.ServiceCIDR.Masked().Addr()
	for range 20 {
		a = a.Next()
	}
	return a
}
