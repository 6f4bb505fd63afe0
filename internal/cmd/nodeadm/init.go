package nodeadm

import (
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

func initCommand() *cobra.Command {
	o := &bootstrap.InitOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Configure this node from its configuration sources and start its daemons",
		Long: "init runs two phases. config: read and merge the configuration, read instance metadata,\n" +
			"and write the node's files atomically (a file already right is left alone). run: (re)start\n" +
			"containerd, then the kubelet. --skip skips a phase.",
		Example: `  # Configure this host from its user data and start containerd and the kubelet
  sudo nodeadm init

  # Write the files only, from user data and a local drop-in directory
  sudo nodeadm init --skip run -c imds://user-data -c file:///etc/eks/nodeadm.d/

  # A local instance: files under a directory root, daemons as plain processes
  nodeadm init --root /var/lib/nodejoin/instances/i-1 --daemon-manager process \
    --kubelet-path /usr/local/bin/kubelet --containerd-path /usr/local/bin/containerd

  # After editing the configuration, restart only the kubelet
  sudo nodeadm init --daemon kubelet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), cmd.OutOrStdout()) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
