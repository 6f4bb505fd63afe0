package authn

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the webhook's Prometheus metrics.
type Metrics struct {
	// Reviews counts token reviews by outcome: authenticated, denied, throttled, error.
	Reviews *prometheus.CounterVec
	// Latency observes review seconds by outcome.
	Latency *prometheus.HistogramVec
	// CacheLookups and CacheHits give the cache hit rate.
	CacheLookups, CacheHits prometheus.Counter
	// AWSAuthInvalid counts reports of a malformed aws-auth ConfigMap or entry, or a
	// refused mapping (each time aws-auth is read).
	AWSAuthInvalid prometheus.Counter
	// Rejected counts webhook requests refused (HTTP 429) because the concurrency cap
	// was reached.
	Rejected prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodejoin_token_reviews_total", Help: "Token reviews by outcome."}, []string{"outcome"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodejoin_token_review_seconds", Help: "Token review latency by outcome.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
		}, []string{"outcome"}),
		CacheLookups: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodejoin_token_cache_lookups_total", Help: "Token cache lookups."}),
		CacheHits:    prometheus.NewCounter(prometheus.CounterOpts{Name: "nodejoin_token_cache_hits_total", Help: "Token cache hits."}),
		AWSAuthInvalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodejoin_aws_auth_invalid_total",
			Help: "Reports of a malformed aws-auth ConfigMap or entry, or of a refused mapping, each time aws-auth is read."}),
		Rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodejoin_webhook_rejected_total",
			Help: "Webhook requests refused with HTTP 429 because as many requests as allowed were in flight."}),
	}
	reg.MustRegister(m.Reviews, m.Latency, m.CacheLookups, m.CacheHits, m.AWSAuthInvalid, m.Rejected)
	return m
}
