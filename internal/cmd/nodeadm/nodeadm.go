// Package nodeadm is the node agent's command line: it runs on every node at boot.
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
		Long: "nodeadm reads a node's user data, writes the kubelet's and containerd's configuration\n" +
			"and starts them, so that the node joins its cluster.",
	}
	return cli.Execute(ctx, root, args, stdout, stderr)
}
