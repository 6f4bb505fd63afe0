package manager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws"
)

// The instance-proof flags: a certificate file gives the checker its certificate and the
// region; requiring proofs without a certificate to check them is refused at start.
func TestInstanceProofFlags(t *testing.T) {
	dir := t.TempDir()
	signer, err := localaws.LoadOrCreateIdentitySigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{region: "us-west-2", identityCert: filepath.Join(dir, "instance-identity.crt"), requireProof: true}
	p, err := o.instanceProofs()
	if err != nil || len(p.Certs) != 1 || !p.Certs[0].Equal(signer.Cert) || !p.Required || len(p.Regions) != 1 || p.Regions[0] != "us-west-2" {
		t.Fatalf("instanceProofs = %+v, %v", p, err)
	}
	if _, err := (&Options{requireProof: true}).instanceProofs(); err == nil || !strings.Contains(err.Error(), "--require-instance-proof needs --instance-identity-cert") {
		t.Errorf("required without a certificate: %v", err)
	}
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Options{identityCert: bad}).instanceProofs(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a file without a certificate: %v", err)
	}
}
