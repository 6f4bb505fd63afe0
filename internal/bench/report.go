package bench

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/kubeletsim"
)

// report computes the figures from what was recorded.
func (r *run) report(start time.Time, kubelets []*kubeletsim.Kubelet, csrs []csrSeen, ready map[string]time.Time, c *counters, m0, m1 []sample) *Report {
	n := len(kubelets)
	rep := &Report{Nodes: n, Identity: r.opts.Identity, Approver: r.approver, CSRs: len(csrs)}
	var toApproved, toIssued, createToIssued []time.Duration
	var lastIssued time.Time
	issuedBy := map[string]time.Time{} // CSR name → issued
	for _, s := range csrs {
		switch {
		case s.denied:
			rep.Denied++
		case s.failed:
		case s.issued.IsZero():
			rep.LeftPending++
		}
		if len(s.certs) > 1 {
			rep.IssuedTwice++
		}
		if !s.approved.IsZero() {
			toApproved = append(toApproved, s.approved.Sub(s.created))
		}
		if !s.issued.IsZero() {
			toIssued = append(toIssued, s.issued.Sub(s.approved))
			createToIssued = append(createToIssued, s.issued.Sub(s.created))
			issuedBy[s.name] = s.issued
			if s.issued.After(lastIssued) {
				lastIssued = s.issued
			}
		}
	}
	rep.CSRCreateToApprovedMS = percentiles(toApproved)
	rep.CSRApprovedToIssuedMS = percentiles(toIssued)
	rep.CSRCreateToIssuedMS = percentiles(createToIssued)
	var lastReady time.Time
	joined := make([]float64, 0, n)
	for _, k := range kubelets {
		st := k.Status()
		at := ready[st.Node]
		if at.After(lastReady) {
			lastReady = at
		}
		for _, name := range []string{st.ServingCertificate.CSR, st.ClientCertificate.CSR} {
			if t, ok := issuedBy[name]; ok && t.After(at) {
				at = t
			}
		}
		joined = append(joined, seconds(at.Sub(start)))
	}
	slices.Sort(joined)
	rep.JoinedSeconds = joined
	if len(joined) > 0 {
		rep.MedianJoinSeconds = joined[len(joined)/2]
		rep.AllIssuedSeconds = joined[len(joined)-1]
		rep.SecondsPerNode = round(rep.AllIssuedSeconds/float64(n), 4)
	}
	if !lastReady.IsZero() {
		rep.AllReadySeconds = seconds(lastReady.Sub(start))
	}
	rep.APIRequestsPerNode = perNode(c.api.total, n)
	rep.APIRequestsPerNodeByCall = c.calls
	rep.CloudCalls = CloudCalls{STS: c.sts, EC2: c.ec2, IAM: c.iam}
	rep.CloudCallsPerNode = perNode(float64(c.sts+c.ec2+c.iam), n)
	rep.DescribeInstancesPerNode = perNode(float64(c.ec2), n)
	rep.TokenReviews = int(sum(m1, "nodejoin_token_reviews_total") - sum(m0, "nodejoin_token_reviews_total"))
	lookups := sum(m1, "nodejoin_token_cache_lookups_total") - sum(m0, "nodejoin_token_cache_lookups_total")
	hits := sum(m1, "nodejoin_token_cache_hits_total") - sum(m0, "nodejoin_token_cache_hits_total")
	rep.WebhookCacheHitRate = ratio(hits, lookups)
	delta := histogramDelta(m0, m1, "nodejoin_token_review_seconds_bucket")
	rep.WebhookMS = Webhook{P50: round(1000*histogramQuantile(delta, "nodejoin_token_review_seconds_bucket", 0.5), 1),
		P99: round(1000*histogramQuantile(delta, "nodejoin_token_review_seconds_bucket", 0.99), 1)}
	return rep
}

// histogramDelta subtracts the buckets of before from after, label set by label set.
func histogramDelta(before, after []sample, name string) []sample {
	key := func(s sample) string {
		keys := make([]string, 0, len(s.labels))
		for k, v := range s.labels {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		return strings.Join(keys, ",")
	}
	prev := map[string]float64{}
	for _, s := range before {
		if s.name == name {
			prev[key(s)] += s.value
		}
	}
	var out []sample
	for _, s := range after {
		if s.name == name {
			s.value -= prev[key(s)]
			out = append(out, s)
		}
	}
	return out
}

// controllerMetrics reads every live replica's metrics (the webhook's figures), added
// up by the callers.
func (r *run) controllerMetrics(ctx context.Context) []sample {
	var all []sample
	for _, rep := range r.replicas {
		if rep.killed {
			continue
		}
		raw, err := fetch(ctx, rep.metricsURL)
		if err != nil {
			r.progress("warning: reading controller %s's metrics: %v", rep.id, err)
			continue
		}
		s, err := parseMetrics(strings.NewReader(string(raw)), "nodejoin_token_reviews_total", "nodejoin_token_cache_lookups_total",
			"nodejoin_token_cache_hits_total", "nodejoin_token_review_seconds_bucket")
		if err == nil {
			all = append(all, s...)
		}
	}
	return all
}

// pendingCSRs counts CSRs neither decided nor issued, for the soak.
func pendingCSRs(csrs []csrSeen) int {
	n := 0
	for _, s := range csrs {
		if !s.denied && !s.failed && s.issued.IsZero() {
			n++
		}
	}
	return n
}

// loadAvg keeps /proc/loadavg's three averages.
func loadAvg(raw []byte) string {
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}
