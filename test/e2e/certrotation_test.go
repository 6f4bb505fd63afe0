package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// issuedCert is a certificate the controller issued through a CSR.
type issuedCert struct {
	csr       string
	requester string
	requested time.Time // the CSR's creation
	cert      *x509.Certificate
}

// issuedCerts returns the certificates issued through CSRs of signer, oldest first.
func issuedCerts(ctx context.Context, client kubernetes.Interface, signer string) ([]issuedCert, error) {
	list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []issuedCert
	for _, r := range list.Items {
		if r.Spec.SignerName != signer || len(r.Status.Certificate) == 0 {
			continue
		}
		cert, err := firstCert(r.Status.Certificate)
		if err != nil {
			return nil, fmt.Errorf("CSR %s: %w", r.Name, err)
		}
		out = append(out, issuedCert{csr: r.Name, requester: r.Spec.Username, requested: r.CreationTimestamp.Time, cert: cert})
	}
	slices.SortFunc(out, func(a, b issuedCert) int { return a.cert.NotAfter.Compare(b.cert.NotAfter) })
	return out, nil
}

// serial is a certificate's serial number in hex, as openssl prints it.
func serial(c *x509.Certificate) string { return fmt.Sprintf("%x", c.SerialNumber) }

func firstCert(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, fmt.Errorf("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// A real kubelet that joined with a bootstrap token renews its client certificate
// before it expires, again and again, authenticating with the certificate it holds, and
// renews its serving certificate too; the node stays Ready throughout. Certificates last
// 90 s here (`up --cert-lifetime`): the kubelet renews at 67-89 % of their life, so two
// client renewals take about three minutes after the join.
func TestCertificatesRenewOnRealKubelet(t *testing.T) {
	const (
		name     = "e2e-certrot"
		lifetime = 90 * time.Second
		n1       = "ip-198-18-0-11.local.internal"
	)
	start := time.Now()
	c, kubeconfig, ifaces := upCluster(t, name, "--nodes", "1", "--identity", "bootstrap-token", "--cert-lifetime", lifetime.String())
	t.Logf("cluster up with a Ready node after %s", time.Since(start).Round(time.Second))
	admin, _ := adminClient(t, kubeconfig)
	ctx := t.Context()
	recs, err := instance.ReadRecords(filepath.Join(c.state, "nodejoin", name, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(recs, func(r *instance.Record) bool { return r.NodeName == n1 })
	if i < 0 || recs[i].Root == "" {
		t.Fatalf("no instance record with a root for %s: %+v", n1, recs)
	}
	// The pair the kubelet uses now; the kubelet points the symlink at each new one.
	current := filepath.Join(recs[i].Root, "var/lib/kubelet/pki/kubelet-client-current.pem")

	// Until two client renewals and one serving renewal are issued and the kubelet holds
	// the last client certificate, sample the kubelet's current certificate and the
	// node's readiness.
	var inUse []string // serials of kubelet-client-current.pem, in the order seen
	var notReady []string
	var clients, servings []issuedCert
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 8*lifetime, true, func(ctx context.Context) (bool, error) {
		if data, err := os.ReadFile(current); err == nil {
			if cert, err := firstCert(data); err == nil {
				if s := serial(cert); len(inUse) == 0 || inUse[len(inUse)-1] != s {
					inUse = append(inUse, s)
				}
			}
		}
		node, err := admin.CoreV1().Nodes().Get(ctx, n1, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !nodeReady(node) {
			notReady = append(notReady, time.Now().Format(time.TimeOnly))
		}
		if clients, err = issuedCerts(ctx, admin, certificatesv1.KubeAPIServerClientKubeletSignerName); err != nil {
			return false, err
		}
		if servings, err = issuedCerts(ctx, admin, certificatesv1.KubeletServingSignerName); err != nil {
			return false, err
		}
		return len(clients) >= 3 && len(servings) >= 2 && len(inUse) > 0 && inUse[len(inUse)-1] == serial(clients[len(clients)-1].cert), nil
	})
	logIssued(t, "client", clients, lifetime)
	logIssued(t, "serving", servings, lifetime)
	t.Logf("serials of kubelet-client-current.pem, in order: %v", inUse)
	if err != nil {
		t.Fatalf("after %s: %d client and %d serving certificates issued, want 3 and 2, and the kubelet holding the last client one: %v", 8*lifetime, len(clients), len(servings), err)
	}

	// Client: the first through the bootstrap token, each renewal by the node itself
	// with the certificate it held, each a new serial, each installed by the kubelet.
	serials := map[string]bool{}
	for k, ic := range clients {
		want := "system:node:" + n1
		if k == 0 {
			want = "system:bootstrap:"
		}
		if !strings.HasPrefix(ic.requester, want) {
			t.Errorf("client certificate %d (CSR %s) requested by %s, want %s", k, ic.csr, ic.requester, want)
		}
		if ic.cert.Subject.CommonName != "system:node:"+n1 {
			t.Errorf("client certificate %d is for %s", k, ic.cert.Subject.CommonName)
		}
		if serials[serial(ic.cert)] {
			t.Errorf("client certificate %d repeats serial %s", k, serial(ic.cert))
		}
		serials[serial(ic.cert)] = true
		if k > 0 && !ic.requested.Before(clients[k-1].cert.NotAfter) {
			t.Errorf("client renewal %d was asked for at %s, after the previous certificate expired at %s", k, ic.requested, clients[k-1].cert.NotAfter)
		}
		if !slices.Contains(inUse, serial(ic.cert)) {
			t.Errorf("the kubelet never held client certificate %d (serial %s); it held %v", k, serial(ic.cert), inUse)
		}
	}
	for _, s := range inUse {
		if !serials[s] {
			t.Errorf("kubelet-client-current.pem held serial %s, which no CSR issued", s)
		}
	}
	// Serving: the renewal is the node's own, for the same names, with a new serial.
	for k, ic := range servings {
		if ic.requester != "system:node:"+n1 {
			t.Errorf("serving certificate %d requested by %s", k, ic.requester)
		}
		if k > 0 && (ic.cert.SerialNumber.Cmp(servings[k-1].cert.SerialNumber) == 0 || !slices.Equal(ic.cert.DNSNames, servings[k-1].cert.DNSNames)) {
			t.Errorf("serving renewal %d: serial %s, names %v; previous %s, %v", k, serial(ic.cert), ic.cert.DNSNames, serial(servings[k-1].cert), servings[k-1].cert.DNSNames)
		}
	}

	// The node stayed Ready: never seen otherwise, and its Ready condition has not
	// changed since before the first renewal.
	if len(notReady) > 0 {
		t.Errorf("node %s was not Ready at %v", n1, notReady)
	}
	node, err := admin.CoreV1().Nodes().Get(ctx, n1, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && (cond.Status != corev1.ConditionTrue || !cond.LastTransitionTime.Time.Before(clients[1].requested)) {
			t.Errorf("node %s Ready condition %s since %s, want True since before the first renewal (%s)", n1, cond.Status, cond.LastTransitionTime, clients[1].requested)
		}
	}
	// The API server reaches the kubelet, which serves with its renewed certificate.
	if got := c.kubectl(kubeconfig, "get", "--raw", "/api/v1/nodes/"+n1+"/proxy/healthz"); got != "ok" {
		t.Errorf("%s healthz through the API server = %q", n1, got)
	}
	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// logIssued logs when each certificate was asked for, relative to the previous one's
// issue, as a share of its life.
func logIssued(t *testing.T, kind string, certs []issuedCert, lifetime time.Duration) {
	t.Helper()
	for k, ic := range certs {
		issued := ic.cert.NotAfter.Add(-lifetime)
		line := fmt.Sprintf("%s certificate %d: CSR %s by %s at %s, serial %s, valid until %s", kind, k, ic.csr, ic.requester, ic.requested.Format(time.TimeOnly), serial(ic.cert), ic.cert.NotAfter.Format(time.TimeOnly))
		if k > 0 {
			prev := certs[k-1].cert.NotAfter.Add(-lifetime)
			since := ic.requested.Sub(prev)
			line += fmt.Sprintf("; asked %s after the previous one was issued (%.0f %% of its life), issued %s later", since.Round(time.Second), 100*since.Seconds()/lifetime.Seconds(), issued.Sub(ic.requested).Round(time.Second))
		}
		t.Log(line)
	}
}
