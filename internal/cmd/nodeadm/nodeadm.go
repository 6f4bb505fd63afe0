// Package nodeadm is the command line of the node agent that runs on every node at boot:
// its commands and their help. The work, and the options' flags, are
// internal/nodeadm/bootstrap's.
package nodeadm

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
)

// Run runs nodeadm with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodeadm",
		Short: "Bootstrap a Kubernetes worker node from its user data",
		Long: "nodeadm reads a node's user data — NodeConfig, bootstrap.sh calls, eksctl cloud-config or\n" +
			"Bottlerocket settings — writes the kubelet's and containerd's configuration and starts them,\n" +
			"so that the node joins its cluster.",
		Example: `  # At boot (as the nodeadm-config and nodeadm-run units do): configure and start the node
  nodeadm init

  # Check the user data first, with the problems and where they are
  nodeadm config check

  # Log as JSON, with client and debug detail
  nodeadm init --log-format json -v 4`,
	}
	config := &cobra.Command{Use: "config", Short: "Check or print the node configuration",
		Example: "  nodeadm config check -c file:///etc/eks/nodeadm.d/\n  nodeadm config dump -o json"}
	config.AddCommand(checkCommand(), dumpCommand())
	ud := &cobra.Command{Use: "userdata", Short: "Inspect user data",
		Example: "  nodeadm userdata explain -c file://user-data.mime"}
	ud.AddCommand(explainCommand())
	root.AddCommand(initCommand(), signalCommand(), getTokenCommand(), config, ud)
	return cli.Execute(ctx, root, args, stdout, stderr)
}
