package controlplane

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/pki"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
)

// certFiles are the paths of one certificate and key under pki/.
type certFiles struct{ Cert, Key string }

// PKI holds the paths of the cluster's certificates and keys.
type PKI struct {
	Dir               string
	CA                certFiles
	APIServer         certFiles // serving certificate of kube-apiserver
	APIServerKubelet  certFiles // kube-apiserver's client certificate towards kubelets
	APIServerEtcd     certFiles // kube-apiserver's client certificate towards etcd
	Etcd              certFiles // etcd's serving and peer certificate
	Admin             certFiles // cluster administrator, group system:masters
	TokenWebhook      certFiles // serving certificate of the token webhook (Options.TokenWebhook)
	ControllerManager certFiles // kube-controller-manager's client certificate (system:kube-controller-manager)
	Scheduler         certFiles // kube-scheduler's client certificate (system:kube-scheduler)
	// ComponentServing serves /healthz of kube-controller-manager and kube-scheduler on
	// 127.0.0.1, so that health checks verify them against the cluster CA.
	ComponentServing certFiles
	// FrontProxyCA, a CA of its own, signs only FrontProxyClient: the client certificate
	// kube-apiserver presents when it proxies to an aggregated API server, and which
	// makes the X-Remote-User headers trusted. kube-controller-manager and kube-scheduler
	// read it (delegated authentication) from kube-system/extension-apiserver-authentication.
	FrontProxyCA     certFiles
	FrontProxyClient certFiles
	// TokenWebhookClientCA is the CA (certificate only; its key is discarded) that
	// signed TokenWebhookClient, kube-apiserver's client certificate towards the token
	// webhook. A CA of its own: the cluster CA signs every kubelet's client
	// certificate, and a kubelet must not pass the webhook's client check.
	TokenWebhookClientCA string
	TokenWebhookClient   certFiles
	ServiceAccountKey    string
	ServiceAccountPublic string
}

func newPKIPaths(dir string) PKI {
	pair := func(name string) certFiles {
		return certFiles{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	}
	return PKI{
		Dir:                  dir,
		CA:                   pair("ca"),
		APIServer:            pair("apiserver"),
		APIServerKubelet:     pair("apiserver-kubelet-client"),
		APIServerEtcd:        pair("apiserver-etcd-client"),
		Etcd:                 pair("etcd-server"),
		Admin:                pair("admin"),
		TokenWebhook:         pair("token-webhook"),
		ControllerManager:    pair("kube-controller-manager"),
		Scheduler:            pair("kube-scheduler"),
		ComponentServing:     pair("component-serving"),
		FrontProxyCA:         pair("front-proxy-ca"),
		FrontProxyClient:     pair("front-proxy-client"),
		TokenWebhookClientCA: filepath.Join(dir, "token-webhook-client-ca.crt"),
		TokenWebhookClient:   pair("token-webhook-client"),
		ServiceAccountKey:    filepath.Join(dir, "sa.key"),
		ServiceAccountPublic: filepath.Join(dir, "sa.pub"),
	}
}

// generatePKI creates the cluster CA and every certificate the control plane needs.
// One CA signs everything: it is the CA that kubelets trust for the API server and that
// the CSR signer issues node certificates from, as on EKS.
func generatePKI(p PKI, o *Options) (*pki.CA, error) {
	ca, err := pki.NewCA("nodejoin-"+o.Name, caValidity)
	if err != nil {
		return nil, err
	}
	if err := ca.Write(p.CA.Cert, p.CA.Key); err != nil {
		return nil, err
	}
	loopback := net.IPv4(127, 0, 0, 1)
	apiIPs := []net.IP{loopback, net.IP(o.serviceIP().AsSlice())}
	if o.Network == NetworkNamespace {
		apiIPs = append(apiIPs, net.IP(o.BridgeAddr().AsSlice()))
	}
	leaves := []struct {
		files certFiles
		req   pki.Request
	}{
		{p.APIServer, pki.Request{
			CommonName: "kube-apiserver",
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPs:   apiIPs,
			Usage: pki.ServerAuth,
		}},
		// The kubelet authorizes the API server's requests with a SubjectAccessReview;
		// system:masters passes it.
		{p.APIServerKubelet, pki.Request{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Usage: pki.ClientAuth}},
		{p.APIServerEtcd, pki.Request{CommonName: "kube-apiserver-etcd-client", Usage: pki.ClientAuth}},
		{p.Etcd, pki.Request{CommonName: "etcd", DNSNames: []string{"localhost"}, IPs: []net.IP{loopback}, Usage: pki.ServerAuth | pki.ClientAuth}},
		{p.Admin, pki.Request{CommonName: "nodejoin-admin", Organization: []string{"system:masters"}, Usage: pki.ClientAuth}},
		// The bootstrap RBAC policy binds these user names to the components' roles.
		{p.ControllerManager, pki.Request{CommonName: "system:kube-controller-manager", Usage: pki.ClientAuth}},
		{p.Scheduler, pki.Request{CommonName: "system:kube-scheduler", Usage: pki.ClientAuth}},
		{p.ComponentServing, pki.Request{CommonName: "nodejoin-control-plane-components", DNSNames: []string{"localhost"}, IPs: []net.IP{loopback}, Usage: pki.ServerAuth}},
	}
	if o.TokenWebhook {
		ips := []net.IP{loopback, net.IP(o.BridgeAddr().AsSlice())}
		if o.TokenWebhookService.IsValid() {
			ips = append(ips, net.IP(o.TokenWebhookService.AsSlice()))
		}
		leaves = append(leaves, struct {
			files certFiles
			req   pki.Request
		}{p.TokenWebhook, pki.Request{CommonName: "nodejoin-token-webhook", IPs: ips, Usage: pki.ServerAuth}})
		if err := webhookClientPKI(p, o); err != nil {
			return nil, err
		}
	}
	for _, l := range leaves {
		l.req.Validity = leafValidity
		kp, err := ca.Issue(l.req)
		if err != nil {
			return nil, err
		}
		if err := kp.Write(l.files.Cert, l.files.Key); err != nil {
			return nil, err
		}
	}
	if err := generateFrontProxy(p); err != nil {
		return nil, err
	}
	sa, err := pki.NewSigningKey()
	if err != nil {
		return nil, err
	}
	saKey, err := pki.EncodeKey(sa)
	if err != nil {
		return nil, err
	}
	saPub, err := pki.EncodePublicKey(sa)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(p.ServiceAccountKey, saKey, 0o600); err != nil {
		return nil, fmt.Errorf("writing service-account key: %w", err)
	}
	if err := atomicfile.WriteFile(p.ServiceAccountPublic, saPub, 0o644); err != nil {
		return nil, fmt.Errorf("writing service-account public key: %w", err)
	}
	return ca, nil
}

// generateFrontProxy creates the front proxy's CA and its one client certificate. A CA
// apart from the cluster CA, as kubeadm has it: a client certificate of the cluster CA
// must never be able to assert another user through request headers.
func generateFrontProxy(p PKI) error {
	ca, err := pki.NewCA("nodejoin-front-proxy", caValidity)
	if err != nil {
		return err
	}
	if err := ca.Write(p.FrontProxyCA.Cert, p.FrontProxyCA.Key); err != nil {
		return err
	}
	kp, err := ca.Issue(pki.Request{CommonName: frontProxyClientName, Usage: pki.ClientAuth, Validity: leafValidity})
	if err != nil {
		return err
	}
	return kp.Write(p.FrontProxyClient.Cert, p.FrontProxyClient.Key)
}

// frontProxyClientName is the front proxy client's CN, the one name
// --requestheader-allowed-names lets set request headers.
const frontProxyClientName = "front-proxy-client"

// webhookClientPKI creates the token webhook's client CA and kube-apiserver's client
// certificate from it.
func webhookClientPKI(p PKI, o *Options) error {
	ca, err := pki.NewCA("nodejoin-"+o.Name+"-token-webhook-client", caValidity)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p.TokenWebhookClientCA, ca.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("writing the token webhook's client CA: %w", err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "kube-apiserver-token-webhook-client", Usage: pki.ClientAuth, Validity: leafValidity})
	if err != nil {
		return err
	}
	return kp.Write(p.TokenWebhookClient.Cert, p.TokenWebhookClient.Key)
}
