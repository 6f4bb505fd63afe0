package nodeadm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

// execCredential is client.authentication.k8s.io's ExecCredential, as a credential
// plugin prints it.
type execCredential struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       map[string]any `json:"spec"`
	Status     struct {
		ExpirationTimestamp string `json:"expirationTimestamp"`
		Token               string `json:"token"`
	} `json:"status"`
}

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
			ctx := cmd.Context()
			opts := []func(*config.LoadOptions) error{}
			if region != "" {
				opts = append(opts, config.WithRegion(region))
			}
			cfg, err := config.LoadDefaultConfig(ctx, opts...)
			if err != nil {
				return fmt.Errorf("loading AWS configuration: %w", err)
			}
			if cfg.Region == "" {
				out, err := bootstrap.NewIMDSClient().GetRegion(ctx, &imds.GetRegionInput{})
				if err != nil {
					return fmt.Errorf("finding the region (give --region): %w", err)
				}
				cfg.Region = out.Region
			}
			token, exp, err := identity.Mint(ctx, cfg, cluster)
			if err != nil {
				return err
			}
			cred := execCredential{APIVersion: execAPIVersion(), Kind: "ExecCredential", Spec: map[string]any{}}
			cred.Status.Token = token
			cred.Status.ExpirationTimestamp = exp.UTC().Format(time.RFC3339)
			return json.NewEncoder(cmd.OutOrStdout()).Encode(cred)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster-name", "", "the cluster the token is for (required)")
	cmd.Flags().StringVar(&region, "region", "", "STS region (default: the SDK's configuration, else instance metadata)")
	return cmd
}

// execAPIVersion answers in the version the client asked for in KUBERNETES_EXEC_INFO.
func execAPIVersion() string {
	var info struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("KUBERNETES_EXEC_INFO")), &info); err == nil && info.APIVersion != "" {
		return info.APIVersion
	}
	return "client.authentication.k8s.io/v1beta1"
}
