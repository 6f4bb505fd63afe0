package imds

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// The identity document and its signature, read with the SDK's client as nodeadm reads
// them, verify against the signer's certificate; the signer kept in a directory is the
// same after a restart, and its key file is private.
func TestIdentityDocumentIsSigned(t *testing.T) {
	dir := t.TempDir()
	s, err := LoadOrCreateSigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(testInstance(), nil).WithSigner(s))
	defer srv.Close()
	client := imds.New(imds.Options{Endpoint: srv.URL})
	get := func(path string) []byte {
		t.Helper()
		out, err := client.GetDynamicData(t.Context(), &imds.GetDynamicDataInput{Path: path})
		if err != nil {
			t.Fatalf("GetDynamicData(%s): %v", path, err)
		}
		defer func() { _ = out.Content.Close() }()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	doc, sig64 := get("instance-identity/document"), get("instance-identity/signature")
	sig, err := base64.StdEncoding.DecodeString(string(sig64))
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateSigner(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	if err := rsa.VerifyPKCS1v15(again.Cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], sig); err != nil {
		t.Fatalf("the signature does not verify against the kept certificate: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, SignerKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
	// Without a signer there is no signature, as on a metadata service without one.
	plain := httptest.NewServer(New(testInstance(), nil))
	defer plain.Close()
	if _, err := imds.New(imds.Options{Endpoint: plain.URL}).GetDynamicData(t.Context(), &imds.GetDynamicDataInput{Path: "instance-identity/signature"}); err == nil {
		t.Error("a signature without a signer")
	}
}
