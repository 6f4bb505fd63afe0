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

// signFor signs an approved CSR of signer for nodeA that asks for expSecs (nil: no
// expirationSeconds, as kubelets ask) and returns the certificate.
func signFor(t *testing.T, s *Signer, signer string, expSecs *int32) *x509.Certificate {
	t.Helper()
	user := "system:node:" + nodeA
	var c *certificatesv1.CertificateSigningRequest
	if signer == SignerKubeletServing {
		c = approved(servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}}))
	} else {
		c = approved(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request(t, reqSpec{cn: user, orgs: []string{"system:nodes"}}), SignerName: SignerKubeletClient,
			Usages: clientUsages, Username: user,
		}})
	}
	c.Spec.ExpirationSeconds = expSecs
	certPEM, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// An operator (or a test that watches kubelets renew) may configure lifetimes shorter
// than the 10 minutes a CSR may ask for; what a CSR asks is still raised to 10 minutes.
func TestConfiguredLifetimesBelowTenMinutes(t *testing.T) {
	ca, err := pki.NewCA("cluster", 2*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	minute, hour := int32(60), int32(3600)
	for _, tt := range []struct {
		name    string
		signer  string
		expSecs *int32
		want    time.Duration
	}{
		{"serving, no expirationSeconds: Duration", SignerKubeletServing, nil, 2 * time.Minute},
		{"serving, a minute asked: the API's 10-minute floor", SignerKubeletServing, &minute, 10 * time.Minute},
		{"serving, an hour asked", SignerKubeletServing, &hour, time.Hour},
		{"client, no expirationSeconds: ClientMaxDuration", SignerKubeletClient, nil, 90 * time.Second},
		{"client, an hour asked: ClientMaxDuration", SignerKubeletClient, &hour, 90 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Signer{CA: ca, Duration: 2 * time.Minute, ClientMaxDuration: 90 * time.Second, Now: func() time.Time { return now }}
			if got := signFor(t, s, tt.signer, tt.expSecs).NotAfter.Sub(now); got != tt.want {
				t.Errorf("lifetime %v, want %v", got, tt.want)
			}
		})
	}
}

// Whatever the lifetime, the kubelet's renewal deadline (a random 70-90 % of
// NotAfter-NotBefore, counted from NotBefore) falls after the certificate was issued
// and at least two thirds into its real life, so a short-lived certificate is not
// renewed at once, nor in a loop; long-lived ones keep the 5-minute backdate.
func TestBackdateKeepsKubeletRenewalLate(t *testing.T) {
	ca, err := pki.NewCA("cluster", 5*365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	for _, tt := range []struct {
		lifetime     time.Duration
		wantBackdate time.Duration
	}{
		{time.Minute, 6 * time.Second},
		{2 * time.Minute, 12 * time.Second},
		{10 * time.Minute, time.Minute},
		{time.Hour, 5 * time.Minute},
		{24 * time.Hour, 5 * time.Minute},
		{365 * 24 * time.Hour, 5 * time.Minute},
	} {
		t.Run(tt.lifetime.String(), func(t *testing.T) {
			s := &Signer{CA: ca, Duration: tt.lifetime, ClientMaxDuration: tt.lifetime, Now: func() time.Time { return now }}
			for _, signer := range []string{SignerKubeletClient, SignerKubeletServing} {
				cert := signFor(t, s, signer, nil)
				if got := now.Sub(cert.NotBefore); got != tt.wantBackdate {
					t.Errorf("%s: backdated %v, want %v", signer, got, tt.wantBackdate)
				}
				total := cert.NotAfter.Sub(cert.NotBefore)
				earliest := cert.NotBefore.Add(total * 7 / 10)
				latest := cert.NotBefore.Add(total * 9 / 10)
				life := cert.NotAfter.Sub(now)
				if into := earliest.Sub(now); into*3 < life*2 {
					t.Errorf("%s: the kubelet may renew %v after issue, before two thirds of the %v life", signer, into, life)
				}
				if !latest.Before(cert.NotAfter) {
					t.Errorf("%s: latest renewal %v is not before expiry %v", signer, latest, cert.NotAfter)
				}
			}
		})
	}
}
