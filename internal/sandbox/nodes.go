package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// NodeRoleName is the IAM role (and instance profile) of a cluster's instances: those
// `up` and `add node` launch, and those of node groups, whose launch templates default
// to it.
func NodeRoleName(cluster string) string { return launcher.NodeRole(cluster) }

// AddNodes launches more instances, with Start's node options for what o leaves out,
// and waits until they are Ready.
func (s *Sandbox) AddNodes(ctx context.Context, o NodeOptions, onProgress Progress) ([]Node, error) {
	o = o.withDefaults(s.opts.Nodes)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := progress.NewReporter(onProgress)
	l, err := s.ensureLauncher(ctx, rep)
	if err != nil {
		return nil, err
	}
	if o.Identity != l.Identity() {
		return nil, &OptionError{"identity", string(o.Identity), fmt.Sprintf("this cluster's nodes use %s (set by `nodejoin up --identity`)", l.Identity())}
	}
	if o.Kubelet != "" && o.Kubelet != l.Kubelet() {
		return nil, &OptionError{"kubelet", string(o.Kubelet), fmt.Sprintf("this cluster runs %s kubelets", l.Kubelet())}
	}
	nodes, err := l.Run(ctx, o.request(), rep)
	if err != nil {
		return nil, err
	}
	s.nodes = append(s.nodes, nodes...)
	return nodes, writeNodes(s.opts.StateDir, s.nodes)
}

// request is what the launcher needs of o.
func (o NodeOptions) request() launcher.Request {
	return launcher.Request{Count: o.Count, InstanceType: o.InstanceType, AMIFamily: o.AMIFamily, KubeletFlags: o.KubeletFlags,
		CredentialsOf: o.CredentialsOf, ClaimAddress: o.ClaimAddress, Timeout: o.Timeout}
}

// ensureLauncher returns the cluster's launcher, starting it with Start's node options
// when nothing started it yet.
func (s *Sandbox) ensureLauncher(ctx context.Context, rep *progress.Reporter) (*launcher.Launcher, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.launcher != nil {
		return s.launcher, nil
	}
	if s.cluster == nil || s.controller == nil {
		return nil, errors.New("the cluster is not started")
	}
	if rep == nil {
		rep = progress.NewReporter(nil)
	}
	o := s.opts.Nodes
	if o.Count == 0 && o.Kubelet == "" && s.opts.NodeGroupKubelet != "" {
		o.Kubelet = s.opts.NodeGroupKubelet
	}
	l, err := launcher.New(ctx, launcher.Config{
		Cluster: s.cluster, Controller: s.controller, BinDir: s.opts.BinDir,
		Kubelet: o.Kubelet, Identity: o.Identity,
		ImageArchives: func(binDir string) ([]string, error) { return imageArchives(binDir, s.cluster.StateDir()) },
		Log:           s.log,
	}, rep)
	if err != nil {
		return nil, err
	}
	s.launcher = l
	return l, nil
}

// currentLauncher returns the launcher, nil when none started.
func (s *Sandbox) currentLauncher() *launcher.Launcher {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return s.launcher
}
