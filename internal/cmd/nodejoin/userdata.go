package nodejoin

import (
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/nodegroup/client"
)

func userdataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "userdata",
		Short: "Generate node user data",
		Example: "  nodejoin userdata render -f nodegroup.yaml --kubeconfig ~/.kube/config\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cluster-name demo --endpoint https://10.0.0.1:6443 --ca-file ca.crt",
	}
	cmd.AddCommand(userdataRenderCommand())
	return cmd
}

func userdataRenderCommand() *cobra.Command {
	var o client.RenderOptions
	cmd := &cobra.Command{
		Use:   "render -f FILE [--nodegroup NAME]",
		Short: "Print the user data of a node group's instances, or a self-managed node group's CloudFormation template",
		Long: "Render prints the user data a node group's instances boot with. -f is what create nodegroup\n" +
			"takes: an eksctl ClusterConfig or NodeGroup manifests; --nodegroup picks the group when it holds\n" +
			"more than one. The style is the group's spec.template.userDataStyle unless --style says: as EKS\n" +
			"managed node groups (Managed, --style managed) or eksctl's self-managed groups (Eksctl, --style\n" +
			"eksctl) generate it for the AMI family, merged with the template's own userData. Text is printed\n" +
			"as the instance reads it; gzip-compressed user data (eksctl's AL2 cloud-config) and --base64\n" +
			"print the base64 a launch template's UserData holds. The cluster comes from --endpoint/--ca-file\n" +
			"(its name from --cluster-name or an eksctl file's metadata.name), or from a kubeconfig.",
		Example: "  nodejoin userdata render -f nodegroup.yaml --family Bottlerocket\n" +
			"  nodejoin userdata render -f cluster.yaml --nodegroup ng-1 --kubeconfig ~/.kube/config\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cloudformation > nodes.yaml\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cluster-name demo --endpoint https://10.0.0.1:6443 --ca-file ca.crt --service-cidr 10.100.0.0/16",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Render(cmd.OutOrStdout(), cmd.InOrStdin()) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
