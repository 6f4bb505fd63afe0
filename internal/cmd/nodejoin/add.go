package nodejoin

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func addCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "add",
		Short:   "Add something to a running cluster",
		Example: "  nodejoin add node --name demo --count 2",
	}
	cmd.AddCommand(addNodeCommand())
	return cmd
}

func addNodeCommand() *cobra.Command {
	var name, userData string
	var output printer.Format
	o := sandbox.NodeOptions{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Launch more local instances into a running cluster and wait until they are Ready",
		Long: "add node asks the process that runs the cluster (`nodejoin up`) to launch instances, shows\n" +
			"their join step by step, and fails naming the node and the step when one does not join.\n\n" +
			"--claim-address and --credentials-of make a node misbehave on purpose, to watch the control\n" +
			"plane refuse it: --claim-address NODE makes the kubelet report another node's address and ask\n" +
			"for a serving certificate with it, and --credentials-of NODE serves another node's\n" +
			"instance-role credentials from this instance's metadata endpoint. `nodejoin diagnose node`\n" +
			"then explains the refusal.\n\n" +
			"--user-data FILE (- for standard input) boots the instances with that user data, as IMDS\n" +
			"serves it, in any format nodeadm reads; the AMI family is read from it unless --ami-family\n" +
			"is given. Go template fields stand for the local cluster's values:\n  {{" + strings.Join(sandbox.UserDataFieldNames(), "}}, {{") + "}}\n" +
			"(.CertificateAuthority is base64 of the CA's PEM, as EKS gives it; .ClusterDNS is the service\n" +
			"range's .10). Nothing else is changed. Gzip data (eksctl's) is passed on untouched, never\n" +
			"templated: fill in the values before compressing it.",
		Example: "  # two more nodes, with up's settings\n" +
			"  nodejoin add node --name demo --count 2\n\n" +
			"  # a node that reads bootstrap.sh user data, with an extra kubelet flag\n" +
			"  nodejoin add node --name demo --ami-family AmazonLinux2 --kubelet-arg=--v=4\n\n" +
			"  # your launch template's user data, with {{.ClusterName}} and friends for the cluster's values\n" +
			"  nodejoin add node --name demo --user-data userdata.mime\n\n" +
			"  # a node that presents another node's credentials, then why it was refused\n" +
			"  nodejoin add node --name demo --credentials-of ip-198-18-0-11.local.internal\n" +
			"  nodejoin diagnose node --name demo ip-198-18-0-12.local.internal",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if userData != "" {
				var err error
				if o.UserData, o.UserDataSource, err = sandbox.ReadUserData(cmd.InOrStdin(), userData); err != nil {
					return err
				}
			}
			nodes, err := sandbox.AddNodesTo(cmd.Context(), name, o, sandbox.ProgressTo(cmd.ErrOrStderr()))
			if err != nil {
				return sandbox.FlagError(err)
			}
			return printer.Print(cmd.OutOrStdout(), output, nodes, func(w io.Writer) { sandbox.WriteNodeTable(w, nodes) })
		},
	}
	nameFlag(cmd, &name)
	f := cmd.Flags()
	f.IntVar(&o.Count, "count", 1, "how many instances to launch")
	f.StringVar(&o.InstanceType, "instance-type", "", "EC2 instance type (default: up's)")
	f.StringVar((*string)(&o.AMIFamily), "ami-family", "", "user-data format (default: up's)")
	f.StringVar((*string)(&o.Kubelet), "kubelet", "", "real or sim (default: the cluster's)")
	f.DurationVar(&o.Timeout, "timeout", 0, "how long the nodes may take to become Ready (default 5m)")
	f.StringArrayVar(&o.KubeletFlags, "kubelet-arg", nil, "extra kubelet flag, through a local NodeConfig (repeatable)")
	f.StringVar(&o.CredentialsOf, "credentials-of", "", "node name or instance ID whose role credentials this instance's IMDS serves (a stolen-credentials test)")
	f.StringVar(&o.ClaimAddress, "claim-address", "", "node name or address the kubelet claims as its own node IP (a foreign-address test)")
	f.StringVar(&userData, "user-data", "", "the instances' user data, from a file or - for standard input (template fields above)")
	printer.AddFlag(f, &output)
	return cmd
}
