package nodejoin

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func awsEnvCommand() *cobra.Command {
	var name string
	var output printer.Format
	cmd := &cobra.Command{
		Use:   "aws-env",
		Short: "Print the shell environment that points AWS clients at a running cluster's local AWS",
		Long: "aws-env prints export lines for the cluster's local AWS: one HTTPS endpoint that serves every\n" +
			"service (AWS_ENDPOINT_URL and each AWS_ENDPOINT_URL_<SERVICE> for the SDKs, eksctl's AWS_<SERVICE>_ENDPOINT),\n" +
			"its CA, the region and the account administrator's credentials and profile. The AWS CLI 2.9 ignores\n" +
			"the endpoint variables: give it --endpoint-url \"$AWS_ENDPOINT_URL\".",
		Example: "  eval \"$(nodejoin aws-env --name demo)\"\n" +
			"  aws --endpoint-url \"$AWS_ENDPOINT_URL\" sts get-caller-identity",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := sandbox.AWSEnvironment(name)
			if err != nil {
				return err
			}
			vars := map[string]string{}
			for _, v := range env {
				vars[v.Name] = v.Value
			}
			return printer.Print(cmd.OutOrStdout(), output, vars, func(w io.Writer) {
				for _, v := range env {
					fmt.Fprintf(w, "export %s=%s\n", v.Name, sandbox.ShellQuote(v.Value))
				}
			})
		},
	}
	nameFlag(cmd, &name)
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}
