package identity_test

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

func mint(t *testing.T, srv *httptest.Server, c localaws.Credentials, cluster string) string {
	t.Helper()
	cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}
	token, exp, err := identity.Mint(t.Context(), cfg, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 13*time.Minute || d > 14*time.Minute {
		t.Errorf("token expiry in %v, want 14 minutes", d)
	}
	return token
}

// call sends the token's presigned request to STS as a verifier does: with its own
// cluster's name in the x-k8s-aws-id header.
func call(t *testing.T, srv *httptest.Server, token, cluster string) (int, string) {
	t.Helper()
	req, err := identity.Parse(token, []string{strings.TrimPrefix(srv.URL, "https://")}, time.Now(), 5*time.Minute)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return send(t, srv, req, cluster, "")
}

// send sends a parsed token's request to STS as the verifier does: the cluster's name in
// the x-k8s-aws-id header and, when given, the instance proof in its signed header.
func send(t *testing.T, srv *httptest.Server, req *identity.Request, cluster, proof string) (int, string) {
	t.Helper()
	hr, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, req.URL.String(), nil)
	hr.Header.Set(identity.ClusterHeader, cluster)
	if proof != "" {
		hr.Header.Set(identity.ProofHeader, proof)
	}
	resp, err := srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A token minted by the AWS SDK verifies at the local STS, for its cluster only.
func TestTokenRoundTrip(t *testing.T) {
	sts := localaws.NewSTS("111122223333")
	srv := httptest.NewTLSServer(sts)
	defer srv.Close()
	creds, err := sts.InstanceCredentials("i-0123456789abcdef0", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	token := mint(t, srv, creds, "demo")
	if !strings.HasPrefix(token, "k8s-aws-v1.") || strings.Contains(token, "=") {
		t.Errorf("token %q is not k8s-aws-v1. + unpadded base64url", token[:20])
	}
	code, body := call(t, srv, token, "demo")
	if code != http.StatusOK || !strings.Contains(body, "<Arn>arn:aws:sts::111122223333:assumed-role/nodes/i-0123456789abcdef0</Arn>") {
		t.Fatalf("GetCallerIdentity = %d %s", code, body)
	}
	if code, body := call(t, srv, token, "other-cluster"); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("token of another cluster = %d %s", code, body)
	}
	forged := creds
	forged.SecretAccessKey = strings.Repeat("x", 40)
	if code, body := call(t, srv, mint(t, srv, forged, "demo"), "demo"); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("forged token = %d %s", code, body)
	}
	unknown := localaws.Credentials{AccessKeyID: "ASIAUNKNOWN", SecretAccessKey: "s", Token: "t"}
	if code, body := call(t, srv, mint(t, srv, unknown, "demo"), "demo"); code != http.StatusForbidden || !strings.Contains(body, "InvalidClientTokenId") {
		t.Errorf("unknown credentials = %d %s", code, body)
	}
}

func TestParseRejectsMalformedTokens(t *testing.T) {
	now := time.Now().UTC()
	date := now.Format("20060102T150405Z")
	base := url.Values{
		"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}, "X-Amz-Algorithm": {"AWS4-HMAC-SHA256"},
		"X-Amz-Credential": {"ASIAX/" + date[:8] + "/us-west-2/sts/aws4_request"}, "X-Amz-Date": {date}, "X-Amz-Expires": {"60"},
		"X-Amz-SignedHeaders": {"host;x-k8s-aws-id"}, "X-Amz-Signature": {"00"},
	}
	enc := func(rawURL string) string {
		return identity.Prefix + base64.RawURLEncoding.EncodeToString([]byte(rawURL))
	}
	with := func(k, v string) string {
		q := url.Values{}
		for kk, vv := range base {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return enc("https://sts.local/?" + q.Encode())
	}
	tests := []struct{ token, want string }{
		{enc("https://sts.local/?" + base.Encode()), ""},
		{strings.Repeat("a", 13000), "token is too large"},
		{"k8s-aws-v2.abc", `missing expected "k8s-aws-v1." prefix`},
		{identity.Prefix + "!!!", "not unpadded base64url"},
		{enc("http://sts.local/?" + base.Encode()), `unexpected scheme "http"`},
		{enc("https://evil.example/?" + base.Encode()), `unexpected hostname "evil.example"`},
		{enc("https://sts.local/x?" + base.Encode()), "unexpected path"},
		{enc("https://sts.local/?" + base.Encode() + "&action=GetCallerIdentity"), "duplicate query parameter found"},
		{enc("https://sts.local/?" + base.Encode() + "&Foo=1"), `non-whitelisted query parameter "Foo"`},
		{enc("https://sts.local/?" + base.Encode() + "&X-Amz-Expires=61"), "query parameter with multiple values not supported"},
		{with("Action", "AssumeRole"), "unexpected action parameter"},
		{with("X-Amz-SignedHeaders", "host"), "did not sign the x-k8s-aws-id header"},
		{with("X-Amz-Expires", "901"), "invalid X-Amz-Expires"},
		{with("X-Amz-Date", ""), "X-Amz-Date parameter must be present"},
		{with("X-Amz-Date", now.Add(-16*time.Minute).Format("20060102T150405Z")), "is expired (15 minute expiration)"},
		{with("X-Amz-Date", now.Add(10*time.Minute).Format("20060102T150405Z")), "is in the future"},
		{with("X-Amz-Credential", "ASIAX/"+date[:8]+"/us-west-2/s3/aws4_request"), "malformed X-Amz-Credential"},
		{with("X-Amz-Security-Token", strings.Repeat("t", 3500)), "token is too large"},
		{with(identity.ProofParam, "ZG9j.c2ln"), "did not sign the x-nodejoin-iid header"},
		{with("X-Amz-SignedHeaders", "host;x-k8s-aws-id;x-nodejoin-iid"), "x-nodejoin-iid header is signed but the token carries no instance proof"},
	}
	for _, tt := range tests {
		_, err := identity.Parse(tt.token, []string{"sts.local"}, now, 5*time.Minute)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("valid token rejected: %v", err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("error = %v, want %q", err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte("https://sts.local/?Action=GetCallerIdentity")))
	f.Fuzz(func(t *testing.T, token string) {
		if r, err := identity.Parse(token, []string{"sts.local"}, time.Now(), time.Minute); err == nil && r.URL.Host != "sts.local" {
			t.Fatalf("accepted host %q", r.URL.Host)
		}
	})
}
