package ipamd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// metrics are ipamd's Prometheus metrics, named as the VPC CNI names its own (awscni_*)
// where it has one; awscni_free_ip_addresses and awscni_cooldown_ip_addresses are
// nodejoin's additions.
type metrics struct {
	reg *prometheus.Registry

	eniAllocated, eniMax, ipMax           prometheus.Gauge
	totalIPs, assignedIPs, freeIPs, cools prometheus.Gauge
	ec2Calls, ec2Errors                   *prometheus.CounterVec
	ec2Latency                            *prometheus.HistogramVec
	addReqs                               prometheus.Counter
	delReqs                               *prometheus.CounterVec
	noAddress                             prometheus.Counter
	reconciles                            prometheus.Counter
	ipamdErrors                           *prometheus.CounterVec
}

func newMetrics() *metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m := &metrics{
		reg:          prometheus.NewRegistry(),
		eniAllocated: g("awscni_eni_allocated", "The number of ENIs attached to the instance that ipamd uses"),
		eniMax:       g("awscni_eni_max", "The maximum number of ENIs the instance can have (or MAX_ENI)"),
		ipMax:        g("awscni_ip_max", "The maximum number of pod IPv4 addresses the instance can hold"),
		totalIPs:     g("awscni_total_ip_addresses", "The number of secondary IPv4 addresses in the pool"),
		assignedIPs:  g("awscni_assigned_ip_addresses", "The number of secondary IPv4 addresses pods hold"),
		freeIPs:      g("awscni_free_ip_addresses", "The number of secondary IPv4 addresses a pod can get now"),
		cools:        g("awscni_cooldown_ip_addresses", "The number of released IPv4 addresses cooling down before reuse"),
		ec2Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ec2api_req_count", Help: "The number of calls made to EC2, by operation",
		}, []string{"fn"}),
		ec2Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ec2api_error_count", Help: "The number of failed calls to EC2, by operation and error code",
		}, []string{"fn", "error"}),
		ec2Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "awscni_aws_api_latency_ms", Help: "EC2 call latency in milliseconds",
			Buckets: []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000},
		}, []string{"api", "error"}),
		addReqs: prometheus.NewCounter(prometheus.CounterOpts{Name: "awscni_add_ip_req_count", Help: "The number of address requests (CNI ADD)"}),
		delReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_del_ip_req_count", Help: "The number of address releases (CNI DEL), by reason",
		}, []string{"reason"}),
		noAddress:   prometheus.NewCounter(prometheus.CounterOpts{Name: "awscni_no_available_ip_addresses", Help: "The number of address requests that found the pool empty"}),
		reconciles:  prometheus.NewCounter(prometheus.CounterOpts{Name: "awscni_reconcile_count", Help: "The number of reconciliations of the pool with EC2"}),
		ipamdErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "awscni_ipamd_error_count", Help: "The number of errors in ipamd's pool management, by step"}, []string{"fn"}),
	}
	m.reg.MustRegister(m.eniAllocated, m.eniMax, m.ipMax, m.totalIPs, m.assignedIPs, m.freeIPs, m.cools,
		m.ec2Calls, m.ec2Errors, m.ec2Latency, m.addReqs, m.delReqs, m.noAddress, m.reconciles, m.ipamdErrors)
	return m
}

// observeEC2 records one EC2 call.
func (m *metrics) observeEC2(op string, took time.Duration, err error) {
	m.ec2Calls.WithLabelValues(op).Inc()
	failed := "false"
	if err != nil {
		failed = "true"
		code := cloud.ErrorCode(err)
		if code == "" {
			code = "other"
		}
		m.ec2Errors.WithLabelValues(op, code).Inc()
	}
	m.ec2Latency.WithLabelValues(op, failed).Observe(float64(took.Milliseconds()))
}

// setPool records the pool's size.
func (m *metrics) setPool(s pool.State) {
	st := s.Stats()
	m.eniAllocated.Set(float64(st.ENIs))
	m.totalIPs.Set(float64(st.Total))
	m.assignedIPs.Set(float64(st.Assigned))
	m.freeIPs.Set(float64(st.Free))
	m.cools.Set(float64(st.Cooling))
}
