package httpserver

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strconv"
	"time"
)

// Limits bound what one client can hold of a server that faces untrusted callers (the
// token webhook): how long it may take to send a request, how long a response may
// take, how long an idle connection stays open, and how many requests run at once.
type Limits struct {
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are http.Server's;
	// defaults 5 s, 15 s, 30 s and 60 s. A slowloris client, sending its request a
	// byte at a time, is cut off after ReadHeaderTimeout.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxInFlight caps the requests handled at once (default 64); beyond it a request
	// is answered 429 with Retry-After at once, never queued.
	MaxInFlight int
	// RetryAfter is the Retry-After of a rejected request; default 1 s.
	RetryAfter time.Duration
	// Rejected, when set, is called for every request rejected by the cap.
	Rejected func()
}

// Default limits; see Limits.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxInFlight       = 64
)

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.RetryAfter, time.Second)
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	return l
}

// NewLimited returns a server for h with the timeouts of lim, its handler capped at
// lim.MaxInFlight requests at once (zero fields take the defaults).
func NewLimited(h http.Handler, lim Limits) *http.Server {
	lim = lim.withDefaults()
	return &http.Server{
		Handler:           Limit(h, lim.MaxInFlight, lim.RetryAfter, lim.Rejected),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
	}
}

// Limit lets at most max requests into h at once. A request beyond that is not queued:
// it is answered 429 Too Many Requests with Retry-After (whole seconds, at least 1),
// which kube-apiserver's webhook client retries with backoff, and rejected is called.
func Limit(h http.Handler, max int, retryAfter time.Duration, rejected func()) http.Handler {
	slots := make(chan struct{}, max)
	secs := strconv.Itoa(max1(int((retryAfter + time.Second - 1) / time.Second)))
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			if rejected != nil {
				rejected()
			}
			rw.Header().Set("Retry-After", secs)
			http.Error(rw, "too many requests in flight", http.StatusTooManyRequests)
			return
		}
		defer func() { <-slots }()
		h.ServeHTTP(rw, r)
	})
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// MutualTLS is a server configuration that serves cert and completes a handshake only
// with a client that presents a certificate signed by one of clientCAs: any other client,
// one without a certificate included, fails at the TLS handshake, before HTTP.
func MutualTLS(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
	}
}
