package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// NetworkState is what the node's network add-on (aws-node's ipamd) reports on its
// introspection endpoint (GET /v1/state on 127.0.0.1:61679 in the node's network
// namespace): the part a diagnosis shows.
type NetworkState struct {
	Ready bool `json:"ready"`
	// Pool counts addresses: total in the pool, assigned to pods, and free.
	Pool struct {
		Total    int `json:"total"`
		Assigned int `json:"assigned"`
		Free     int `json:"free"`
	} `json:"pool"`
	Limits struct {
		ENIs       int `json:"enis"`
		IPv4PerENI int `json:"ipv4PerENI"`
		MaxPods    int `json:"maxPods"`
	} `json:"limits"`
	ENIs []struct {
		ID           string `json:"id"`
		DeviceNumber int    `json:"deviceNumber"`
		Primary      bool   `json:"primary"`
		IPs          []struct {
			IP    string `json:"ip"`
			State string `json:"state"`
		} `json:"ips"`
	} `json:"enis"`
	LastEC2Error *struct {
		Operation string `json:"operation,omitempty"`
		Code      string `json:"code,omitempty"`
		Message   string `json:"message,omitempty"`
	} `json:"lastEC2Error,omitempty"`
	LastPoolError string `json:"lastPoolError,omitempty"`
	// ConflistPath is the CNI configuration ipamd writes once ready; Conflist says
	// whether it exists.
	ConflistPath string `json:"conflistPath"`
	Conflist     bool   `json:"conflist"`
}

// networkState asks the node's ipamd for its state, from inside the instance's namespace.
func networkState(ctx context.Context, rec *instance.Record) (*NetworkState, error) {
	ns := netns.NS{Name: rec.Namespace}
	if rec.Namespace == "" || !ns.Exists() {
		return nil, fmt.Errorf("the instance's network namespace %s is gone", rec.Namespace)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ns.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/state", addons.AWSNodeHealthPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("ipamd does not answer on %s (is the aws-node pod running on the node?): %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ipamd's %s answered %s", url, resp.Status)
	}
	var st NetworkState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding ipamd's state: %w", err)
	}
	return &st, nil
}

// networkFinding reports the node's pod network: whether the CNI configuration exists
// and what ipamd says of its pool.
func networkFinding(ctx context.Context, r *Report, rec *instance.Record) {
	conflist := filepath.Join(rec.Root, instance.CNIConfDir, "10-aws.conflist")
	r.Logs = append(r.Logs, LogFile{"cni plugin", filepath.Join(rec.Root, "var/log/aws-routed-eni/plugin.log")})
	st, err := networkState(ctx, rec)
	if err != nil {
		r.Notes = append(r.Notes, "the network add-on's state is unknown: "+err.Error())
		return
	}
	st.ConflistPath = conflist
	_, serr := os.Stat(conflist)
	st.Conflist = serr == nil
	r.Network = st
}
