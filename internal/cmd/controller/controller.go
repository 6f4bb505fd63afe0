// Package controller is the command line of nodejoin-controller, the control-plane
// side of node joining: its commands and their help. Their options, and what runs, are
// internal/manager's.
package controller

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/manager"
)

// Run runs nodejoin-controller with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin-controller",
		Short: "Authenticate joining nodes, approve and sign their certificates",
		Example: `  # In the cluster (deploy/controller.yaml), with JSON logs
  nodejoin-controller run --inventory-source ec2 --ca-cert ca.crt --ca-key ca.key --log-format json

  # The TokenReview webhook alone, next to kube-apiserver
  nodejoin-controller webhook --tls-cert tls.crt --tls-key tls.key --webhook-client-ca-file client-ca.crt --cluster-id my-cluster --region us-west-2 --inventory-source ec2`,
	}
	root.AddCommand(runCommand(), webhookCommand())
	return cli.Execute(ctx, root, args, stdout, stderr)
}

func runCommand() *cobra.Command {
	o := &manager.Options{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Approve, deny and sign kubelet CSRs, and serve the token webhook, until interrupted",
		Long: "run watches CertificateSigningRequests of the two kubelet signers. A serving certificate is\n" +
			"approved only when its requester is the node it names and every DNS name and IP in it\n" +
			"belongs to that node's instance in the inventory; every other request for these signers is\n" +
			"denied with the reason. Approved requests are signed from the CA. With --webhook-listen it\n" +
			"also serves kube-apiserver's TokenReviews (see `nodejoin-controller webhook --help`).\n" +
			"Several replicas may run: the webhook serves on each, the CSR controller and the cleanup\n" +
			"of expired bootstrap tokens only on the holder of the kube-system/nodejoin-controller Lease.",
		Example: `  # Sign with the cluster CA, look instances up in EC2, serve the webhook too
  nodejoin-controller run --kubeconfig admin.kubeconfig \
    --ca-cert /etc/kubernetes/pki/ca.crt --ca-key /etc/kubernetes/pki/ca.key \
    --inventory-source ec2 --aws-region us-west-2 \
    --webhook-listen :21362 --tls-cert tls.crt --tls-key tls.key --webhook-client-ca-file client-ca.crt --cluster-id my-cluster --region us-west-2

  # One replica, no leader election, instances from a file, client-go request logs
  nodejoin-controller run --leader-elect=false --inventory inventory.json \
    --ca-cert ca.crt --ca-key ca.key -v 6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func webhookCommand() *cobra.Command {
	o := &manager.Options{}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the TokenReview webhook that authenticates kubelets' identity tokens, until interrupted",
		Long: "webhook answers kube-apiserver's TokenReviews (--authentication-token-webhook-config-file\n" +
			"pointing at https://ADDR/authenticate). A token is accepted when its form is right, STS\n" +
			"verifies it for this cluster, its role has a NodeAccessEntry or an aws-auth mapping, and the\n" +
			"instance it names is running with that role.",
		Example: `  # Authenticate tokens bound to my-cluster, signed for us-west-2's STS
  nodejoin-controller webhook --listen :21362 --tls-cert tls.crt --tls-key tls.key --webhook-client-ca-file client-ca.crt \
    --cluster-id my-cluster --region us-west-2 --inventory-source ec2 --aws-region us-west-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.RunWebhook(cmd.Context()) },
	}
	o.AddWebhookFlags(cmd.Flags())
	return cmd
}
