package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
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
	// A user's user data tells its own family, unless one is asked for.
	sniff := len(o.UserData) > 0 && o.AMIFamily == ""
	o = o.withDefaults(s.opts.Nodes)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(o.UserData) > 0 {
		if err := CheckUserData(o.UserDataSource, o.UserData); err != nil {
			return nil, err
		}
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
	if len(o.UserData) > 0 && l.Identity() == instance.IdentityBootstrapToken {
		return nil, &OptionError{"user-data", o.UserDataSource, "this cluster's nodes join with bootstrap tokens (`nodejoin up --identity bootstrap-token`), which a user's own user data does not carry; use a cluster of aws-iam identity"}
	}
	req := o.request()
	if sniff {
		req.AMIFamily = ""
	}
	nodes, err := l.Run(ctx, req, rep)
	if err != nil {
		return nil, err
	}
	s.nodes = append(s.nodes, nodes...)
	return nodes, writeNodes(s.opts.StateDir, s.nodes)
}

// request is what the launcher needs of o.
func (o NodeOptions) request() launcher.Request {
	return launcher.Request{Count: o.Count, InstanceType: o.InstanceType, AMIFamily: o.AMIFamily, KubeletFlags: o.KubeletFlags,
		CredentialsOf: o.CredentialsOf, ClaimAddress: o.ClaimAddress, Timeout: o.Timeout,
		UserData: o.UserData, UserDataSource: o.UserDataSource}
}

// CheckUserData checks a user's own user data before it is sent to the cluster's
// process: within EC2's 16 KiB and, unless gzip data, template text naming only the
// fields of launcher.UserDataFields. source names it in errors.
func CheckUserData(source string, data []byte) error { return launcher.CheckUserData(source, data) }

// ReadUserData reads a user's own user data from path, or from stdin when path is "-",
// and checks it (CheckUserData). source names it in errors.
func ReadUserData(stdin io.Reader, path string) (data []byte, source string, err error) {
	source = path
	if path == "-" {
		source = "(standard input)"
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, source, fmt.Errorf("reading the user data: %w", err)
	}
	return data, source, CheckUserData(source, data)
}

// UserDataFieldNames lists the template fields a user's user data may use.
func UserDataFieldNames() []string { return launcher.UserDataFieldNames() }

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
	group := s.opts.groupKubelet.Kubelet
	if o.Count == 0 && o.Kubelet == "" && group != "" {
		o.Kubelet = group
	}
	l, err := launcher.New(ctx, launcher.Config{
		Cluster: s.cluster, Controller: s.controller, BinDir: s.opts.BinDir,
		Kubelet: o.Kubelet, GroupKubelet: group, Identity: o.Identity,
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
