package nodeadm

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

func getTokenCommand() *cobra.Command {
	var cluster, region string
	cmd := &cobra.Command{
		Use:   "get-token",
		Short: "Print an ExecCredential with a node identity token (kubelet credential plugin)",
		Long: "get-token presigns STS GetCallerIdentity with this instance's role credentials, binding it to\n" +
			"the cluster with the signed header x-k8s-aws-id, and prints it as an ExecCredential: the same\n" +
			"token as aws-iam-authenticator and `aws eks get-token` produce. The token is printed only to\n" +
			"standard output, for the kubelet.",
		Example: `  # What the kubelet's kubeconfig runs
  nodeadm get-token --cluster-name my-cluster --region us-west-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster == "" {
				return errors.New("--cluster-name is required: the token is bound to one cluster")
			}
			return bootstrap.GetToken(cmd.Context(), cmd.OutOrStdout(), cluster, region)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster-name", "", "the cluster the token is for (required)")
	cmd.Flags().StringVar(&region, "region", "", "STS region (default: the SDK's configuration, else instance metadata)")
	return cmd
}
