package manager

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/pki"
)

// The certificate lifetime flags reach the signer, shorter than the 10 minutes a CSR
// may ask for when a test wants to watch kubelets renew, but never so short that a
// certificate could expire before its successor is issued.
func TestSignerLifetimeFlags(t *testing.T) {
	ca, err := pki.NewCA("cluster", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := ca.Write(caCert, caKey); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name                   string
		args                   []string
		wantDuration, wantClnt time.Duration
		wantErr                string
	}{
		{name: "defaults", wantDuration: 365 * 24 * time.Hour, wantClnt: 24 * time.Hour},
		{name: "short, to watch renewals", args: []string{"--duration", "2m", "--client-cert-max-duration", "90s"}, wantDuration: 2 * time.Minute, wantClnt: 90 * time.Second},
		{name: "client certificates too short", args: []string{"--client-cert-max-duration", "30s"}, wantErr: "--client-cert-max-duration 30s: want at least 1m0s"},
		{name: "no lifetime", args: []string{"--duration", "0s"}, wantErr: "--duration 0s: want at least 1m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o Options
			f := pflag.NewFlagSet("run", pflag.ContinueOnError)
			o.AddFlags(f)
			if err := f.Parse(append([]string{"--ca-cert", caCert, "--ca-key", caKey}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			s, err := o.signer()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("signer() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Duration != tt.wantDuration || s.ClientMaxDuration != tt.wantClnt {
				t.Errorf("signer lifetimes %v (default) and %v (client), want %v and %v", s.Duration, s.ClientMaxDuration, tt.wantDuration, tt.wantClnt)
			}
		})
	}
}
