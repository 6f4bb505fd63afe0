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

// --sts-endpoint sends every token to one STS (a local cloud's) over TLS only: a plain
// HTTP or path-carrying URL would leak presigned requests or misroute them, and is
// refused with the flag named.
func TestSTSEndpointFlag(t *testing.T) {
	for _, tt := range []struct {
		endpoint, want, wantErr string
	}{
		{endpoint: "", want: ""},
		{endpoint: "https://10.0.0.1:8774", want: "https://10.0.0.1:8774"},
		{endpoint: "https://sts.local/", want: "https://sts.local"},
		{endpoint: "http://10.0.0.1:8773", wantErr: `--sts-endpoint "http://10.0.0.1:8773" is not an https://host[:port] URL`},
		{endpoint: "https://sts.local/verify", wantErr: "is not an https://host[:port] URL"},
		{endpoint: "https://", wantErr: "is not an https://host[:port] URL"},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			var o Options
			f := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
			o.AddWebhookFlags(f)
			args := []string{"--tls-cert", "w.crt", "--tls-key", "w.key", "--webhook-insecure-no-client-cert", "--inventory-source", "ec2", "--aws-region", "us-west-2", "--cluster-id", "c", "--region", "us-west-2", "--sts-endpoint", tt.endpoint}
			if err := f.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := o.validate(false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("validate() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, err := o.verifier()
			if err != nil {
				t.Fatal(err)
			}
			if v.Endpoint != tt.want {
				t.Errorf("verifier endpoint %q, want %q", v.Endpoint, tt.want)
			}
		})
	}
}
