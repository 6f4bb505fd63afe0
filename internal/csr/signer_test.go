package csr

import (
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/pki"
)

func approved(c *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved}}
	return c
}

func TestSignServing(t *testing.T) {
	ca, err := pki.NewCA("cluster", 2*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second) // certificates keep whole seconds
	s := &Signer{CA: ca, MaxDuration: 30 * 24 * time.Hour, Now: func() time.Time { return now }}
	user := "system:node:" + nodeA
	c := approved(servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}}))
	year := int32(365 * 24 * 3600)
	c.Spec.ExpirationSeconds = &year
	certPEM, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.IsCA || !cert.BasicConstraintsValid {
		t.Error("issued certificate is a CA")
	}
	if got := cert.NotAfter.Sub(now); got != 30*24*time.Hour {
		t.Errorf("lifetime %v, want the 30-day maximum", got)
	}
	if got := now.Sub(cert.NotBefore); got != 5*time.Minute {
		t.Errorf("backdated %v, want 5m", got)
	}
	if cert.Subject.CommonName != user || len(cert.DNSNames) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("198.18.0.11")) {
		t.Errorf("subject %v SANs %v %v", cert.Subject, cert.DNSNames, cert.IPAddresses)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: nodeA, CurrentTime: now}); err != nil {
		t.Errorf("serving certificate does not verify: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("serving certificate verifies as a client certificate")
	}

	// Never twice, never unapproved, never denied.
	c.Status.Certificate = certPEM
	if _, err := s.Sign(c); !errors.Is(err, ErrNotSignable) {
		t.Errorf("second Sign = %v", err)
	}
	pending := servingCSR(t, user, nil, reqSpec{cn: user, orgs: []string{"system:nodes"}, ips: []string{"198.18.0.11"}})
	if _, err := s.Sign(pending); !errors.Is(err, ErrNotSignable) {
		t.Errorf("Sign of a pending CSR = %v", err)
	}
	denied := approved(servingCSR(t, user, nil, reqSpec{cn: user, orgs: []string{"system:nodes"}, ips: []string{"198.18.0.11"}}))
	denied.Status.Conditions = append(denied.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied})
	if _, err := s.Sign(denied); !errors.Is(err, ErrNotSignable) {
		t.Errorf("Sign of a denied CSR = %v", err)
	}
}

func TestLifetimeBounds(t *testing.T) {
	s := &Signer{Duration: 24 * time.Hour, MaxDuration: 48 * time.Hour}
	short, long := int32(60), int32(7*24*3600)
	for _, tt := range []struct {
		in   *int32
		want time.Duration
	}{{nil, 24 * time.Hour}, {&short, 10 * time.Minute}, {&long, 48 * time.Hour}} {
		if got := s.lifetime(tt.in); got != tt.want {
			t.Errorf("lifetime(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// Kubelet client certificates live at most a day by default, whatever the CSR asks;
// serving certificates keep the general maximum.
func TestClientCertificateLifetimeCap(t *testing.T) {
	ca, err := pki.NewCA("cluster", 2*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	user := "system:node:" + nodeA
	year := int32(365 * 24 * 3600)
	for _, tt := range []struct {
		name      string
		clientMax time.Duration
		expSecs   *int32
		want      time.Duration
	}{
		{"default, no expirationSeconds", 0, nil, 24 * time.Hour},
		{"default, a year asked", 0, &year, 24 * time.Hour},
		{"configured 2h", 2 * time.Hour, &year, 2 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Signer{CA: ca, ClientMaxDuration: tt.clientMax, Now: func() time.Time { return now }}
			c := approved(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: request(t, reqSpec{cn: user, orgs: []string{"system:nodes"}}), SignerName: SignerKubeletClient,
				Usages: clientUsages, Username: user, ExpirationSeconds: tt.expSecs,
			}})
			certPEM, err := s.Sign(c)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := pki.ParseCert(certPEM)
			if err != nil {
				t.Fatal(err)
			}
			if got := cert.NotAfter.Sub(now); got != tt.want {
				t.Errorf("client certificate lifetime %v, want %v", got, tt.want)
			}
		})
	}
	// Serving certificates are not capped by the client maximum.
	s := &Signer{CA: ca, Now: func() time.Time { return now }}
	c := approved(servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}}))
	c.Spec.ExpirationSeconds = &year
	certPEM, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := cert.NotAfter.Sub(now); got != 365*24*time.Hour {
		t.Errorf("serving certificate lifetime %v, want a year", got)
	}
}
