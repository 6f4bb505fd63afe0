package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// ComponentHealth is how one control-plane daemon is doing, as `nodejoin diagnose`
// reports it.
type ComponentHealth struct {
	Name string `json:"name"`
	// PID is the daemon's process ID as last recorded; Running says whether that
	// process still runs.
	PID     int  `json:"pid"`
	Running bool `json:"running"`
	// Healthy is set when its health endpoint answered as expected; Health is that
	// answer, or why it could not be had.
	Healthy bool   `json:"healthy"`
	Health  string `json:"health"`
	// Restarts counts the restarts after exits (kube-controller-manager, kube-scheduler).
	Restarts int    `json:"restarts"`
	Log      string `json:"log"`
}

// CheckHealth asks each control-plane daemon of the cluster in dir for its health: etcd
// (/health), kube-apiserver, kube-controller-manager and kube-scheduler (/healthz). It
// works from any process on the machine; in namespace mode it needs root, to reach
// them inside the cluster namespace. The order is the start order.
func CheckHealth(ctx context.Context, dir string) ([]ComponentHealth, error) {
	s, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	p := newPKIPaths(filepath.Join(dir, "pki"))
	caPEM, err := os.ReadFile(p.CA.Cert)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster CA to check the control plane's health: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	dial := (&net.Dialer{}).DialContext
	if s.Namespace != "" {
		dial = netns.NS{Name: s.Namespace}.DialContext
	}
	out := make([]ComponentHealth, 0, len(s.Components))
	for _, comp := range s.Components {
		h := ComponentHealth{Name: comp.Name, Restarts: comp.Restarts, Log: comp.Log}
		if id, ok := s.Daemons[comp.Name]; ok {
			h.PID, h.Running = id.PID, id.Alive()
		}
		cert := p.Admin
		if comp.Name == "etcd" {
			cert = p.APIServerEtcd
		}
		h.Health = probe(ctx, comp, cert, roots, dial)
		h.Healthy = h.Health == "ok"
		out = append(out, h)
	}
	return out, nil
}

// probe asks one daemon's health endpoint and returns "ok" or what went wrong.
func probe(ctx context.Context, comp Component, cert certFiles, roots *x509.CertPool, dial func(context.Context, string, string) (net.Conn, error)) string {
	pair, err := tls.LoadX509KeyPair(cert.Cert, cert.Key)
	if err != nil {
		return fmt.Sprintf("cannot load client certificate %s: %v", cert.Cert, err)
	}
	hc := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
			DialContext:       dial,
			DisableKeepAlives: true,
		},
		Timeout: 5 * time.Second,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, comp.Health, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "no answer from " + comp.Health + ": " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusOK && strings.Contains(text, comp.Want) {
		return "ok"
	}
	return fmt.Sprintf("HTTP %d from %s: %s", resp.StatusCode, comp.Health, text)
}
