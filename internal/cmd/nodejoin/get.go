package nodejoin

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func getCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show what is running: clusters, and a cluster's nodes and node groups",
		Example: "  nodejoin get clusters\n" +
			"  nodejoin get nodes --name demo -o json",
	}
	cmd.AddCommand(getClustersCommand(), getNodesCommand(), getNodeGroupCommand())
	return cmd
}

func getClustersCommand() *cobra.Command {
	var output printer.Format
	cmd := &cobra.Command{
		Use:     "clusters",
		Aliases: []string{"cluster"},
		Short:   "List the local clusters, running or left by a crash",
		Example: "  nodejoin get clusters\n" +
			"  nodejoin get clusters -o yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := sandbox.List()
			if err != nil {
				return err
			}
			return printer.Print(cmd.OutOrStdout(), output, cs, func(w io.Writer) { sandbox.WriteClusters(w, cs) })
		},
	}
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}

func getNodesCommand() *cobra.Command {
	var name string
	var output printer.Format
	var opts sandbox.NodesOptions
	cmd := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "List a running cluster's nodes and how far each has come in joining",
		Long: "get nodes lists the cluster's local instances that its local EC2 has not terminated, with\n" +
			"their node name, instance ID, address, kubelet and identity, and their join state: Ready,\n" +
			"joining (STEP is the step it waits for) or failed (STEP is the step that failed; `nodejoin\n" +
			"diagnose node NAME` says why). A Node counts for the instance its providerID names: a name\n" +
			"a new instance took over from a terminated one shows once, under the new instance.\n" +
			"--terminated lists terminated instances too, in state terminated.",
		Example: "  nodejoin get nodes --name demo\n" +
			"  nodejoin get nodes --name demo -o json\n" +
			"  nodejoin get nodes --name demo --terminated",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := sandbox.Nodes(cmd.Context(), name, opts)
			if err != nil {
				return err
			}
			return printer.Print(cmd.OutOrStdout(), output, ns, func(w io.Writer) { sandbox.WriteNodeStatuses(w, name, ns) })
		},
	}
	nameFlag(cmd, &name)
	cmd.Flags().BoolVar(&opts.Terminated, "terminated", false, "list terminated instances too (state terminated)")
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}
