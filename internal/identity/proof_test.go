package identity_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// The proof rides in the token, out of the URL STS is asked, and the signature covers
// it: the same token with another proof is refused by STS.
func TestProofIsBoundToTheToken(t *testing.T) {
	sts := localaws.NewSTS("111122223333")
	srv := httptest.NewTLSServer(sts)
	defer srv.Close()
	creds, err := sts.InstanceCredentials("i-0123456789abcdef0", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.Token)}
	proof := identity.Proof{Document: []byte(`{"instanceId":"i-0123456789abcdef0"}`), Signature: []byte{1, 2, 3}}
	token, _, err := identity.MintWithProof(t.Context(), cfg, "demo", &proof)
	if err != nil {
		t.Fatal(err)
	}
	req, err := identity.Parse(token, []string{strings.TrimPrefix(srv.URL, "https://")}, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if req.Proof != proof.Encode() || strings.Contains(req.URL.RawQuery, identity.ProofParam) || req.Query.Has(identity.ProofParam) {
		t.Fatalf("proof %q, query %q", req.Proof, req.URL.RawQuery)
	}
	if code, body := send(t, srv, req, "demo", req.Proof); code != http.StatusOK {
		t.Fatalf("with its proof: %d %s", code, body)
	}
	other := identity.Proof{Document: []byte(`{"instanceId":"i-0fffffffffffffff0"}`), Signature: []byte{1, 2, 3}}
	if code, body := send(t, srv, req, "demo", other.Encode()); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("with another proof: %d %s", code, body)
	}
}

func TestDecodeProof(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"ZG9j.c2ln", ""},
		{"ZG9j", "not <document>.<signature>"},
		{".c2ln", "not <document>.<signature>"},
		{"ZG9j.", "not <document>.<signature>"},
		{"ZG9j=.c2ln", "document is not unpadded base64url"},
		{"ZG9j.c2l+", "signature is not unpadded base64url"},
		{strings.Repeat("A", 6000) + ".c2ln", "the proof exceeds"},
	} {
		_, err := identity.DecodeProof(tt.in)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("DecodeProof(%.20q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestParseDocument(t *testing.T) {
	good := `{"accountId":"111122223333","instanceId":"i-0123456789abcdef0","region":"us-west-2","pendingTime":"2026-01-01T00:00:00Z","billingProducts":null}`
	for _, tt := range []struct{ in, want string }{
		{good, ""},
		{good + "{}", "data after its object"},
		{`[]`, "not JSON"},
		{strings.Replace(good, "i-0123456789abcdef0", "i-xyz", 1), "no instance ID"},
		{strings.Replace(good, "111122223333", "1111", 1), "no 12-digit account ID"},
		{strings.Replace(good, "us-west-2", "", 1), "no region"},
		{strings.Replace(good, `"pendingTime":"2026-01-01T00:00:00Z",`, "", 1), "no pending time"},
	} {
		_, err := identity.ParseDocument([]byte(tt.in))
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ParseDocument(%.40q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// Property: an accepted proof re-encodes to the same text, and an accepted document
// names an instance ID of EC2's form; no error quotes the input.
func FuzzDecodeProof(f *testing.F) {
	f.Add("ZG9j.c2ln")
	f.Add(identity.Proof{Document: []byte(`{"accountId":"111122223333","instanceId":"i-0123456789abcdef0","region":"us-west-2","pendingTime":"2026-01-01T00:00:00Z"}`), Signature: []byte("s")}.Encode())
	f.Fuzz(func(t *testing.T, s string) {
		p, err := identity.DecodeProof(s)
		if err != nil {
			if len(s) > 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		if p.Encode() != s {
			t.Fatalf("re-encoded %q, want %q", p.Encode(), s)
		}
		d, err := identity.ParseDocument(p.Document)
		if err != nil {
			return
		}
		if !strings.HasPrefix(d.InstanceID, "i-") || len(d.AccountID) != 12 || d.PendingTime.IsZero() {
			t.Fatalf("accepted document %+v", d)
		}
	})
}
