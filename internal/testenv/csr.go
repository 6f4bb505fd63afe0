package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ServingUsages are the key usages a kubelet asks for in a serving CSR.
var ServingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}

// CSR returns a PEM certificate request for cn in organization system:nodes with the
// given names and addresses, as a kubelet makes one, with a fresh P-256 key.
func CSR(t testing.TB, cn string, dns []string, ips ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// CreateCSR creates a CertificateSigningRequest as client's user.
func CreateCSR(t testing.TB, client kubernetes.Interface, name, signer string, req []byte, usages ...certificatesv1.KeyUsage) {
	t.Helper()
	_, err := client.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR %s: %v", name, err)
	}
}

// Settled waits until the CSR is denied or failed, or approved and issued, and returns it.
func Settled(t testing.TB, client kubernetes.Interface, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var out *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		out = c
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
				return true, nil
			}
		}
		return len(c.Status.Certificate) > 0, nil
	})
	if err != nil {
		t.Fatalf("CSR %s not settled: %v (status %+v)", name, err, out.Status.Conditions)
	}
	return out
}
