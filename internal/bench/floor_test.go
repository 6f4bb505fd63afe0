package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/pki"
)

func TestParseBaselines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"kcm", []string{"kcm"}, ""},
		{"kcm,floor", []string{"kcm", "floor"}, ""},
		{" floor , kcm ", []string{"floor", "kcm"}, ""},
		{"kcm,kcm", nil, `"kcm" is named twice`},
		{"kcm,meteor", nil, `"meteor" is no baseline`},
		// The peer stack cannot be built: the refusal names the module, the proxy's
		// answer and what to use instead.
		{"kcm,peer", nil, "github.com/postfinance/kubelet-csr-approver"},
		{"peer", nil, "the proxy here refuses it (403 Forbidden"},
		{"peer", nil, "Use --baseline kcm,floor"},
	} {
		got, err := parseBaselines(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// newCSR is a kubelet's CSR for the floor to sign.
func newCSR(t testing.TB, signer string, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:ip-198-18-0-10.us-west-2.compute.internal", Organization: []string{"system:nodes"}},
		DNSNames: []string{"ip-198-18-0-10.us-west-2.compute.internal"}, IPAddresses: []net.IP{net.ParseIP("198.18.0.10")},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: signer, Usages: usages,
		Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
	}}
}

// The floor signs what it is asked, with the cluster CA: the CSR's names and usages,
// a certificate a kubelet and kube-apiserver accept.
func TestFloorSign(t *testing.T) {
	ca, err := pki.NewCA("bench-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := newCSR(t, certificatesv1.KubeletServingSignerName, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	der, err := floorSign(ca, c, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSName: "ip-198-18-0-10.us-west-2.compute.internal"}); err != nil {
		t.Errorf("the floor's serving certificate does not verify: %v", err)
	}
	if cert.Subject.CommonName != "system:node:ip-198-18-0-10.us-west-2.compute.internal" || len(cert.IPAddresses) != 1 || !cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("subject %q, IPs %v, not after %v (the CA's %v)", cert.Subject.CommonName, cert.IPAddresses, cert.NotAfter, ca.Cert.NotAfter)
	}
	secs := int32(600)
	c = newCSR(t, certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.UsageClientAuth)
	c.Spec.ExpirationSeconds = &secs
	der, err = floorSign(ca, c, now)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) ||
		cert.NotAfter.Sub(now.Truncate(time.Second)) != 10*time.Minute {
		t.Errorf("client certificate: %v, usages %v, lifetime %v; want client auth for 10m", err, cert.ExtKeyUsage, cert.NotAfter.Sub(now))
	}
	if !floorSigns(c) || floorSigns(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientSignerName}}) {
		t.Error("the floor signs kubelet CSRs and only those")
	}
}

// Whatever the request holds, the floor either refuses it or signs a certificate the
// CA verifies, for the request's own key.
func FuzzFloorSign(f *testing.F) {
	ca, err := pki.NewCA("bench-ca", 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(newCSR(f, certificatesv1.KubeletServingSignerName).Spec.Request)
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	f.Fuzz(func(t *testing.T, req []byte) {
		c := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}, Request: req}}
		der, err := floorSign(ca, c, time.Now())
		if err != nil {
			return
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("signed something that does not parse: %v", err)
		}
		if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
			t.Fatalf("signed a certificate the CA does not verify: %v", err)
		}
	})
}

// CPU time counts per name, across a process that appeared after the first reading.
func TestCPUSecondsByProcess(t *testing.T) {
	self := os.Getpid()
	before := map[int]float64{self: 0}
	got := cpuSeconds(before, mergeProcs(procSet{procKubelets: {self}}, procSet{procKubelets: {self}, "gone": {1 << 30}}))
	if got[procKubelets] <= 0 {
		t.Errorf("this process's CPU seconds: %v", got)
	}
	if _, ok := got["gone"]; ok {
		t.Errorf("a process that is not there was counted: %v", got)
	}
	if st, _ := readProc(self); got[procKubelets] > st.cpuSeconds {
		t.Errorf("counted %v, more than the process's %v", got[procKubelets], st.cpuSeconds)
	}
}
