package csr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	// Decisions counts decisions by signer, decision (approved, denied) and reason.
	Decisions *prometheus.CounterVec
	// CreateToDecision observes seconds from a CSR's creation to its decision.
	CreateToDecision *prometheus.HistogramVec
	// ApproveToIssue observes seconds from approval to issuance.
	ApproveToIssue *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodejoin_csr_decisions_total", Help: "Kubelet CSR decisions by signer, decision and reason.",
		}, []string{"signer", "decision", "reason"}),
		CreateToDecision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodejoin_csr_create_to_decision_seconds", Help: "Seconds from a kubelet CSR's creation to its approval or denial.", Buckets: buckets,
		}, []string{"signer"}),
		ApproveToIssue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodejoin_csr_approve_to_issue_seconds", Help: "Seconds from a kubelet CSR's approval to its certificate.", Buckets: buckets,
		}, []string{"signer"}),
	}
	reg.MustRegister(m.Decisions, m.CreateToDecision, m.ApproveToIssue)
	return m
}

func (m *Metrics) decided(csr *certificatesv1.CertificateSigningRequest, d *Decision, now time.Time) {
	if m == nil {
		return
	}
	decision := "denied"
	if d.Approve {
		decision = "approved"
	}
	m.Decisions.WithLabelValues(csr.Spec.SignerName, decision, d.Reason).Inc()
	if !csr.CreationTimestamp.IsZero() {
		m.CreateToDecision.WithLabelValues(csr.Spec.SignerName).Observe(now.Sub(csr.CreationTimestamp.Time).Seconds())
	}
}

func (m *Metrics) issued(csr *certificatesv1.CertificateSigningRequest, now time.Time) {
	if m == nil {
		return
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && !c.LastUpdateTime.IsZero() {
			m.ApproveToIssue.WithLabelValues(csr.Spec.SignerName).Observe(now.Sub(c.LastUpdateTime.Time).Seconds())
		}
	}
}
