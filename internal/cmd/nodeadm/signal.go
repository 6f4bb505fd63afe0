package nodeadm

import (
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

func signalCommand() *cobra.Command {
	c := &bootstrap.SignalCommand{}
	cmd := &cobra.Command{
		Use:   "signal",
		Short: "Send the user data's cfn-signal once this node is Ready (after init --cfn-signal detach)",
		Long: "signal sends the CloudFormation signal that `nodeadm init --cfn-signal detach` saved: SUCCESS once\n" +
			"the node's Node is Ready, FAILURE with the reason (also printed as `cfn-signal: FAILURE: …`) when it\n" +
			"is not Ready in time. A node signals once per boot.",
		Example: `  # Started beside the node's boot, after init
  nodeadm init --cfn-signal detach && nodeadm signal --timeout 15m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&c.Root, "root", "/", "the node's file system root, as for init")
	cmd.Flags().DurationVar(&c.Timeout, "timeout", bootstrap.DefaultSignalTimeout, "how long to wait for the Node to be Ready before signalling FAILURE")
	return cmd
}
