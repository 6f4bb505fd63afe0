package authn_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/identity"

	"github.com/nodejoin/nodejoin/internal/localaws/imds"
)

const (
	instA = "i-0aaaaaaaaaaaaaaaa"
	instB = "i-0bbbbbbbbbbbbbbbb"
)

// proofInstances are two running instances of the node role, with their addresses.
func proofInstances() instances {
	in := nodeInstances()
	in[instA].IPs = []netip.Addr{netip.MustParseAddr("198.18.0.11")}
	in[instB].IPs = []netip.Addr{netip.MustParseAddr("198.18.0.12")}
	return in
}

// document is an instance identity document of instA as EC2 writes one.
func document(t *testing.T, account, region, ip string, pending time.Time) []byte {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"accountId": account, "architecture": "x86_64", "availabilityZone": region + "a",
		"imageId": "ami-0123456789abcdef0", "instanceId": instA, "instanceType": "m5.large", "pendingTime": pending.UTC().Format(time.RFC3339),
		"privateIp": ip, "region": region, "version": "2017-09-30"}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, s *imds.Signer, doc []byte) *identity.Proof {
	t.Helper()
	sig, err := s.Sign(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &identity.Proof{Document: doc, Signature: sig}
}

// mintProof mints a token of the role session named session, carrying proof (nil: none).
func (f *stsFixture) mintProof(t *testing.T, session string, proof *identity.Proof) string {
	t.Helper()
	c := f.credentials(t, session)
	cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(f.srv.URL), HTTPClient: f.srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}
	tok, _, err := identity.MintWithProof(t.Context(), cfg, "demo", proof)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func requiringMappings(required bool) func(context.Context) ([]authn.RoleMapping, error) {
	return func(ctx context.Context) ([]authn.RoleMapping, error) {
		m, _ := staticMappings(ctx)
		m[0].RequireInstanceProof = required
		m[0].Source = "NodeAccessEntry nodes"
		return m, nil
	}
}

// A principal that can assume the node role names another running instance of the role
// in its session: without that instance's signed identity document it is denied, with
// the reason; the instance itself, with its document, is admitted.
func TestInstanceProof(t *testing.T) {
	f := newSTSFixture(t)
	signer, err := imds.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	other, err := imds.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	launched := now.Add(-5 * time.Minute)
	docA := document(t, "111122223333", "us-west-2", "198.18.0.11", launched)
	proofA := sign(t, signer, docA)
	tests := []struct {
		name     string
		session  string
		proof    *identity.Proof
		required bool // by the mapping
		cluster  bool // by the cluster
		noCerts  bool
		want     string // "" = admitted as instA's node
	}{
		{name: "valid proof", session: instA, proof: proofA, required: true},
		{name: "valid proof, not required", session: instA, proof: proofA},
		{name: "plain token where not required", session: instA},
		{name: "a bad proof where none is required is not looked at, as a plain token", session: instA, proof: sign(t, other, docA)},
		{name: "plain token where the entry requires a proof", session: instA, required: true,
			want: "NodeAccessEntry nodes requires an instance proof of " + instA + ", and the token carries none"},
		{name: "plain token where the cluster requires a proof", session: instA, cluster: true,
			want: "the cluster requires an instance proof of " + instA + ", and the token carries none"},
		{name: "required, no certificate to check it", session: instA, proof: proofA, required: true, noCerts: true,
			want: "but the webhook has no instance identity certificate to check it"},
		{name: "another instance's session with its own proof (the attack)", session: instB, proof: proofA, required: true,
			want: "the identity document names instance " + instA + ", not the token's session " + instB},
		{name: "another instance's session, no proof (the attack)", session: instB, required: true,
			want: "requires an instance proof of " + instB + ", and the token carries none"},
		{name: "signed by another key", session: instA, proof: sign(t, other, docA), required: true,
			want: "signature does not verify against the instance identity certificate"},
		{name: "tampered document", session: instA, proof: &identity.Proof{Document: document(t, "111122223333", "us-west-2", "198.18.0.11", now), Signature: proofA.Signature},
			required: true, want: "signature does not verify"},
		{name: "other account", session: instA, proof: sign(t, signer, document(t, "999988887777", "us-west-2", "198.18.0.11", launched)),
			required: true, want: "the identity document names account 999988887777, not the token's account 111122223333"},
		{name: "other region", session: instA, proof: sign(t, signer, document(t, "111122223333", "eu-west-1", "198.18.0.11", launched)),
			required: true, want: "names region eu-west-1, not one of us-west-2"},
		{name: "other address", session: instA, proof: sign(t, signer, document(t, "111122223333", "us-west-2", "198.18.0.99", launched)),
			required: true, want: `private IP "198.18.0.99" is not an address of the instance`},
		{name: "stale", session: instA, proof: sign(t, signer, document(t, "111122223333", "us-west-2", "198.18.0.11", now.Add(-2*time.Hour))),
			required: true, want: "the identity document is stale"},
		{name: "future", session: instA, proof: sign(t, signer, document(t, "111122223333", "us-west-2", "198.18.0.11", now.Add(time.Hour))),
			required: true, want: "is in the future"},
		{name: "garbage", session: instA, proof: &identity.Proof{Document: []byte("{}"), Signature: []byte("x")}, required: true,
			want: "signature does not verify"},
		{name: "signed garbage", session: instA, proof: sign(t, signer, []byte(`{"instanceId":"i-0aaaaaaaaaaaaaaaa"}`)), required: true,
			want: "has no 12-digit account ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := &authn.InstanceProofs{Certs: []*x509.Certificate{signer.Cert}, Required: tt.cluster, Regions: []string{"us-west-2"}, MaxAge: time.Hour}
			if tt.noCerts {
				ip.Certs = nil
			}
			w := &authn.Webhook{Verifier: f.verifier(), Mappings: requiringMappings(tt.required), Instances: proofInstances(), InstanceProofs: ip}
			tok := f.mintProof(t, tt.session, tt.proof)
			u, err := w.Authenticate(t.Context(), tok)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tt.want == "" && u.Username != "system:node:ip-198-18-0-11.us-west-2.compute.internal":
				t.Fatalf("user %s", u.Username)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), tok[20:60]) {
				t.Errorf("the denial quotes the token: %v", err)
			}
		})
	}
}

// The first document accepted for an instance is pinned: another one, even validly
// signed (a re-issued or leaked document of another launch), is refused.
func TestInstanceProofTrustOnFirstUse(t *testing.T) {
	f := newSTSFixture(t)
	signer, err := imds.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ip := &authn.InstanceProofs{Certs: []*x509.Certificate{signer.Cert}}
	first := sign(t, signer, document(t, "111122223333", "us-west-2", "198.18.0.11", now.Add(-time.Minute)))
	second := sign(t, signer, document(t, "111122223333", "us-west-2", "198.18.0.11", now.Add(-2*time.Minute)))
	review := func(p *identity.Proof) error {
		w := &authn.Webhook{Verifier: f.verifier(), Mappings: requiringMappings(true), Instances: proofInstances(), InstanceProofs: ip}
		_, err := w.Authenticate(t.Context(), f.mintProof(t, instA, p))
		return err
	}
	if err := review(first); err != nil {
		t.Fatalf("first proof: %v", err)
	}
	if err := review(second); err == nil || !strings.Contains(err.Error(), "another identity document of this instance was accepted first") {
		t.Fatalf("second document: %v", err)
	}
	if err := review(first); err != nil {
		t.Fatalf("the pinned document again: %v", err)
	}
}

// A certificate file holds the signer's certificate; anything else is refused.
func TestParseCertificates(t *testing.T) {
	signer, err := imds.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := authn.ParseCertificates(signer.CertPEM)
	if err != nil || len(certs) != 1 || !certs[0].Equal(signer.Cert) {
		t.Fatalf("ParseCertificates = %v, %v", certs, err)
	}
	if _, err := authn.ParseCertificates([]byte("not PEM")); err == nil {
		t.Error("garbage accepted")
	}
}

// A caller that is not an instance's node needs no proof, even where nodes need one.
func TestInstanceProofOnlyForNodes(t *testing.T) {
	f := newSTSFixture(t)
	mappings := func(context.Context) ([]authn.RoleMapping, error) {
		return []authn.RoleMapping{{RoleARN: "arn:aws:iam::111122223333:role/nodes", Username: "ops-{{SessionName}}", Source: "test", RequireInstanceProof: true}}, nil
	}
	w := &authn.Webhook{Verifier: f.verifier(), Mappings: mappings, Instances: proofInstances(), InstanceProofs: &authn.InstanceProofs{Required: true}}
	if _, err := w.Authenticate(t.Context(), f.mintProof(t, "alice", nil)); err != nil {
		t.Fatal(err)
	}
}

// Property: a proof Check accepts decodes to a document signed by the certificate,
// naming the caller's instance and account, and re-encodes to the same text; every
// refusal is a denial that does not quote the proof.
func FuzzInstanceProof(f *testing.F) {
	signer, err := imds.NewSigner()
	if err != nil {
		f.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"accountId": "111122223333", "instanceId": instA, "region": "us-west-2",
		"pendingTime": "2026-01-01T00:00:00Z", "privateIp": "198.18.0.11"})
	sig, err := signer.Sign(doc)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(identity.Proof{Document: doc, Signature: sig}.Encode())
	f.Add("e30.eA")
	caller := &authn.Caller{Account: "111122223333", SessionName: instA}
	f.Fuzz(func(t *testing.T, proof string) {
		ip := &authn.InstanceProofs{Certs: []*x509.Certificate{signer.Cert}}
		err := ip.Check(caller, nil, proof)
		if err != nil {
			if !errors.Is(err, authn.ErrDenied) || (len(proof) > 8 && strings.Contains(err.Error(), proof)) {
				t.Fatalf("refusal %v", err)
			}
			return
		}
		p, err := identity.DecodeProof(proof)
		if err != nil || p.Encode() != proof {
			t.Fatalf("accepted proof does not re-encode: %v", err)
		}
		d, err := identity.ParseDocument(p.Document)
		if err != nil || d.InstanceID != instA || d.AccountID != "111122223333" {
			t.Fatalf("accepted document %+v, %v", d, err)
		}
		sum := sha256.Sum256(p.Document)
		if rsa.VerifyPKCS1v15(signer.Cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], p.Signature) != nil {
			t.Fatal("accepted an unsigned document")
		}
	})
}

// The cost of checking a proof (decode, RSA-2048 verification, parse, pin), which the
// webhook adds to a review that requires one; reviews answered from the cache pay none.
func BenchmarkInstanceProofCheck(b *testing.B) {
	signer, err := imds.NewSigner()
	if err != nil {
		b.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"accountId": "111122223333", "instanceId": instA, "region": "us-west-2",
		"pendingTime": "2026-01-01T00:00:00Z", "privateIp": "198.18.0.11"})
	sig, err := signer.Sign(doc)
	if err != nil {
		b.Fatal(err)
	}
	proof := identity.Proof{Document: doc, Signature: sig}.Encode()
	ip := &authn.InstanceProofs{Certs: []*x509.Certificate{signer.Cert}}
	caller := &authn.Caller{Account: "111122223333", SessionName: instA}
	for b.Loop() {
		if err := ip.Check(caller, nil, proof); err != nil {
			b.Fatal(err)
		}
	}
}
