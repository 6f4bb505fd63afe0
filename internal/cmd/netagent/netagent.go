// Package netagent is the command line of nodejoin-netagent, the aws-node DaemonSet's
// image: `init` (the init container) and `ipamd` (the main container), and their help.
// Their options and work are internal/netagent's.
package netagent

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/netagent"
)

// Run runs nodejoin-netagent with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin-netagent",
		Short: "The node network add-on: install the CNI plugins, then keep a warm pool of VPC addresses for pods",
		Example: `  # The init container: plugins into the node's CNI bin dir, sysctls
  nodejoin-netagent init --plugins-from /opt/nodejoin/cni --cni-bin-dir /host/opt/cni/bin

  # The main container: IPAM daemon; writes 10-aws.conflist once ready
  nodejoin-netagent ipamd --cni-bin-dir /host/opt/cni/bin --cni-conf-dir /host/etc/cni/net.d --state-dir /var/run/aws-node --log-dir /host/var/log/aws-routed-eni`,
	}
	root.AddCommand(initCommand(), ipamdCommand())
	return cli.Execute(ctx, root, args, stdout, stderr)
}

func initCommand() *cobra.Command {
	var o netagent.InitOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Install the CNI plugins into the node's CNI bin dir atomically and set the kernel parameters pod networking needs",
		Example: `  nodejoin-netagent init --plugins-from /opt/nodejoin/cni --cni-bin-dir /host/opt/cni/bin
  nodejoin-netagent init --plugins-from ./plugins --cni-bin-dir /opt/cni/bin --primary-interface eth0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func ipamdCommand() *cobra.Command {
	var o netagent.IPAMDOptions
	cmd := &cobra.Command{
		Use:   "ipamd",
		Short: "Run the IPAM daemon: warm pool of VPC addresses from the instance's ENIs, served to the CNI plugin; writes the CNI configuration once ready",
		Long: `ipamd reads the instance from instance metadata, keeps a warm pool of secondary IPv4
addresses on its ENIs through the EC2 API (credentials from the default chain; the
endpoint from AWS_ENDPOINT_URL_EC2 if set), serves them to the CNI plugin on
<state-dir>/ipamd.sock and writes <cni-conf-dir>/10-aws.conflist only once the pool
is filled and the socket serves; the file is removed at start and at shutdown.

Environment knobs, as the VPC CNI names them: WARM_ENI_TARGET (1), WARM_IP_TARGET,
MINIMUM_IP_TARGET, MAX_ENI, IP_COOLDOWN_PERIOD (30), AWS_VPC_ENI_MTU / POD_MTU (9001),
AWS_VPC_K8S_CNI_VETHPREFIX (eni), AWS_VPC_K8S_PLUGIN_LOG_FILE, AWS_VPC_K8S_PLUGIN_LOG_LEVEL,
CLUSTER_NAME, DISABLE_LEAKED_ENI_CLEANUP.`,
		Example: `  nodejoin-netagent ipamd --cni-bin-dir /host/opt/cni/bin --cni-conf-dir /host/etc/cni/net.d --state-dir /var/run/aws-node
  WARM_IP_TARGET=2 MINIMUM_IP_TARGET=10 nodejoin-netagent ipamd --metrics-addr 127.0.0.1:61678`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), cmd.Flags())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
