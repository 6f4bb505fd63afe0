package authn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// stsFixture is the local STS on loopback TLS and a verifier that trusts it.
type stsFixture struct {
	sts  *localaws.STS
	srv  *httptest.Server
	host string
}

func newSTSFixture(t *testing.T) *stsFixture {
	t.Helper()
	s := localaws.NewSTS("111122223333")
	srv := httptest.NewTLSServer(s)
	t.Cleanup(srv.Close)
	return &stsFixture{sts: s, srv: srv, host: strings.TrimPrefix(srv.URL, "https://")}
}

func (f *stsFixture) verifier() *authn.Verifier {
	c := f.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &authn.Verifier{ClusterID: "demo", STSHosts: []string{f.host}, HTTP: c}
}

// credentials are an instance's credentials for the role "nodes", which the tests map.
func (f *stsFixture) credentials(t *testing.T, session string) localaws.Credentials {
	t.Helper()
	c, err := f.sts.InstanceCredentials(session, "nodes") // the node role every test maps
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *stsFixture) mint(t *testing.T, c localaws.Credentials) string {
	t.Helper()
	cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(f.srv.URL), HTTPClient: f.srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}
	tok, _, err := identity.Mint(t.Context(), cfg, "demo")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// sessionTokenMark starts the session token of every forged token.
const sessionTokenMark = "IQoJb3JpZ2luX2VjSESSIONTOKEN" //nolint:gosec // a marker searched for in outputs, not a credential

// forged returns a well-formed token for host whose signature STS will refuse.
func forged(host, accessKey string, n int) string {
	q := url.Values{
		"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}, "X-Amz-Algorithm": {"AWS4-HMAC-SHA256"},
		"X-Amz-Credential": {accessKey + "/" + time.Now().UTC().Format("20060102") + "/us-west-2/sts/aws4_request"},
		"X-Amz-Date":       {time.Now().UTC().Format("20060102T150405Z")}, "X-Amz-Expires": {"60"},
		"X-Amz-SignedHeaders": {"host;x-k8s-aws-id"}, "X-Amz-Signature": {fmt.Sprintf("%064x", n)},
		"X-Amz-Security-Token": {fmt.Sprintf("%s%d", sessionTokenMark, n)},
	}
	return identity.Prefix + base64.RawURLEncoding.EncodeToString([]byte("https://"+host+"/?"+q.Encode()))
}

func nodeInstances() instances {
	return instances{
		"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", PrivateDNSName: "ip-198-18-0-11.us-west-2.compute.internal", Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/nodes", AccountID: "111122223333"},
		"i-0bbbbbbbbbbbbbbbb": {ID: "i-0bbbbbbbbbbbbbbbb", State: "running", PrivateDNSName: "ip-198-18-0-12.us-west-2.compute.internal", Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/nodes", AccountID: "111122223333"},
	}
}

func staticMappings(_ context.Context) ([]authn.RoleMapping, error) {
	return []authn.RoleMapping{{RoleARN: "arn:aws:iam::111122223333:role/nodes", Username: "system:node:{{EC2PrivateDNSName}}",
		Groups: []string{"system:bootstrappers", "system:nodes"}, Source: "test"}}, nil
}

// review posts a TokenReview to the webhook at base and returns the HTTP status and answer.
func review(ctx context.Context, client *http.Client, base, token string) (int, authenticationv1.TokenReview, error) {
	body, _ := json.Marshal(authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/authenticate", bytes.NewReader(body))
	if err != nil {
		return 0, authenticationv1.TokenReview{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, authenticationv1.TokenReview{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out authenticationv1.TokenReview
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// flood sends perWorker garbage tokens from each of workers goroutines to the webhook at
// base (a loopback listener), until done or its requests are spent; it returns how many it sent.
func flood(ctx context.Context, base string, workers, perWorker int, garbage func(worker, i int) string) (*sync.WaitGroup, *atomic.Int64) {
	var wg sync.WaitGroup
	var sent atomic.Int64
	client := &http.Client{Timeout: 5 * time.Second}
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if ctx.Err() != nil {
					return
				}
				_, _, _ = review(ctx, client, base, garbage(g, i))
				sent.Add(1)
			}
		}()
	}
	return &wg, &sent
}

// A flood of thousands of garbage tokens from 20 connections does not stop a node
// authenticating at the same time: malformed tokens cost no STS budget, replayed
// forgeries are answered from the denial cache, and a node that authenticated before
// has its own budget even while distinct well-formed forgeries drain the shared one.
func TestWebhookSurvivesTokenFlood(t *testing.T) {
	f := newSTSFixture(t)
	w := &authn.Webhook{Verifier: f.verifier(), Mappings: staticMappings, Instances: nodeInstances()}
	srv := httptest.NewServer(w) // 127.0.0.1 only
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("webhook listens on %s, want loopback", srv.URL)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// Phase 1: 2,000 malformed tokens and replayed forgeries while a new node joins.
	replayed := []string{forged(f.host, "ASIAFORGED0000000001", 1), forged(f.host, "ASIAFORGED0000000002", 2)}
	garbage := func(g, i int) string {
		switch i % 4 {
		case 0:
			return fmt.Sprintf("garbage-%d-%d", g, i)
		case 1:
			return identity.Prefix + "!!not-base64!!"
		case 2:
			return identity.Prefix + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("https://evil.example/?n=%d", i)))
		default:
			return replayed[i%2]
		}
	}
	wg, sent := flood(ctx, srv.URL, 20, 100, garbage)
	for sent.Load() < 500 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	node := f.credentials(t, "i-0aaaaaaaaaaaaaaaa")
	code, out, err := review(ctx, srv.Client(), srv.URL, f.mint(t, node))
	wg.Wait()
	if err != nil || code != http.StatusOK || !out.Status.Authenticated {
		t.Fatalf("the node's review during a flood of %d garbage tokens: HTTP %d, %+v, %v", sent.Load(), code, out.Status, err)
	}
	if n := sent.Load(); n < 2000 {
		t.Fatalf("the flood sent %d tokens, want 2000", n)
	}

	// Phase 2: distinct well-formed forgeries (each costs an STS call) drain the shared
	// budget; the node that authenticated above presents a new token and still gets in.
	time.Sleep(1100 * time.Millisecond) // a new X-Amz-Date, so a new token, not a cache hit
	again := f.mint(t, node)
	wg, sent = flood(ctx, srv.URL, 20, 100, func(g, i int) string {
		return forged(f.host, fmt.Sprintf("ASIAFLOOD%02d%09d", g, i), g*1000+i)
	})
	for sent.Load() < 1000 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	code, out, err = review(ctx, srv.Client(), srv.URL, again)
	wg.Wait()
	if err != nil || code != http.StatusOK || !out.Status.Authenticated {
		t.Fatalf("a known node's new token during a flood of %d forgeries: HTTP %d, %+v, %v", sent.Load(), code, out.Status, err)
	}
}
