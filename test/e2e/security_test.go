package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// adminClient is a client of a local cluster from its admin kubeconfig, and the API
// endpoint it names.
func adminClient(t *testing.T, kubeconfig string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, cfg
}

// floodCounts are a flood's requests, read while it runs.
type floodCounts struct{ answered, unauthorized atomic.Int64 }

// flood sends garbage bearer tokens to the API endpoint from clients parallel
// connections. It stops once stop is closed and at least min requests were answered,
// or after max requests, or when limit passes, whichever comes first, and returns once
// every client has stopped.
func flood(endpoint string, caData []byte, clients, minimum, max int, limit time.Duration, stop <-chan struct{}, counts *floodCounts) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caData)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			// One connection per client, kept alive.
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 1}}
			defer hc.CloseIdleConnections()
			for {
				i := n.Add(1)
				if i > int64(max) || ctx.Err() != nil {
					return
				}
				select {
				case <-stop:
					if counts.answered.Load() >= int64(minimum) {
						return
					}
				default:
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/api/v1/namespaces/default/pods", nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+garbageToken(c, int(i)))
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				_ = resp.Body.Close()
				counts.answered.Add(1)
				if resp.StatusCode == http.StatusUnauthorized {
					counts.unauthorized.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// garbageToken is the i-th token of a flood: malformed, of the right prefix with a
// URL of another host, or random bytes.
func garbageToken(client, i int) string {
	switch i % 4 {
	case 0:
		return fmt.Sprintf("garbage-%d-%d", client, i)
	case 1:
		q := url.Values{"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}, "X-Amz-Signature": {fmt.Sprintf("%064x", i)}}
		return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte("https://sts.attacker.invalid/?"+q.Encode()))
	case 2:
		b := make([]byte, 96)
		_, _ = rand.Read(b)
		return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString(b)
	default:
		return fmt.Sprintf("abcdef.%016d", i) // a bootstrap token's form, no such token
	}
}

// A flood of garbage bearer tokens from 20 parallel clients, aimed at the local
// cluster's own loopback API endpoint while a real kubelet joins, does not stop it
// joining: its node turns Ready. The flood starts before the join and stops by itself
// once the join ended and 2,000 requests were answered (at most 20,000, or four
// minutes).
func TestSecurityTokenFloodDuringJoin(t *testing.T) {
	name := "e2e-sec-flood"
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "1")
	_, cfg := adminClient(t, kubeconfig)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("the API endpoint %s is not a loopback address: the flood is aimed only at loopback", cfg.Host)
	}
	caData := cfg.CAData
	if len(caData) == 0 {
		if caData, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}

	// The flood runs before, during and after the join: it is under way (200 requests
	// answered) before the join starts, and goes on until the join ended and at least
	// 2,000 requests were answered (at most 20,000, four minutes).
	stop := make(chan struct{})
	var counts floodCounts
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		flood(cfg.Host, caData, 20, 2000, 20000, 4*time.Minute, stop, &counts)
	}()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return counts.answered.Load() >= 200, nil
	}); err != nil {
		close(stop)
		<-flooded
		t.Fatalf("the flood never got under way: %d requests answered", counts.answered.Load())
	}
	const n2 = "ip-198-18-0-12.local.internal"
	start, before := time.Now(), counts.answered.Load()
	out, joinErr := c.command("add", "node", "--name", name, "--timeout", "4m").CombinedOutput()
	joined, during := time.Since(start), counts.answered.Load()-before
	select {
	case <-flooded:
		t.Errorf("the flood ended before the join did")
	default:
	}
	close(stop)
	<-flooded
	total, unauthorized := counts.answered.Load(), counts.unauthorized.Load()
	t.Logf("flood: %d requests answered in all (%d 401), %d of them during the join of %s", total, unauthorized, during, joined.Round(time.Second))
	if joinErr != nil {
		t.Fatalf("add node under the flood: %v\n%s", joinErr, out)
	}
	if total < 2000 || during == 0 {
		t.Errorf("the flood answered %d requests, %d during the join; want at least 2,000, the join inside it", total, during)
	}
	if unauthorized < total*9/10 {
		t.Errorf("only %d of %d garbage requests were refused 401", unauthorized, total)
	}
	if got := c.readyNodes(kubeconfig); !slices.Contains(got, n2) {
		t.Errorf("Ready nodes after the flood = %v, want %s", got, n2)
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}

// csrPEM makes a CSR for cn in system:nodes with key, naming dns and ips.
func csrPEM(t *testing.T, key any, cn string, dns []string, ips []net.IP) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns, IPAddresses: ips,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// denied waits until the CSR is decided and returns its Denied condition (nil when it
// was approved or never decided).
func deniedCondition(t *testing.T, client kubernetes.Interface, name string) *certificatesv1.CertificateSigningRequestCondition {
	t.Helper()
	var got *certificatesv1.CertificateSigningRequestCondition
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			switch cond.Type {
			case certificatesv1.CertificateDenied:
				got = &cond
				return true, nil
			case certificatesv1.CertificateApproved:
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CSR %s never decided: %v", name, err)
	}
	return got
}

// On a local cluster with bootstrap tokens: a client CSR made with a bootstrap token of
// another node group is denied naming both groups; one made with a bootstrap token
// (as system:bootstrap:<id>) for the registered node is denied with the reason; a
// serving CSR made by that node itself (with its kubelet client certificate) for its
// own names, with an RSA-1024 key, is denied with a reason naming the key.
func TestSecurityBootstrapTokenCSRsDenied(t *testing.T) {
	name := "e2e-sec-token"
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "1", "--identity", "bootstrap-token")
	admin, cfg := adminClient(t, kubeconfig)
	const n1 = "ip-198-18-0-11.local.internal"
	if got := c.readyNodes(kubeconfig); !slices.Equal(got, []string{n1}) {
		t.Fatalf("Ready nodes = %v", got)
	}
	ctx := t.Context()

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// clientCSR makes a client CSR for node 1 with a new bootstrap token of group.
	clientCSR := func(group string) *certificatesv1.CertificateSigningRequest {
		t.Helper()
		token, err := bootstraptoken.Mint(ctx, admin, group, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		asToken := rest.AnonymousClientConfig(cfg)
		asToken.BearerToken = token
		tokenClient, err := kubernetes.NewForConfig(asToken)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tokenClient.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-takeover-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: csrPEM(t, ecKey, "system:node:"+n1, nil, nil), SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// (0) A bootstrap token of another node group ("batch") asks for the client
	// certificate of node 1, whose instance the sandbox tagged for group "local":
	// denied before anything else is looked at (issue 25, item 2).
	foreign := clientCSR("batch")
	if d := deniedCondition(t, admin, foreign.Name); d == nil || d.Reason != csr.ReasonTokenGroup ||
		!strings.HasSuffix(d.Message, `is tagged for node group "local", the token is for "batch"`) {
		t.Errorf("client CSR of a batch token for node %s: %+v, want Denied %s naming both groups", n1, d, csr.ReasonTokenGroup)
	} else {
		t.Logf("another group's token denied: %s: %s", d.Reason, d.Message)
	}

	// (1) A bootstrap token of the sandbox's node group asks for node 1's client
	// certificate.
	takeover := clientCSR("local")
	if !strings.HasPrefix(takeover.Spec.Username, "system:bootstrap:") {
		t.Errorf("the CSR was made by %s, want a bootstrap token user", takeover.Spec.Username)
	}
	if d := deniedCondition(t, admin, takeover.Name); d == nil || d.Reason != csr.ReasonAlreadyJoined || !strings.Contains(d.Message, n1) {
		t.Errorf("client CSR of a bootstrap token for registered node %s: %+v, want Denied %s naming the node", n1, d, csr.ReasonAlreadyJoined)
	} else {
		t.Logf("takeover CSR denied: %s: %s", d.Reason, d.Message)
	}

	// (2) Node 1 itself, with its kubelet client certificate, asks for a serving
	// certificate for its own names with an RSA-1024 key.
	recs, err := instance.ReadRecords(filepath.Join(c.state, "nodejoin", name, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(recs, func(r *instance.Record) bool { return r.NodeName == n1 })
	if i < 0 || recs[i].Root == "" {
		t.Fatalf("no instance record with a root for %s: %+v", n1, recs)
	}
	pemFile := filepath.Join(recs[i].Root, "var/lib/kubelet/pki/kubelet-client-current.pem")
	asNode := rest.AnonymousClientConfig(cfg)
	asNode.CertFile, asNode.KeyFile = pemFile, pemFile
	nodeClient, err := kubernetes.NewForConfig(asNode)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a weak key on purpose: the policy must deny it
	if err != nil {
		t.Fatal(err)
	}
	serving, err := nodeClient.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-weak-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: csrPEM(t, weak, "system:node:"+n1, []string{n1}, []net.IP{net.ParseIP(recs[i].IP)}), SignerName: certificatesv1.KubeletServingSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if serving.Spec.Username != "system:node:"+n1 {
		t.Errorf("the serving CSR was made by %s, want the node", serving.Spec.Username)
	}
	if d := deniedCondition(t, admin, serving.Name); d == nil || d.Reason != csr.ReasonWeakKey || !strings.Contains(d.Message, "RSA key of 1024 bits") {
		t.Errorf("serving CSR with an RSA-1024 key: %+v, want Denied %s naming the key", d, csr.ReasonWeakKey)
	} else {
		t.Logf("weak-key CSR denied: %s: %s", d.Reason, d.Message)
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
