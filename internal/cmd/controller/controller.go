// Package controller is the command line of nodejoin-controller, the control-plane
// side of node joining.
package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// Run runs nodejoin-controller with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin-controller",
		Short: "Authenticate joining nodes, approve and sign their certificates",
	}
	root.AddCommand(runCommand(), webhookCommand())
	return cli.Execute(ctx, root, args, stdout, stderr)
}

type runOptions struct {
	kubeconfig               string
	caCert, caKey            string
	servingCACert, servingCA string
	inventory                string
	leaderElect, installRBAC bool
	identity, controllerUser string
	maxExpiration, duration  time.Duration
	metricsAddr              string
}

func runCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Approve or deny kubelet CSRs and sign approved ones, until interrupted",
		Long: "run watches CertificateSigningRequests of the two kubelet signers. A serving certificate is\n" +
			"approved only when its requester is the node it names and every DNS name and IP in it\n" +
			"belongs to that node's instance in the inventory; every other request for these signers is\n" +
			"denied with the reason. Approved requests are signed from the CA.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.ErrOrStderr()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, else in-cluster)")
	f.StringVar(&o.caCert, "ca-cert", "", "PEM certificate of the CA that signs kubelet certificates (required)")
	f.StringVar(&o.caKey, "ca-key", "", "PEM private key of that CA (required)")
	f.StringVar(&o.servingCACert, "serving-ca-cert", "", "a separate CA for kubelet serving certificates (optional)")
	f.StringVar(&o.servingCA, "serving-ca-key", "", "its private key")
	f.StringVar(&o.inventory, "inventory", "", "JSON file mapping node names to their instances' names and addresses (required)")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the kube-system/nodejoin-controller Lease")
	f.StringVar(&o.identity, "identity", "", "this replica's name in leader election (default: the host name)")
	f.BoolVar(&o.installRBAC, "install-rbac", true, "create or update nodejoin's roles and bindings at start")
	f.StringVar(&o.controllerUser, "controller-user", "", "user to bind to the controller's least-privilege role")
	f.DurationVar(&o.maxExpiration, "max-expiration", 365*24*time.Hour, "longest certificate lifetime a CSR may ask for; longer ones are denied")
	f.DurationVar(&o.duration, "duration", 365*24*time.Hour, "lifetime of certificates whose CSR asks for none")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at http://ADDR/metrics (default: off)")
	return cmd
}

// clientFor connects to the cluster of a kubeconfig file, or $KUBECONFIG, or the
// in-cluster configuration, in that order.
func clientFor(kubeconfig string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster configuration: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

func (o *runOptions) run(ctx context.Context, logOut io.Writer) error {
	if o.caCert == "" || o.caKey == "" {
		return fmt.Errorf("--ca-cert and --ca-key are required: the CA that signs kubelet certificates")
	}
	if o.inventory == "" {
		return fmt.Errorf("--inventory is required: without it no serving certificate's addresses can be verified")
	}
	ca, err := pki.LoadCA(o.caCert, o.caKey)
	if err != nil {
		return err
	}
	signer := &csr.Signer{CA: ca, Duration: o.duration, MaxDuration: o.maxExpiration}
	if o.servingCACert != "" {
		if signer.ServingCA, err = pki.LoadCA(o.servingCACert, o.servingCA); err != nil {
			return err
		}
	}
	client, err := clientFor(o.kubeconfig)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	if o.installRBAC {
		if err := csr.EnsureRBAC(ctx, client, o.controllerUser); err != nil {
			return fmt.Errorf("installing RBAC: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	if o.metricsAddr != "" {
		if err := serveMetrics(ctx, o.metricsAddr, reg, log); err != nil {
			return err
		}
	}
	c := &csr.Controller{
		Metrics: csr.NewMetrics(reg),
		Client:  client,
		Policy:  &csr.Policy{Inventory: &inventory.File{Path: o.inventory}, Review: csr.NewAccessReview(client), MaxExpiration: o.maxExpiration},
		Signer:  signer,
		Log:     log,
	}
	log.Info("starting", "leaderElection", o.leaderElect)
	if !o.leaderElect {
		return c.Start(ctx)
	}
	id := o.identity
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return fmt.Errorf("choosing a leader-election identity (give --identity): %w", err)
		}
	}
	return c.RunElected(ctx, csr.LeaderElection{Identity: id})
}

// serveMetrics serves reg at http://addr/metrics until ctx ends.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := cli.Serve(ctx, srv, l); err != nil {
			log.Error("serving metrics failed", "err", err)
		}
	}()
	log.Info("serving metrics", "address", l.Addr().String())
	return nil
}
