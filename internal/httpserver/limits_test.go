package httpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/pki"
)

// keyPair issues a leaf of ca as a tls.Certificate.
func keyPair(t *testing.T, ca *pki.CA, req pki.Request) tls.Certificate {
	t.Helper()
	req.Validity = time.Hour
	kp, err := ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(kp.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func serve(t *testing.T, srv *http.Server, tlsConfig *tls.Config) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serving: %v", err)
		}
	})
	return l.Addr().String()
}

// TestMutualTLSRejectsOtherClients: the webhook's TLS completes only with a client
// certificate of the client CA; no certificate, or one of another CA, fails the
// handshake and the handler never runs.
func TestMutualTLSRejectsOtherClients(t *testing.T) {
	serverCA, clientCA, otherCA := newCA(t, "server-ca"), newCA(t, "client-ca"), newCA(t, "other-ca")
	serving := keyPair(t, serverCA, pki.Request{CommonName: "webhook", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAuth})
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	var handled atomic.Int32
	h := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		handled.Add(1)
		_, _ = rw.Write([]byte("ok"))
	})
	addr := serve(t, NewLimited(h, Limits{}), MutualTLS(serving, pool))
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)

	get := func(certs ...tls.Certificate) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+addr+"/", nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	for name, certs := range map[string][]tls.Certificate{
		"no client certificate":                nil,
		"another CA's client":                  {keyPair(t, otherCA, pki.Request{CommonName: "kube-apiserver", Usage: pki.ClientAuth})},
		"the server CA's client":               {keyPair(t, serverCA, pki.Request{CommonName: "kube-apiserver", Usage: pki.ClientAuth})},
		"a serving-only cert of the client CA": {keyPair(t, clientCA, pki.Request{CommonName: "kube-apiserver", Usage: pki.ServerAuth})},
	} {
		if err := get(certs...); err == nil {
			t.Errorf("%s: request served, want a failed TLS handshake", name)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for rejected clients", n)
	}
	if err := get(keyPair(t, clientCA, pki.Request{CommonName: "kube-apiserver", Usage: pki.ClientAuth})); err != nil {
		t.Fatalf("the client CA's client: %v", err)
	}
}

// TestLimitRejectsBeyondTheCap: with N requests parked in the handler, the N+1th is
// answered 429 with Retry-After at once, and counted; once one finishes, the next is
// served.
func TestLimitRejectsBeyondTheCap(t *testing.T) {
	const n = 3
	release := make(chan struct{})
	parked := make(chan struct{}, n)
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/park" {
			parked <- struct{}{}
			<-release
		}
		_, _ = rw.Write([]byte("ok"))
	})
	var rejected atomic.Int32
	addr := serve(t, NewLimited(h, Limits{MaxInFlight: n, RetryAfter: 2 * time.Second, Rejected: func() { rejected.Add(1) }}), nil)
	client := &http.Client{Timeout: 2 * time.Minute}
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	errs := make(chan error, n)
	for range n {
		go func() {
			resp, err := get("/park")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range n {
		<-parked
	}
	resp, err := get("/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("request %d: %s, Retry-After %q; want 429 with Retry-After 2", n+1, resp.Status, resp.Header.Get("Retry-After"))
	}
	if got := rejected.Load(); got != 1 {
		t.Errorf("rejected counted %d times, want 1", got)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("parked request: %v", err)
		}
	}
	resp, err = get("/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the parked requests finished: %s, want 200", resp.Status)
	}
}

// TestSlowlorisIsCutOff: a client that sends its request headers a byte at a time, never
// finishing them, is disconnected by the server once ReadHeaderTimeout passes.
func TestSlowlorisIsCutOff(t *testing.T) {
	srv := NewLimited(http.NotFoundHandler(), Limits{ReadHeaderTimeout: 500 * time.Millisecond})
	if srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 {
		t.Fatalf("timeouts read %s, write %s, idle %s: want all set", srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	addr := serve(t, srv, nil)
	var d net.Dialer
	conn, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	closed := make(chan struct{})
	go func() {
		// The server answers nothing to an unfinished request; a read returns only
		// when it closes the connection (or sends a 408, then closes).
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
		close(closed)
	}()
	partial := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			return // cut off
		case <-deadline:
			t.Fatal("a slowloris connection was still open after two minutes")
		case <-tick.C:
			b := []byte{'a'}
			if i < len(partial) {
				b = []byte{partial[i]}
			}
			if _, err := conn.Write(b); err != nil {
				return // the server closed the connection
			}
		}
	}
}
