package authn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/authn"
)

// An STS that cannot be reached, fails TLS, times out or answers 5xx makes a retryable
// error (HTTP 500 to kube-apiserver), never a denial, and no error, log line or
// TokenReview status carries the token's signature, session token or query.
func TestSTSFailuresNeverLeakTheToken(t *testing.T) {
	var lc net.ListenConfig
	closed, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedHost := closed.Addr().String()
	_ = closed.Close()

	// echo answers with the request's URL in the body, as a careless proxy might.
	echo := func(status int) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(status)
			_, _ = fmt.Fprintf(rw, `<ErrorResponse><Error><Code>InternalFailure</Code><Message>%s</Message></Error></ErrorResponse>`, html.EscapeString(r.URL.String()))
		})
	}
	slow := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	tlsServer := func(h http.Handler) (string, *http.Client) {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are expected
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "https://"), srv.Client()
	}

	for _, tc := range []struct {
		name  string
		setup func() (host string, client *http.Client)
		want  string
	}{
		{"connection refused", func() (string, *http.Client) { return closedHost, &http.Client{Timeout: time.Second} }, "connection refused"},
		{"DNS failure", func() (string, *http.Client) {
			return "sts.nodejoin-test.invalid", &http.Client{Timeout: time.Second, Transport: &http.Transport{
				DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}}
				},
			}}
		}, "DNS lookup failed"},
		{"TLS handshake failure", func() (string, *http.Client) {
			host, _ := tlsServer(echo(200))
			return host, &http.Client{Timeout: time.Second} // does not trust the server's CA
		}, "TLS handshake failed"},
		{"timeout", func() (string, *http.Client) {
			host, c := tlsServer(slow)
			c.Timeout = 200 * time.Millisecond
			return host, c
		}, "timeout"},
		{"HTTP 500", func() (string, *http.Client) { return tlsServer(echo(http.StatusInternalServerError)) }, "HTTP 500 (InternalFailure)"},
		{"HTTP 503", func() (string, *http.Client) { return tlsServer(echo(http.StatusServiceUnavailable)) }, "HTTP 503 (InternalFailure)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, client := tc.setup()
			var logs bytes.Buffer
			w := &authn.Webhook{
				Verifier: &authn.Verifier{ClusterID: "demo", STSHosts: []string{host}, HTTP: client},
				Mappings: staticMappings, Instances: nodeInstances(),
				Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}
			token := forged(host, "ASIALEAKTEST00000001", 0xfeed)
			secrets := []string{fmt.Sprintf("%064x", 0xfeed), sessionTokenMark, "X-Amz-Signature", "X-Amz-Security-Token", "X-Amz-Credential", "ASIALEAKTEST", strings.TrimPrefix(token, "k8s-aws-v1.")[:40]}

			_, verr := w.Verifier.Verify(t.Context(), token)
			_, aerr := w.Authenticate(t.Context(), token)
			srv := httptest.NewServer(w)
			defer srv.Close()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"`+token+`"}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()

			for what, out := range map[string]string{"Verify's error": fmt.Sprint(verr), "Authenticate's error": fmt.Sprint(aerr), "the TokenReview answer": string(body), "the logs": logs.String()} {
				for _, s := range secrets {
					if strings.Contains(out, s) {
						t.Errorf("%s contains %q: %s", what, s, out)
					}
				}
			}
			if !errors.Is(verr, authn.ErrUnavailable) || errors.Is(verr, authn.ErrDenied) || !strings.Contains(verr.Error(), tc.want) || !strings.Contains(verr.Error(), host) {
				t.Errorf("Verify = %v, want a retryable error naming %s and %q", verr, host, tc.want)
			}
			if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), tc.want) {
				t.Errorf("webhook answered HTTP %d %s, want 500 (kube-apiserver retries it) saying %q", resp.StatusCode, body, tc.want)
			}
		})
	}
}
