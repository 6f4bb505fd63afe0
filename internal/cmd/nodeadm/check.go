package nodeadm

import (
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

func checkCommand() *cobra.Command {
	var (
		src     bootstrap.Sources
		kubelet string
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Read, merge and validate the configuration; list every problem with its location",
		Example: `  # The instance's user data, as init reads it
  nodeadm config check

  # A NodeConfig file before it goes into a launch template
  nodeadm config check -c file://nodeconfig.yaml

  # Its feature gates against the kubelet the node will run
  nodeadm config check -c file://nodeconfig.yaml --kubelet-path ./kubelet-v1.37.1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bootstrap.Check(cmd.Context(), src.List, kubelet, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	src.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&kubelet, "kubelet-path", "", "kubelet binary that spec.kubelet.config.featureGates are checked against (default: kubelet in PATH; without one they are not checked)")
	return cmd
}

func dumpCommand() *cobra.Command {
	var (
		src    bootstrap.Sources
		format string
	)
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "Print the merged configuration as a NodeConfig",
		Example: `  # What bootstrap.sh-style or eksctl user data means as a NodeConfig
  nodeadm config dump -c file://user-data.sh

  # User data merged with a drop-in directory, as JSON
  nodeadm config dump -o json -c imds://user-data -c file:///etc/eks/nodeadm.d/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bootstrap.Dump(cmd.Context(), src.List, format, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	src.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&format, "output", "o", "yaml", "yaml or json")
	return cmd
}

func explainCommand() *cobra.Command {
	var src bootstrap.Sources
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Say what each part of the user data is and what nodeadm does with it",
		Example: `  # The instance's user data
  nodeadm userdata explain

  # A MIME multipart file from a launch template
  nodeadm userdata explain -c file://user-data.mime`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bootstrap.Explain(cmd.Context(), src.List, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	src.AddFlags(cmd.Flags())
	return cmd
}
