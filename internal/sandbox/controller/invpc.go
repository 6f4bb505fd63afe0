package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// Ports of the local AWS inside the cluster namespace, on the bridge address.
const (
	// EC2Port is the edge (every service, EC2 included), plain HTTP.
	EC2Port = 8773
	// STSPort is STS over HTTPS, with a certificate from the cluster CA for the bridge
	// address: the deployed token webhook sends tokens' presigned requests there, and
	// a verifier sends them only over TLS.
	STSPort = 8774
)

// serveInVPC serves the local AWS inside the cluster namespace, when there is one:
// instances call it (the network add-on's ipamd calls EC2, nodeadm EKS), and so do the
// pods on the control-plane node, whose network is the namespace's.
func (c *Controller) serveInVPC(ctx context.Context, cl *controlplane.Cluster, log *slog.Logger) error {
	ns := cl.Namespace()
	if ns.Name == "" {
		return nil
	}
	opts := cl.Options()
	bridge := opts.BridgeAddr()
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	// The edge for instances: their role credentials are STS's, which the edge knows.
	// Plain HTTP, as the instances' SDKs are given no CA.
	addr := netip.AddrPortFrom(bridge, EC2Port).String()
	l, err := ns.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for the local AWS inside the cluster namespace: %w", err)
	}
	c.ec2URL, c.ec2Done = "http://"+addr, make(chan error, 1)
	inVPC := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.cloud.Edge.ServeHTTP(w, r.WithContext(eksapi.WithVPCCaller(r.Context())))
	})
	srv := &http.Server{Handler: inVPC, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog}
	go func() { c.ec2Done <- httpserver.Serve(ctx, srv, l) }()

	// STS for the deployed token webhook, trusted through the cluster CA (the pods'
	// kube-root-ca.crt).
	kp, err := cl.CA().Issue(pki.Request{CommonName: "local-sts-in-vpc", IPs: []net.IP{net.IP(bridge.AsSlice())},
		Usage: pki.ServerAuth, Validity: 365 * 24 * time.Hour})
	if err != nil {
		return fmt.Errorf("issuing the in-VPC STS's certificate: %w", err)
	}
	addr = netip.AddrPortFrom(bridge, STSPort).String()
	tl, err := ns.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for STS inside the cluster namespace: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}
	c.stsURL, c.stsDone = "https://"+addr, make(chan error, 1)
	stsSrv := &http.Server{Handler: c.cloud.STS, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { c.stsDone <- httpserver.Serve(ctx, stsSrv, tl) }()
	return nil
}

// STSInternalURL is the local STS (HTTPS, the cluster CA's certificate) as pods on the
// control-plane node reach it. Empty without a cluster namespace.
func (c *Controller) STSInternalURL() string { return c.stsURL }

// TokenSTSHosts are the STS hosts nodes' tokens may name: the local STS, the edge that
// serves it too, or AWS's public STS hosts of the region (`aws eks get-token` signs for
// those, whatever endpoint it is given). Every one is verified by the cluster's own
// STS, never sent to AWS.
func (c *Controller) TokenSTSHosts(region string) []string {
	return []string{strings.TrimPrefix(c.cloud.STSURL, "https://"), strings.TrimPrefix(c.cloud.EdgeURL, "https://"),
		"sts." + region + ".amazonaws.com", "sts.amazonaws.com"}
}

// webhookConfig serves the token webhook in this process: on the address kube-apiserver's
// webhook kubeconfig names, for kube-apiserver's client certificate only.
func (c *Controller) webhookConfig(cl *controlplane.Cluster, region string, mcfg *manager.Config) error {
	p := cl.PKI()
	cert, err := tls.LoadX509KeyPair(p.TokenWebhook.Cert, p.TokenWebhook.Key)
	if err != nil {
		return fmt.Errorf("loading the token webhook's certificate: %w", err)
	}
	clientCA, err := os.ReadFile(p.TokenWebhookClientCA)
	if err != nil {
		return fmt.Errorf("reading the token webhook's client CA: %w", err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(clientCA) {
		return fmt.Errorf("%s holds no PEM certificate", p.TokenWebhookClientCA)
	}
	if mcfg.WebhookListener, err = cl.ListenTokenWebhook(); err != nil {
		return fmt.Errorf("listening for token reviews: %w", err)
	}
	mcfg.WebhookTLS = httpserver.MutualTLS(cert, clientCAs)
	mcfg.Verifier = &authn.Verifier{ClusterID: cl.Name(), Endpoint: c.cloud.STSURL, STSHosts: c.TokenSTSHosts(region), HTTP: c.cloud.STSHTTPClient()}
	// Nodes' instance proofs are checked against the local EC2's certificate; a proof
	// is required where a NodeAccessEntry says so (nodejoin's own node groups).
	mcfg.InstanceProofs = &authn.InstanceProofs{Certs: []*x509.Certificate{c.cloud.IdentitySigner.Cert}, Regions: []string{region}}
	mcfg.OnAuthenticated = func(user string) { c.authenticated.Store(user, struct{}{}) }
	return nil
}
