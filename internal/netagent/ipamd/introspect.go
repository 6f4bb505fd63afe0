package ipamd

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// State is what /v1/state returns (`nodejoin diagnose node` reads it).
type State struct {
	Ready        bool                 `json:"ready"`
	InstanceID   string               `json:"instanceID,omitempty"`
	InstanceType string               `json:"instanceType,omitempty"`
	Limits       StateLimits          `json:"limits"`
	Knobs        StateKnobs           `json:"knobs"`
	Pool         pool.Stats           `json:"pool"`
	ENIs         []datastore.ENIState `json:"enis"`
	// LastEC2Error is the last failed EC2 call (code and message only).
	LastEC2Error *EC2Error `json:"lastEC2Error,omitempty"`
	// LastPoolError is the last failure of the pool loop.
	LastPoolError string `json:"lastPoolError,omitempty"`
	// DeleteOnTerminationUnsupported says EC2 refused ModifyNetworkInterfaceAttribute.
	DeleteOnTerminationUnsupported bool `json:"deleteOnTerminationUnsupported,omitempty"`
}

// StateLimits are the instance type's limits.
type StateLimits struct {
	ENIs       int `json:"enis"`
	IPv4PerENI int `json:"ipv4PerENI"`
	MaxPods    int `json:"maxPods"`
}

// StateKnobs are the warm-pool settings in force.
type StateKnobs struct {
	WarmENITarget     int `json:"warmENITarget"`
	WarmIPTarget      int `json:"warmIPTarget,omitempty"`
	MinimumIPTarget   int `json:"minimumIPTarget,omitempty"`
	MaxENI            int `json:"maxENI,omitempty"`
	CooldownSeconds   int `json:"ipCooldownPeriodSeconds"`
	ShrinkIntervalSec int `json:"shrinkIntervalSeconds"`
}

// State returns the daemon's state.
func (d *Daemon) State() State {
	s := State{Ready: d.Ready(), ENIs: []datastore.ENIState{}}
	if d.initialized.Load() {
		s.InstanceID, s.InstanceType = d.inst.ID, d.inst.Type
		s.Limits = StateLimits{ENIs: d.limits.ENIs, IPv4PerENI: d.limits.IPv4PerENI, MaxPods: d.maxPods}
	}
	k := d.o.Knobs
	s.Knobs = StateKnobs{WarmENITarget: k.Pool.WarmENITarget, WarmIPTarget: max(k.Pool.WarmIPTarget, 0), MinimumIPTarget: max(k.Pool.MinimumIPTarget, 0),
		MaxENI: max(k.Pool.MaxENI, 0), CooldownSeconds: int(k.Cooldown.Seconds()), ShrinkIntervalSec: int(d.o.ShrinkInterval.Seconds())}
	s.Pool = d.store.PoolState().Stats()
	s.ENIs = d.store.Snapshot()
	d.mu.Lock()
	if d.lastEC2Error != nil {
		e := *d.lastEC2Error
		s.LastEC2Error = &e
	}
	s.LastPoolError = d.lastPoolError
	s.DeleteOnTerminationUnsupported = d.noDeleteOnTerm
	d.mu.Unlock()
	return s
}

func (d *Daemon) introspectionHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !d.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: the warm pool is not filled or the gRPC server is not serving yet\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.State())
	})
	return mux
}

func (d *Daemon) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.m.reg, promhttp.HandlerOpts{}))
	return mux
}
