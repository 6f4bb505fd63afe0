package csr

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/pki"
)

// Signer issues approved kubelet CSRs from the cluster CA.
type Signer struct {
	// CA signs both kubelet signers unless ServingCA is set.
	CA *pki.CA
	// ServingCA, when set, signs kubelet-serving certificates, so that a serving
	// certificate can never pass as a client certificate.
	ServingCA *pki.CA
	// Duration is the lifetime when the CSR asks for none, as kubelets' CSRs do.
	// Default one year. Unlike a CSR's expirationSeconds it may be shorter than 10
	// minutes (down to MinConfiguredDuration), so that tests can watch renewals.
	Duration time.Duration
	// MaxDuration bounds expirationSeconds. Default one year.
	MaxDuration time.Duration
	// ClientMaxDuration bounds kubelet client certificates further, whatever the CSR
	// asks: the kubelet rotates its client certificate long before it expires, and a
	// stolen one should not outlive a day. Default DefaultClientMaxDuration; like
	// Duration, it may go down to MinConfiguredDuration.
	ClientMaxDuration time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// backdate allows for clocks that lag the signer's (kube-apiserver's, which checks
// client certificates, and the kubelet's peers'), as kube-controller-manager's signer
// does. It is at most a tenth of the certificate's lifetime (see backdated).
const backdate = 5 * time.Minute

// MinConfiguredDuration is the shortest Duration or ClientMaxDuration worth setting:
// a kubelet renews at 70-90 % of its certificate's life, and a certificate much
// shorter than a minute could expire before its successor's CSR is settled.
const MinConfiguredDuration = time.Minute

// DefaultClientMaxDuration is the default longest lifetime of a kubelet client certificate.
const DefaultClientMaxDuration = 24 * time.Hour

// minDuration is the shortest lifetime the API lets a CSR ask for.
const minDuration = 10 * time.Minute

// ErrNotSignable reports a CSR this signer must not sign: wrong signer, not approved,
// denied or failed, or already issued.
var ErrNotSignable = errors.New("not signable")

// Signable reports whether the CSR is one of ours, approved, and not yet issued or failed.
func Signable(csr *certificatesv1.CertificateSigningRequest) bool {
	if csr.Spec.SignerName != SignerKubeletServing && csr.Spec.SignerName != SignerKubeletClient {
		return false
	}
	if len(csr.Status.Certificate) > 0 {
		return false
	}
	approved := false
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return approved
}

// Sign returns the PEM certificate for an approved CSR: the CSR's subject and only its
// DNS and IP subjectAltNames, the key usages it asked for, CA:false, valid for the
// requested lifetime (bounded) from now, never past the CA's own expiry, and from a
// little before now (backdated).
func (s *Signer) Sign(csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	if !Signable(csr) {
		return nil, fmt.Errorf("CSR %s: %w", csr.Name, ErrNotSignable)
	}
	req, err := ParseRequest(csr.Spec.Request)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("CSR %s: signature: %w", csr.Name, err)
	}
	ca := s.CA
	if csr.Spec.SignerName == SignerKubeletServing && s.ServingCA != nil {
		ca = s.ServingCA
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now()
	if t.After(ca.Cert.NotAfter) {
		return nil, fmt.Errorf("the signing CA expired on %s", ca.Cert.NotAfter.Format(time.RFC3339))
	}
	ttl := s.lifetime(csr.Spec.ExpirationSeconds)
	if csr.Spec.SignerName == SignerKubeletClient {
		ttl = min(ttl, s.clientMax())
	}
	notAfter := t.Add(ttl)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	keyUsage, extUsage, err := usages(csr.Spec.Usages)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization},
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		NotBefore:             backdated(t, notAfter),
		NotAfter:              notAfter,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           extUsage,
		BasicConstraintsValid: true,
		IsCA:                  false,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing CSR %s: %w", csr.Name, err)
	}
	return pki.EncodeCert(&x509.Certificate{Raw: der}), nil
}

// backdated is the NotBefore of a certificate issued at now until notAfter: five
// minutes before now, or a tenth of the lifetime when that is less. A kubelet renews
// at a random 70-90 % of NotAfter-NotBefore counted from NotBefore, so a backdate
// makes it renew that much earlier in the certificate's real life: nothing for a
// day-long certificate, but a 5-minute backdate on a 2-minute certificate would put
// the deadline before the certificate was even issued, and the kubelet would renew
// in a loop. With at most a tenth, the kubelet renews at 67-89 % of the real life,
// whatever the lifetime.
func backdated(now, notAfter time.Time) time.Time {
	return now.Add(-min(backdate, notAfter.Sub(now)/10))
}

// lifetime is the certificate's lifetime: the CSR's expirationSeconds (at least the
// 10 minutes the API allows a CSR to ask for) or else Duration, at most MaxDuration.
func (s *Signer) lifetime(expirationSeconds *int32) time.Duration {
	def, maxD := s.Duration, s.MaxDuration
	if def == 0 {
		def = defaultMaxExpiration
	}
	if maxD == 0 {
		maxD = defaultMaxExpiration
	}
	ttl := def
	if expirationSeconds != nil {
		ttl = max(time.Duration(*expirationSeconds)*time.Second, minDuration)
	}
	return min(ttl, maxD)
}

func (s *Signer) clientMax() time.Duration {
	if s.ClientMaxDuration > 0 {
		return s.ClientMaxDuration
	}
	return DefaultClientMaxDuration
}

func usages(us []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var eku []x509.ExtKeyUsage
	for _, u := range us {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			ku |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			ku |= x509.KeyUsageKeyEncipherment
		case certificatesv1.UsageServerAuth:
			eku = append(eku, x509.ExtKeyUsageServerAuth)
		case certificatesv1.UsageClientAuth:
			eku = append(eku, x509.ExtKeyUsageClientAuth)
		default:
			return 0, nil, fmt.Errorf("usage %q is not one a kubelet certificate has", u)
		}
	}
	return ku, eku, nil
}
