package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// The image this builds is the one aws-node's DaemonSet runs, laid out as it expects.
func TestNetagentImageMatchesTheAddon(t *testing.T) {
	if netagentImage != addons.DefaultAWSNodeImage || netagentPath != addons.NetagentPath || netagentPluginsDir != addons.NetagentPluginsDir {
		t.Errorf("image %s (%s, plugins in %s); aws-node runs %s (%s, plugins in %s)", netagentImage, netagentPath, netagentPluginsDir,
			addons.DefaultAWSNodeImage, addons.NetagentPath, addons.NetagentPluginsDir)
	}
}

func TestLocalhostCertIsStableAndServes(t *testing.T) {
	crt1, key1, err := localhostCert()
	if err != nil {
		t.Fatal(err)
	}
	crt2, key2, err := localhostCert()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(crt1, crt2) || !bytes.Equal(key1, key2) {
		t.Error("two builds of agnhost's localhost certificate differ: the image layer would not be reproducible")
	}
	if _, err := tls.X509KeyPair(crt1, key1); err != nil {
		t.Fatalf("porter could not serve with it: %v", err)
	}
	b, _ := pem.Decode(crt1)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
}
