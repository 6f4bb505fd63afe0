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
	// StandardMappings counts callers mapped through a STANDARD access entry, once per
	// access policy the entry grants (policy "none" when it grants none): how often an
	// administrator's rights were handed out. Cache hits are not counted again.
	StandardMappings *prometheus.CounterVec
	// RefusedMappings counts callers denied because the mapping naming them may not be
	// used (a group only access policies grant, system:masters, an IAM user in
	// mapRoles), by the kind of mapping: aws-auth or access-entry.
	RefusedMappings *prometheus.CounterVec
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
		StandardMappings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodejoin_token_standard_mappings_total",
			Help: "Callers mapped through a STANDARD access entry, per access policy granted (none: no policy)."}, []string{"policy"}),
		RefusedMappings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodejoin_token_refused_mappings_total",
			Help: "Callers denied because the mapping naming them may not be used, by kind of mapping (aws-auth, access-entry)."}, []string{"source"}),
	}
	reg.MustRegister(m.Reviews, m.Latency, m.CacheLookups, m.CacheHits, m.AWSAuthInvalid, m.Rejected, m.StandardMappings, m.RefusedMappings)
	return m
}
