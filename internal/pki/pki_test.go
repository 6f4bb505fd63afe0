package pki

import (
	"crypto/x509"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestIssuedCertificateVerifiesForItsUsage(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(Request{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes.default.svc"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.100.0.1")},
		Usage:      ServerAuth,
		Validity:   time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, name := range []string{"localhost", "kubernetes.default.svc", "127.0.0.1", "10.100.0.1"} {
		if _, err := server.Cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("server certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := server.Cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Error("server certificate verifies for a name it does not carry")
	}
	if _, err := server.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("server-only certificate verifies as a client certificate")
	}

	client, err := ca.Issue(Request{CommonName: "admin", Organization: []string{"system:masters"}, Usage: ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if !slices.Equal(client.Cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("organization = %v", client.Cert.Subject.Organization)
	}
}

func TestIssueNeverOutlivesTheCA(t *testing.T) {
	ca, err := NewCA("short-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(Request{CommonName: "x", Usage: ClientAuth, Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if kp.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf expires %v, after its CA (%v)", kp.Cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestIssueRequiresUsage(t *testing.T) {
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(Request{CommonName: "x", Validity: time.Hour}); err == nil {
		t.Error("Issue without a usage succeeded")
	}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := ca.Write(certPath, keyPath); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Error("loaded CA certificate differs from the written one")
	}

	other, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := filepath.Join(dir, "other.key")
	if err := other.Write(filepath.Join(dir, "other.crt"), otherKey); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(certPath, otherKey); err == nil {
		t.Error("Load accepted a key that does not match the certificate")
	}

	leaf, err := ca.Issue(Request{CommonName: "leaf", Usage: ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.Write(filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")); err == nil {
		t.Error("LoadCA accepted a leaf certificate")
	}
}

// BenchmarkIssue measures issuing one leaf certificate (key generation and signing), the
// work the CSR signer repeats for every joining node.
func BenchmarkIssue(b *testing.B) {
	ca, err := NewCA("bench-ca", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	req := Request{CommonName: "system:node:ip-198-18-0-11", Organization: []string{"system:nodes"}, Usage: ServerAuth, Validity: time.Hour}
	for b.Loop() {
		if _, err := ca.Issue(req); err != nil {
			b.Fatal(err)
		}
	}
}
