package kubeletsim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"
	csrutil "k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/connrotation"
)

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
	// certificateWaitTimeout bounds the wait for one CSR's certificate, as the
	// kubelet's certificate manager bounds it.
	certificateWaitTimeout = 15 * time.Minute
	// Retries of a failed certificate request: 2s doubling for five attempts, then
	// every 32s, as the kubelet's certificate manager retries.
	retryFirst = 2 * time.Second
	retryLast  = 32 * time.Second
)

// The usages a kubelet asks for with an ECDSA key (an RSA key adds key encipherment).
var (
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
)

// CSRError reports a CSR that was denied or that its signer failed.
type CSRError struct {
	CSR, Signer string
	State       CSRState // CSRDenied or CSRFailed
	Reason      string
	Message     string
}

func (e *CSRError) Error() string {
	return fmt.Sprintf("CSR %s for %s was %s: %s: %s", e.CSR, e.Signer, strings.ToLower(string(e.State)), e.Reason, e.Message)
}

// credentials are the node's own: a client certificate (rotated in place) or a
// credential plugin, and the REST configuration that uses them.
type credentials struct {
	rest *rest.Config
	// cert and conns are set for a certificate: requests present cert, and conns
	// closes every connection when it is replaced so that new ones present the new one.
	cert  atomic.Pointer[tls.Certificate]
	conns *connrotation.Dialer
}

func (k *Kubelet) baseREST() *rest.Config {
	return &rest.Config{
		Host:      k.cfg.Server,
		QPS:       k.cfg.QPS,
		Burst:     k.cfg.Burst,
		UserAgent: "kubelet/" + k.cfg.Version + " (linux/amd64) kubernetes/kubeletsim",
		// protobuf, as a real kubelet's --kube-api-content-type defaults to.
		ContentConfig: rest.ContentConfig{
			ContentType:        runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		},
	}
}

// credentials returns the node's credentials: the credential plugin's, or a client
// certificate bootstrapped with the bootstrap token. Only a denied bootstrap CSR is
// an error; everything else is retried until ctx ends.
func (k *Kubelet) credentials(ctx context.Context) (*credentials, error) {
	if k.cfg.Exec != nil {
		cfg := k.baseREST()
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: k.cfg.CAData}
		cfg.ExecProvider = k.cfg.Exec.DeepCopy()
		if cfg.ExecProvider.InteractiveMode == "" {
			cfg.ExecProvider.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
		}
		return &credentials{rest: cfg}, nil
	}
	if k.cfg.Token != nil {
		cfg := k.baseREST()
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: k.cfg.CAData}
		src := &tokenSource{get: k.cfg.Token}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &bearer{src: src, next: rt} }
		return &credentials{rest: cfg}, nil
	}
	if kept := k.cfg.ClientCertificate; kept != nil && kept.Leaf != nil && time.Now().Before(kept.Leaf.NotAfter) {
		return k.certificateCredentials(kept)
	}
	cert, err := k.bootstrap(ctx)
	if err != nil {
		return nil, err
	}
	return k.certificateCredentials(cert)
}

// ClientCertificate returns the node's current client certificate (bootstrap tokens
// only; nil before it has one), for a later run to keep (Config.ClientCertificate).
func (k *Kubelet) ClientCertificate() *tls.Certificate {
	k.mu.Lock()
	c := k.creds
	k.mu.Unlock()
	if c != nil && c.conns != nil {
		return c.cert.Load()
	}
	return nil
}

// certificateCredentials builds a transport whose TLS client certificate is read at
// every handshake, so that a rotated certificate takes effect once the connections
// are closed, as the kubelet's client transport does.
func (k *Kubelet) certificateCredentials(cert *tls.Certificate) (*credentials, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(k.cfg.CAData) {
		return nil, fmt.Errorf("node %s: the cluster CA holds no PEM certificate", k.cfg.NodeName)
	}
	c := &credentials{}
	c.cert.Store(cert)
	c.conns = connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
	c.rest = k.baseREST()
	c.rest.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsCfg,
		MaxIdleConnsPerHost: 25,
		DialContext:         c.conns.DialContext,
	})
	return c, nil
}

// bootstrap obtains the first client certificate with the bootstrap token: a CSR for
// kubernetes.io/kube-apiserver-client-kubelet with a name derived from its content,
// so that a retry finds the CSR it made before.
func (k *Kubelet) bootstrap(ctx context.Context) (*tls.Certificate, error) {
	cfg := k.baseREST()
	cfg.TLSClientConfig = rest.TLSClientConfig{CAData: k.cfg.CAData}
	cfg.BearerToken = k.cfg.BootstrapToken
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("node %s: bootstrap client: %w", k.cfg.NodeName, err)
	}
	k.update(func(s *Status) { s.Phase = PhaseBootstrapping })
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeUserPrefix + k.cfg.NodeName, Organization: []string{nodesGroup}}}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	name, err := bootstrapCSRName(key, tmpl, clientUsages)
	if err != nil {
		return nil, err
	}
	delay := retryFirst
	for {
		cert, err := k.requestCertificate(ctx, client, name, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages, key, tmpl, clientCert)
		if err == nil {
			k.log.Info("bootstrapped a client certificate", "csr", name, "notAfter", cert.Leaf.NotAfter)
			return cert, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errCSRGone) {
			// The CSR was deleted while we waited; the next attempt makes it again.
			k.fail("bootstrap CSR vanished", err)
		} else if csrErr := (*CSRError)(nil); errors.As(err, &csrErr) {
			return nil, fmt.Errorf("node %s: TLS bootstrap: %w", k.cfg.NodeName, err)
		} else {
			k.fail("TLS bootstrap failed, retrying", err)
		}
		if !sleep(ctx, jitter(delay)) {
			return nil, ctx.Err()
		}
		delay = min(2*delay, retryLast)
	}
}

// bootstrapCSRName derives the bootstrap CSR's name from its public key, subject and
// usages: node-csr-<unpadded base64url of SHA-512/256>.
func bootstrapCSRName(key *ecdsa.PrivateKey, tmpl *x509.CertificateRequest, usages []certificatesv1.KeyUsage) (string, error) {
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	h := sha512.New512_256()
	parts := []string{base64.RawURLEncoding.EncodeToString(pub), tmpl.Subject.CommonName}
	parts = append(parts, tmpl.Subject.Organization...)
	for _, u := range usages {
		parts = append(parts, string(u))
	}
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{'|'})
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// whichCert selects one of the certificates in Status.
type whichCert func(*Status) *Certificate

func clientCert(s *Status) *Certificate  { return &s.ClientCertificate }
func servingCert(s *Status) *Certificate { return &s.ServingCertificate }

var errCSRGone = errors.New("the CSR was deleted before it was issued")

// requestCertificate creates a CSR for tmpl signed by key (named name, or csr-<random>
// when name is empty), waits for its certificate and returns it with the key.
func (k *Kubelet) requestCertificate(ctx context.Context, client kubernetes.Interface, name, signer string, usages []certificatesv1.KeyUsage,
	key *ecdsa.PrivateKey, tmpl *x509.CertificateRequest, which whichCert) (*tls.Certificate, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	reqPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	reqName, uid, err := csrutil.RequestCertificateWithContext(ctx, client, reqPEM, name, signer, nil, usages, key)
	if err != nil {
		return nil, err
	}
	k.update(func(s *Status) {
		c := which(s)
		c.CSR, c.State, c.Reason, c.Message = reqName, CSRPending, "", ""
	})
	k.log.Info("requested a certificate", "csr", reqName, "signer", signer)
	waitCtx, cancel := context.WithTimeout(ctx, certificateWaitTimeout)
	defer cancel()
	certPEM, err := k.waitForCertificate(waitCtx, client, reqName, uid, signer, which)
	if err != nil {
		return nil, err
	}
	cert, err := keyPair(certPEM, key)
	if err != nil {
		k.update(func(s *Status) {
			c := which(s)
			c.State, c.Reason, c.Message = CSRFailed, "InvalidCertificate", err.Error()
		})
		return nil, fmt.Errorf("CSR %s: %w", reqName, err)
	}
	k.update(func(s *Status) {
		c := which(s)
		c.State, c.NotAfter = CSRIssued, cert.Leaf.NotAfter
		c.Issued++
	})
	return cert, nil
}

// waitForCertificate watches the CSR until it carries a certificate, recording its
// approval; a denial or a signer's failure ends the wait with a *CSRError.
func (k *Kubelet) waitForCertificate(ctx context.Context, client kubernetes.Interface, name string, uid types.UID, signer string, which whichCert) ([]byte, error) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	csrs := client.CertificatesV1().CertificateSigningRequests()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return csrs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return csrs.Watch(ctx, o)
		},
	}
	var certPEM []byte
	_, err := watchtools.UntilWithSync(ctx, lw, &certificatesv1.CertificateSigningRequest{}, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("CSR %s: %w", name, errCSRGone)
		}
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return false, nil
		}
		if csr.UID != uid {
			return false, fmt.Errorf("CSR %s: %w", name, errCSRGone)
		}
		for _, cond := range csr.Status.Conditions {
			state := CSRState("")
			switch cond.Type {
			case certificatesv1.CertificateDenied:
				state = CSRDenied
			case certificatesv1.CertificateFailed:
				state = CSRFailed
			case certificatesv1.CertificateApproved:
				k.update(func(s *Status) {
					if c := which(s); c.CSR == name && c.State == CSRPending {
						c.State = CSRApproved
					}
				})
			}
			if state != "" {
				k.update(func(s *Status) {
					c := which(s)
					c.State, c.Reason, c.Message = state, cond.Reason, cond.Message
				})
				return false, &CSRError{CSR: name, Signer: signer, State: state, Reason: cond.Reason, Message: cond.Message}
			}
		}
		if len(csr.Status.Certificate) == 0 {
			return false, nil
		}
		certPEM = csr.Status.Certificate
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return certPEM, nil
}

// keyPair pairs an issued PEM certificate (chain) with its key, checking that the
// certificate is for that key.
func keyPair(certPEM []byte, key *ecdsa.PrivateKey) (*tls.Certificate, error) {
	cert := &tls.Certificate{PrivateKey: key}
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			cert.Certificate = append(cert.Certificate, block.Bytes)
		}
	}
	if len(cert.Certificate) == 0 {
		return nil, errors.New("the issued certificate is not PEM")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the issued certificate does not parse: %w", err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the issued certificate is not for the requested key")
	}
	cert.Leaf = leaf
	return cert, nil
}

// jitteredDeadline is the kubelet's rotation deadline: a random point between 70% and
// 90% of the certificate's lifetime.
func jitteredDeadline(cert *x509.Certificate) time.Time {
	notBefore := cert.NotBefore
	total := cert.NotAfter.Sub(notBefore)
	f := 0.7 + 0.2*mathrand.Float64() //nolint:gosec // G404: timing jitter, not a secret.
	return notBefore.Add(time.Duration(float64(total) * f))
}

// jitter adds up to 10% to d.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(mathrand.Float64()*0.1*float64(d)) //nolint:gosec // G404: timing jitter, not a secret.
}

// certSource is one certificate that the node keeps current.
type certSource struct {
	what    string
	signer  string
	usages  []certificatesv1.KeyUsage
	which   whichCert
	tmpl    func() *x509.CertificateRequest
	current func() *tls.Certificate
	install func(*tls.Certificate)
}

// keepCertificate obtains src's certificate when there is none and rotates it at its
// rotation deadline, with a fresh key each time; failures and denials are retried
// (2s doubling, then every 32s), each attempt with a new CSR, as the kubelet does.
func (k *Kubelet) keepCertificate(ctx context.Context, src certSource) {
	for {
		var deadline time.Time
		if cur := src.current(); cur != nil {
			deadline = k.cfg.rotationDeadline(cur.Leaf)
		}
		if !sleep(ctx, time.Until(deadline)) {
			return
		}
		for delay := retryFirst; ; delay = min(2*delay, retryLast) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err == nil {
				var cert *tls.Certificate
				cert, err = k.requestCertificate(ctx, k.client, "", src.signer, src.usages, key, src.tmpl(), src.which)
				if err == nil {
					src.install(cert)
					k.log.Info("received a certificate", "certificate", src.what, "notAfter", cert.Leaf.NotAfter)
					break
				}
			}
			if ctx.Err() != nil {
				return
			}
			k.fail("requesting a "+src.what+" certificate failed, retrying", err)
			if !sleep(ctx, jitter(delay)) {
				return
			}
		}
	}
}

// servingTemplate is the kubelet's serving certificate request: CN system:node:<name>,
// O system:nodes, the node's DNS names and IP addresses, deduplicated and sorted.
func (k *Kubelet) servingTemplate() *x509.CertificateRequest {
	var dns []string
	var ips []netip.Addr
	for _, a := range k.addresses() {
		switch a.Type {
		case "Hostname", "InternalDNS", "ExternalDNS":
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				ips = append(ips, ip)
			} else {
				dns = append(dns, a.Address)
			}
		case "InternalIP", "ExternalIP":
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				ips = append(ips, ip)
			}
		}
	}
	slices.Sort(dns)
	dns = slices.Compact(dns)
	slices.SortFunc(ips, func(a, b netip.Addr) int { return strings.Compare(a.String(), b.String()) })
	ips = slices.Compact(ips)
	tmpl := &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: nodeUserPrefix + k.cfg.NodeName, Organization: []string{nodesGroup}},
		DNSNames: dns,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	return tmpl
}

// runServingCertificate keeps the kubelet-serving certificate. The simulated node
// serves nothing with it.
func (k *Kubelet) runServingCertificate(ctx context.Context) {
	var cur atomic.Pointer[tls.Certificate]
	k.keepCertificate(ctx, certSource{
		what: "serving", signer: certificatesv1.KubeletServingSignerName, usages: servingUsages, which: servingCert,
		tmpl: k.servingTemplate, current: cur.Load, install: cur.Store,
	})
}

// runClientRotation rotates the bootstrapped client certificate, asking for the new
// one with the current one; with a credential plugin there is none.
func (k *Kubelet) runClientRotation(ctx context.Context) {
	c := k.creds
	if c.conns == nil {
		return
	}
	k.keepCertificate(ctx, certSource{
		what: "client", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, usages: clientUsages, which: clientCert,
		tmpl: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeUserPrefix + k.cfg.NodeName, Organization: []string{nodesGroup}}}
		},
		current: c.cert.Load,
		install: func(cert *tls.Certificate) {
			c.cert.Store(cert)
			c.conns.CloseAll()
		},
	})
}

// tokenSource caches Config.Token's token until its refresh time.
type tokenSource struct {
	get func(context.Context) (string, time.Time, error)

	mu        sync.Mutex
	token     string
	refreshAt time.Time
}

func (s *tokenSource) current(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Now().Before(s.refreshAt) {
		return s.token, nil
	}
	tok, at, err := s.get(ctx)
	if err != nil {
		return "", fmt.Errorf("getting the node's token: %w", err)
	}
	s.token, s.refreshAt = tok, at
	return tok, nil
}

// bearer sets the token source's token on each request, as client-go does with a
// credential plugin's.
type bearer struct {
	src  *tokenSource
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.src.current(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(req)
}
