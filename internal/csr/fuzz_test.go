package csr

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

	certificatesv1 "k8s.io/api/certificates/v1"
)

// FuzzDecide feeds hostile requests to the CSR parser and the policy. Property: with an
// inventory and access review that never fail, every CSR of a kubelet signer gets a
// decision that carries a reason and a message, and an approval only ever carries
// the approval reason.
func FuzzDecide(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	seed := func(cn string, dns []string, ips ...string) []byte {
		tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns}
		for _, ip := range ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
		if err != nil {
			f.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	user := "system:node:" + nodeA
	f.Add(seed(user, []string{nodeA}, "198.18.0.11"), user, false, uint8(0b0011), true, int32(0))
	f.Add(seed(user, nil), user, true, uint8(0b0101), true, int32(3600))
	f.Add(seed(user, nil), "system:bootstrap:abcdef", true, uint8(0b0101), false, int32(0))
	f.Add(seed("system:node:", []string{"*.x"}, "127.0.0.1"), "alice", false, uint8(0b1111), false, int32(-1))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), user, false, uint8(0), true, int32(0))
	all := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageKeyEncipherment}
	p := &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
		return true, nil
	}, NodeRegistered: func(_ context.Context, name string) (bool, error) {
		return name == "ip-198-18-0-12.us-west-2.compute.internal", nil
	}, Issued: mapRecord{}}
	f.Fuzz(func(t *testing.T, request []byte, username string, client bool, usageBits uint8, inNodes bool, expiration int32) {
		c := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: SignerKubeletServing, Username: username,
		}}
		if client {
			c.Spec.SignerName = SignerKubeletClient
		}
		for i, u := range all {
			if usageBits&(1<<i) != 0 {
				c.Spec.Usages = append(c.Spec.Usages, u)
			}
		}
		if inNodes {
			c.Spec.Groups = []string{nodesGroup}
		} else {
			c.Spec.Groups = []string{"system:bootstrappers"}
		}
		if expiration != 0 {
			c.Spec.ExpirationSeconds = &expiration
		}
		d, err := p.Decide(t.Context(), c)
		if err != nil {
			t.Fatalf("Decide failed with a fault-free inventory and review: %v", err)
		}
		if d == nil || d.Reason == "" || d.Message == "" {
			t.Fatalf("decision without a reason: %+v", d)
		}
		if d.Approve != (d.Reason == ReasonApproved) {
			t.Fatalf("decision %+v: approval and reason disagree", d)
		}
	})
}
