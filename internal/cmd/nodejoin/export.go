package nodejoin

import (
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func exportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "export",
		Short:   "Copy what a cluster holds out of it",
		Example: "  nodejoin export logs --name demo ./demo-logs",
	}
	var name string
	var output printer.Format
	logs := &cobra.Command{
		Use:   "logs DIR",
		Short: "Copy every log of a cluster into DIR: control plane, controller, and each node's",
		Long: "export logs copies the logs of etcd, kube-apiserver, kube-controller-manager,\n" +
			"kube-scheduler, nodejoin-controller and the process that runs the cluster into\n" +
			"DIR/" + sandbox.ControlPlaneLogDir + ", and each node's nodeadm, kubelet and containerd logs and instance record\n" +
			"into DIR/NODE, and lists what it wrote. The cluster need not be running: a crashed one's\n" +
			"logs stay until `nodejoin down`.",
		Example: "  nodejoin export logs --name demo ./demo-logs\n" +
			"  tar czf demo-logs.tgz -C ./demo-logs .",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := sandbox.ExportLogs(name, args[0])
			if err != nil {
				return err
			}
			return printer.Print(cmd.OutOrStdout(), output, ex, ex.WriteText)
		},
	}
	nameFlag(logs, &name)
	printer.AddFlag(logs.Flags(), &output)
	cmd.AddCommand(logs)
	return cmd
}
