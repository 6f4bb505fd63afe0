package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

type webhookOptions struct {
	kubeconfig, listen, tlsCert, tlsKey string
	clusterID, region, stsCABundle      string
	stsHosts                            []string
	inventory, metricsAddr              string
}

func webhookCommand() *cobra.Command {
	o := &webhookOptions{}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve the TokenReview webhook that authenticates kubelets' identity tokens, until interrupted",
		Long: "webhook answers kube-apiserver's TokenReviews (--authentication-token-webhook-config-file\n" +
			"pointing at https://ADDR/authenticate). A token is accepted when its form is right, STS\n" +
			"verifies it for this cluster, its role is mapped in aws-auth, and the instance it names is\n" +
			"running with that role.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.ErrOrStderr()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to read aws-auth (default: $KUBECONFIG, else in-cluster)")
	f.StringVar(&o.listen, "listen", ":21362", "address to serve HTTPS on")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serving certificate (PEM, required)")
	f.StringVar(&o.tlsKey, "tls-key", "", "serving key (PEM, required)")
	f.StringVar(&o.clusterID, "cluster-id", "", "this cluster's name, which tokens must be bound to (required)")
	f.StringVar(&o.region, "region", "", "STS region: accepts sts.REGION.amazonaws.com and sts.amazonaws.com")
	f.StringArrayVar(&o.stsHosts, "sts-host", nil, "an STS host tokens may point at (repeatable; replaces the region's)")
	f.StringVar(&o.stsCABundle, "sts-ca-bundle", "", "PEM CAs to trust for STS (default: the system's)")
	f.StringVar(&o.inventory, "inventory", "", "JSON instance inventory (required)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "", "serve Prometheus metrics at http://ADDR/metrics (default: off)")
	return cmd
}

func (o *webhookOptions) validate() error {
	switch {
	case o.tlsCert == "" || o.tlsKey == "":
		return errors.New("--tls-cert and --tls-key are required: kube-apiserver calls the webhook over HTTPS")
	case o.clusterID == "":
		return errors.New("--cluster-id is required: tokens are bound to one cluster")
	case o.inventory == "":
		return errors.New("--inventory is required: without it no token's instance can be checked")
	case len(o.stsHosts) == 0 && o.region == "":
		return errors.New("give --region or --sts-host: the STS hosts tokens may point at")
	}
	return nil
}

func (o *webhookOptions) stsClient() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.stsCABundle != "" {
		pem, err := os.ReadFile(o.stsCABundle)
		if err != nil {
			return nil, fmt.Errorf("--sts-ca-bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--sts-ca-bundle %s holds no PEM certificate", o.stsCABundle)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

func (o *webhookOptions) run(ctx context.Context, logOut io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	hosts := o.stsHosts
	if len(hosts) == 0 {
		hosts = []string{"sts." + o.region + ".amazonaws.com", "sts.amazonaws.com"}
	}
	stsHTTP, err := o.stsClient()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	client, err := clientFor(o.kubeconfig)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	reg := prometheus.NewRegistry()
	if o.metricsAddr != "" {
		if err := serveMetrics(ctx, o.metricsAddr, reg, log); err != nil {
			return err
		}
	}
	w := &authn.Webhook{
		Verifier: &authn.Verifier{ClusterID: o.clusterID, STSHosts: hosts, HTTP: stsHTTP},
		Mappings: authn.AWSAuth{Get: func(ctx context.Context) (*corev1.ConfigMap, error) {
			cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "aws-auth", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return cm, err
		}}.Mappings,
		Instances: &inventory.File{Path: o.inventory},
		Log:       log,
		Metrics:   authn.NewMetrics(reg),
	}
	mux := http.NewServeMux()
	mux.Handle("/authenticate", w)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	log.Info("serving token reviews", "address", l.Addr().String(), "cluster", o.clusterID)
	return cli.Serve(ctx, srv, l)
}
