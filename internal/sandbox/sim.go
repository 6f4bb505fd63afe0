package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/kubeletsim"
)

// simRunner runs a simulated kubelet for an instance, as nodeadm would configure the
// real one: the instance's credential plugin or bootstrap token, its addresses and
// provider ID, --cloud-provider=external, and the labels and taints of its user data
// (--node-labels, --register-with-taints). Each logs to logs/kubeletsim/NODE.log.
func (w *workers) simRunner() instance.SimRunner {
	return func(ctx context.Context, n instance.SimNode) error {
		if err := os.MkdirAll(w.simLogDir, 0o700); err != nil {
			return err
		}
		path := filepath.Join(w.simLogDir, n.NodeName+".log")
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
