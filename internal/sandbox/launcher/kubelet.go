package launcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/kubeletsim"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// RealKubeletMissing lists what this process lacks to run real kubelets, in the words
// of a user's fix (root, the cluster's network namespace, the host packages of `make
// deps`, the kubelet of `make tools` in binDir); empty when real kubelets can run.
func RealKubeletMissing(network controlplane.Network, binDir string) []string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if network == controlplane.NetworkLoopback {
		missing = append(missing, "the cluster's network namespace (--network namespace)")
	}
	for _, bin := range []string{"containerd", "runc", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "the CNI plugins in /usr/lib/cni")
	}
	if binDir == "" {
		binDir = toolbin.Dir()
	}
	if _, err := toolbin.Find(binDir, toolbin.Kubelet); err != nil {
		missing = append(missing, "the kubelet in "+binDir+" (`make tools`)")
	}
	return missing
}

// resolveKubelet picks the kubelet kind: real when this process can run real kubelets,
// otherwise sim, with the reason.
func resolveKubelet(asked instance.KubeletKind, network controlplane.Network, binDir string) (instance.KubeletKind, string, error) {
	switch asked {
	case instance.KubeletSim:
		return instance.KubeletSim, "", nil
	case instance.KubeletReal, "":
	default:
		return "", "", fmt.Errorf("kubelet %q: want real or sim", asked) // Options validated it
	}
	missing := RealKubeletMissing(network, binDir)
	if len(missing) == 0 {
		return instance.KubeletReal, "", nil
	}
	if asked == instance.KubeletReal {
		return "", "", fmt.Errorf("--kubelet real needs %s; run `make deps` as root, or use --kubelet sim", strings.Join(missing, ", "))
	}
	return instance.KubeletSim, "real kubelets need " + strings.Join(missing, ", ") + " (install with `make deps` as root): using simulated kubelets", nil
}

// nodeadmPath finds nodeadm beside this executable, else among the tools.
func nodeadmPath() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), toolbin.Nodeadm)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := toolbin.Find(toolbin.Dir(), toolbin.Nodeadm)
	if err != nil {
		return "", fmt.Errorf("%w (build it with `make build`)", err)
	}
	return p, nil
}

// simRunner runs a simulated kubelet for an instance, as nodeadm would configure the
// real one: the instance's credential plugin or bootstrap token, its addresses and
// provider ID, --cloud-provider=external, and the labels and taints of its user data
// (--node-labels, --register-with-taints). Each logs to logs/kubeletsim/NODE.log.
func (lr *Launcher) simRunner() instance.SimRunner {
	return func(ctx context.Context, n instance.SimNode) error {
		if err := os.MkdirAll(lr.simLogDir, 0o700); err != nil {
			return err
		}
		path := filepath.Join(lr.simLogDir, n.NodeName+".log")
		logf, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer func() { _ = logf.Close() }()
		err = kubeletsim.Run(ctx, kubeletsim.Config{
			NodeName: n.NodeName, InternalIP: n.InternalIP, InternalDNS: n.NodeName, ProviderID: n.ProviderID,
			InstanceType: n.InstanceType, Zone: n.Zone, Region: n.Region,
			Labels: n.Labels, RegisterWithTaints: n.Taints,
			Server: n.Server, CAData: n.CAPEM, Exec: n.Exec, BootstrapToken: n.BootstrapToken,
			ExternalCloudProvider: true,
			Log:                   slog.New(slog.NewTextHandler(logf, nil)),
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (log: %s)", err, path)
		}
		return nil
	}
}
