// Package nodejoin is the operator CLI `nodejoin`: its commands, their flags and help.
// The work is done by internal/sandbox (local clusters), internal/nodegroup/client (node
// groups) and internal/bench; each result is rendered by its own type's methods.
package nodejoin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

// Run runs nodejoin with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.Execute(ctx, rootCommand(), args, stdout, stderr)
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "nodejoin",
		Short: "Run local Kubernetes clusters whose nodes join the way EKS nodes do",
		Example: "  # a cluster with two nodes, in the background\n" +
			"  nodejoin up --nodes 2 --detach\n" +
			"  nodejoin get nodes\n" +
			"  nodejoin down",
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(createCommand(), describeCommand(), scaleCommand(), upgradeCommand(), deleteCommand())
	root.AddCommand(upCommand(), downCommand(), kubeconfigCommand(),
		addCommand(), getCommand(), diagnoseCommand(), exportCommand(), serveCommand(), imageCommand(),
		benchCommand(), awsEnvCommand())
	root.AddCommand(userdataCommand())
	return root
}

func nameFlag(cmd *cobra.Command, name *string) {
	cmd.Flags().StringVar(name, "name", controlplane.DefaultName, "cluster name")
}

func kubeconfigCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "kubeconfig",
		Short:   "Print the path of a running cluster's admin kubeconfig",
		Example: "  kubectl --kubeconfig $(nodejoin kubeconfig --name demo) get nodes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := sandbox.Get(name)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), c.Kubeconfig)
			return err
		},
	}
	nameFlag(cmd, &name)
	return cmd
}

func downCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a cluster and remove everything it left: processes, network namespace, state",
		Long: "down stops the named cluster and removes its state directory. It also cleans up after a\n" +
			"cluster whose `up` crashed or was killed. Removing a cluster that does not exist is not an error.",
		Example: "  nodejoin down --name demo",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			d, err := sandbox.Delete(cmd.Context(), name)
			if err != nil {
				return err
			}
			if !d.Existed {
				_, err := fmt.Fprintf(out, "cluster %s: nothing to remove\n", name)
				return err
			}
			if d.StoppedPID != 0 {
				fmt.Fprintf(out, "stopped cluster %s (pid %d)\n", name, d.StoppedPID)
			}
			_, err = fmt.Fprintf(out, "cluster %s removed\n", name)
			return err
		},
	}
	nameFlag(cmd, &name)
	return cmd
}
