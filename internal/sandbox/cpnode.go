package sandbox

import (
	"context"
	"errors"
	"os/exec"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// controlPlaneNodeStep starts the control-plane nodes (Options.ControlPlaneNodes) once
// the controller has created the node add-ons (kube-proxy among them) it runs.
type controlPlaneNodeStep struct{}

func (controlPlaneNodeStep) Name() string { return "starting the control-plane node" }

func (controlPlaneNodeStep) Run(ctx context.Context, s *state) error {
	sb := s.sandbox
	if !sb.opts.ControlPlaneNode {
		return nil
	}
	return s.progress.Timed("starting the control-plane node", func() error {
		if sb.cluster.Options().Network != controlplane.NetworkNamespace {
			return errors.New("--control-plane-node needs --network namespace (root)")
		}
		binDir := sb.binDir()
		kubelet, err := toolbin.Find(binDir, toolbin.Kubelet)
		if err != nil {
			return err
		}
		containerd, err := exec.LookPath("containerd")
		if err != nil {
			return err
		}
		archives, err := imageArchives(binDir, sb.cluster.StateDir())
		if err != nil {
			return err
		}
		for i := range sb.opts.ControlPlaneNodes {
			n, err := cpnode.Start(ctx, cpnode.Config{Cluster: sb.cluster, Index: i, KubeletPath: kubelet, ContainerdPath: containerd,
				ImageArchives: archives, Region: controller.DefaultRegion, Zone: controller.DefaultRegion + "a"})
			if err != nil {
				return err
			}
			sb.cpNodes = append(sb.cpNodes, n)
			s.progress.Note("control-plane node " + n.Name() + " (" + n.Addr().String() + ") is Ready (logs: " + n.Root() + "/var/log)")
		}
		return nil
	})
}

// binDir is where the pinned binaries and images are: Options.BinDir, else toolbin's.
func (sb *Sandbox) binDir() string {
	if sb.opts.BinDir != "" {
		return sb.opts.BinDir
	}
	return toolbin.Dir()
}
