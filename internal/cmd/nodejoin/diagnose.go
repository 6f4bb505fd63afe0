package nodejoin

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func diagnoseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain why something in a local cluster does not work",
		Example: "  nodejoin diagnose node --name demo ip-198-18-0-11.local.internal\n" +
			"  nodejoin diagnose cluster --name demo",
	}
	var name string
	var output printer.Format
	node := &cobra.Command{
		Use:   "node NODE|INSTANCE",
		Short: "Report each step of one instance's join, and for a failed step the reason and evidence",
		Long: "diagnose node shows, for one local instance (by node name or instance ID), each step of its\n" +
			"join — instance started, nodeadm done, authenticated, client certificate (bootstrap tokens),\n" +
			"Node registered, serving CSR approved, issued, Ready — with its status and, where a step failed\n" +
			"or waits, the reason and the evidence: nodeadm's error, the webhook's decision, the CSR's\n" +
			"condition, the kubelet's last error line — followed by the control plane's health (as\n" +
			"`diagnose cluster` shows it). It exits with status 1 when a step failed.",
		Example: "  nodejoin diagnose node --name demo ip-198-18-0-11.local.internal\n" +
			"  nodejoin diagnose node --name demo i-0123456789abcdef0 -o json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := sandbox.Diagnose(cmd.Context(), name, args[0])
			if err != nil {
				return err
			}
			if err := printer.Print(cmd.OutOrStdout(), output, rep, rep.WriteText); err != nil || !rep.Failed() {
				return err
			}
			return errDiagnosedFailure
		},
	}
	nameFlag(node, &name)
	printer.AddFlag(node.Flags(), &output)
	cmd.AddCommand(node, diagnoseClusterCommand())
	return cmd
}

func diagnoseClusterCommand() *cobra.Command {
	var name string
	var output printer.Format
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Report the health of each control-plane daemon of a local cluster",
		Long: "diagnose cluster asks each control-plane daemon of a local cluster — etcd, kube-apiserver,\n" +
			"kube-controller-manager, kube-scheduler — for its health (/health, /healthz) and shows the\n" +
			"answer with the daemon's PID, how often it was restarted after a crash, and its log. It exits\n" +
			"with status 1 when a daemon is unhealthy. In a cluster started as root the daemons listen in\n" +
			"the cluster's network namespace, so this needs root too.",
		Example: "  nodejoin diagnose cluster --name demo\n" +
			"  nodejoin diagnose cluster --name demo -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := sandbox.DiagnoseCluster(cmd.Context(), name)
			if err != nil {
				return err
			}
			if err := printer.Print(cmd.OutOrStdout(), output, rep, rep.WriteText); err != nil || !rep.Failed() {
				return err
			}
			return errUnhealthyControlPlane
		},
	}
	nameFlag(cmd, &name)
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}

// errUnhealthyControlPlane makes diagnose cluster exit with status 1 after its report.
var errUnhealthyControlPlane = errors.New("a control-plane daemon is unhealthy (see above)")

// errDiagnosedFailure makes diagnose exit with status 1 after its report.
var errDiagnosedFailure = errors.New("a step of the join failed (see above)")
