package nodegroup

import (
	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	// Phases counts update phases entered, by phase.
	Phases *prometheus.CounterVec
	// Updates observes the seconds of finished updates, by result (succeeded, failed).
	Updates *prometheus.HistogramVec
	// Evictions counts pod evictions by result (evicted, blocked, deleted, error).
	Evictions *prometheus.CounterVec
	// Replaced counts instances terminated for replacement, by reason (update,
	// join_timeout).
	Replaced *prometheus.CounterVec
	// Nodes is each group's desired, ready and updated sizes.
	Nodes *prometheus.GaugeVec
	// Issues is each group's health issues, by code.
	Issues *prometheus.GaugeVec
}

// NewMetrics makes the metrics and registers them with reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Phases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodejoin_nodegroup_update_phases_total", Help: "Node group update phases entered, by phase.",
		}, []string{"phase"}),
		Updates: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodejoin_nodegroup_update_duration_seconds", Help: "Seconds of finished node group updates, by result.",
			Buckets: []float64{60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"result"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodejoin_nodegroup_evictions_total", Help: "Pod evictions while draining node group nodes, by result.",
		}, []string{"result"}),
		Replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodejoin_nodegroup_instances_replaced_total", Help: "Instances terminated for replacement, by reason.",
		}, []string{"reason"}),
		Nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodejoin_nodegroup_nodes", Help: "Node group sizes: desired, ready and updated.",
		}, []string{"nodegroup", "state"}),
		Issues: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodejoin_nodegroup_health_issues", Help: "Node group health issues, by code.",
		}, []string{"nodegroup", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.Phases, m.Updates, m.Evictions, m.Replaced, m.Nodes, m.Issues)
	}
	return m
}

func (m *Metrics) observe(ng *v1alpha1.NodeGroup) {
	m.Nodes.WithLabelValues(ng.Name, "desired").Set(float64(ng.Status.DesiredSize))
	m.Nodes.WithLabelValues(ng.Name, "ready").Set(float64(ng.Status.ReadySize))
	m.Nodes.WithLabelValues(ng.Name, "updated").Set(float64(ng.Status.UpdatedSize))
	m.Issues.DeletePartialMatch(prometheus.Labels{"nodegroup": ng.Name})
	for _, i := range ng.Status.Health.Issues {
		m.Issues.WithLabelValues(ng.Name, string(i.Code)).Inc()
	}
}

func (m *Metrics) forget(name string) {
	m.Nodes.DeletePartialMatch(prometheus.Labels{"nodegroup": name})
	m.Issues.DeletePartialMatch(prometheus.Labels{"nodegroup": name})
}
