package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

func (c *Cluster) etcdURL(port int) string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	bin, err := toolbin.Find(c.opts.BinDir, toolbin.Etcd)
	if err != nil {
		return err
	}
	client, peer := c.etcdURL(c.etcdPorts[0]), c.etcdURL(c.etcdPorts[1])
	p := c.pki
	argv := []string{bin,
		"--name=default",
		"--data-dir=" + filepath.Join(c.opts.StateDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--initial-cluster-state=new",
		"--cert-file=" + p.Etcd.Cert,
		"--key-file=" + p.Etcd.Key,
		"--trusted-ca-file=" + p.CA.Cert,
		"--client-cert-auth=true",
		"--peer-cert-file=" + p.Etcd.Cert,
		"--peer-key-file=" + p.Etcd.Key,
		"--peer-trusted-ca-file=" + p.CA.Cert,
		"--peer-client-cert-auth=true",
	}
	if c.opts.UnsafeNoFsync {
		argv = append(argv, "--unsafe-no-fsync=true")
	}
	proc, err := c.launch("etcd", argv)
	c.mu.Lock()
	c.etcd = proc
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.recordComponent("etcd", client+"/health", `"health":"true"`, proc.LogFile(), 0)
	hc, err := c.httpClient(p.APIServerEtcd.Cert, p.APIServerEtcd.Key, c.dial)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, proc, hc, client+"/health", `"health":"true"`)
}

// StartAPIServer starts kube-apiserver (again, after KillAPIServer) on the same address
// and waits until /readyz answers ok.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	bin, err := toolbin.Find(c.opts.BinDir, toolbin.KubeAPIServer)
	if err != nil {
		return err
	}
	proc, err := c.launch("kube-apiserver", c.apiserverArgs(bin))
	c.mu.Lock()
	c.apiserver = proc
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.recordComponent("kube-apiserver", c.InternalEndpoint()+"/healthz", "ok", proc.LogFile(), 0)
	hc, err := c.httpClient(c.pki.Admin.Cert, c.pki.Admin.Key, nil)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, proc, hc, c.endpoint+"/readyz", "ok")
}

func (c *Cluster) apiserverArgs(bin string) []string {
	p := c.pki
	args := []string{bin,
		"--bind-address=" + c.apiListen.Addr().String(),
		"--secure-port=" + strconv.Itoa(int(c.apiListen.Port())),
		"--advertise-address=" + c.apiListen.Addr().String(),
		"--etcd-servers=" + c.etcdURL(c.etcdPorts[0]),
		"--etcd-cafile=" + p.CA.Cert,
		"--etcd-certfile=" + p.APIServerEtcd.Cert,
		"--etcd-keyfile=" + p.APIServerEtcd.Key,
		"--tls-cert-file=" + p.APIServer.Cert,
		"--tls-private-key-file=" + p.APIServer.Key,
		"--client-ca-file=" + p.CA.Cert,
		// The aggregation layer's front proxy. kube-apiserver publishes these settings in
		// kube-system/extension-apiserver-authentication, where kube-controller-manager
		// and kube-scheduler (delegated authentication) and aggregated API servers read
		// them.
		"--requestheader-client-ca-file=" + p.FrontProxyCA.Cert,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.FrontProxyClient.Cert,
		"--proxy-client-key-file=" + p.FrontProxyClient.Key,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.ServiceAccountPublic,
		"--service-account-signing-key-file=" + p.ServiceAccountKey,
		"--service-cluster-ip-range=" + c.opts.ServiceCIDR.String(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + p.APIServerKubelet.Cert,
		"--kubelet-client-key=" + p.APIServerKubelet.Key,
		// Verify kubelet serving certificates against the cluster CA, which signs them
		// once the CSR approver has approved them.
		"--kubelet-certificate-authority=" + p.CA.Cert,
		// Reach kubelets by the InternalIP they report, never by resolving node names
		// through the host's DNS.
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=" + strconv.FormatBool(c.opts.Profiling),
	}
	if c.opts.Network == NetworkLoopback {
		// kube-apiserver refuses a loopback advertise address while it reconciles the
		// kubernetes service's endpoints.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if c.opts.Network == NetworkNamespace {
		// Aggregated API servers, admission webhooks and CRD conversion webhooks are
		// called at a ready endpoint's address (a pod IP, which the cluster namespace
		// routes to), not at their Service's ClusterIP, which only a node's kube-proxy
		// makes reachable (with --control-plane-node). Conformance's aggregator and
		// conversion-webhook tests need one or the other.
		args = append(args, "--enable-aggregator-routing=true")
	}
	if c.opts.TokenWebhookConfigFile != "" {
		args = append(args,
			"--authentication-token-webhook-config-file="+c.opts.TokenWebhookConfigFile,
			"--authentication-token-webhook-version=v1")
	}
	return args
}

// KillAPIServer ends kube-apiserver with SIGKILL, as a crash would.
func (c *Cluster) KillAPIServer() {
	c.mu.Lock()
	p := c.apiserver
	c.mu.Unlock()
	c.stopDaemon(p, 0)
}

// RestartAPIServer kills kube-apiserver and starts it again, waiting until it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.KillAPIServer()
	return c.StartAPIServer(ctx)
}

func (c *Cluster) httpClient(certFile, keyFile string, dial func(context.Context, string, string) (net.Conn, error)) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading client certificate %s: %w", certFile, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c.ca.Cert)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}
	if dial != nil {
		tr.DialContext = dial
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, nil
}

// waitHealthy polls url until its body contains want, the daemon exits, or the ready
// timeout passes. Errors quote the daemon's log, where the reason usually is.
func (c *Cluster) waitHealthy(ctx context.Context, p *process.Process, hc *http.Client, url, want string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		if err := p.Err(); err != nil {
			return fmt.Errorf("%w\nlast lines of %s:\n%s", err, p.LogFile(), p.LogTail(15))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready after %s (last answer from %s: %s); see %s", p.Name(), c.opts.ReadyTimeout, url, last, p.LogFile())
			}
			return ctx.Err()
		case <-p.Done():
		case <-tick.C:
		}
	}
}

// KubeconfigPath is the admin kubeconfig's path.
func (c *Cluster) KubeconfigPath() string { return filepath.Join(c.opts.StateDir, "kubeconfig") }

// writeKubeconfig writes a self-contained admin kubeconfig (certificates embedded), so
// it keeps working when copied elsewhere.
func (c *Cluster) writeKubeconfig() error {
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s for the kubeconfig: %w", path, err)
		}
		return b, nil
	}
	ca, err := read(c.pki.CA.Cert)
	if err != nil {
		return err
	}
	cert, err := read(c.pki.Admin.Cert)
	if err != nil {
		return err
	}
	key, err := read(c.pki.Admin.Key)
	if err != nil {
		return err
	}
	name := "nodejoin-" + c.opts.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: c.endpoint, CertificateAuthorityData: ca}
	cfg.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return atomicfile.WriteFile(c.KubeconfigPath(), data, 0o600)
}
