package imds

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Signer signs instance identity documents, as EC2 signs them with a key of its region
// and publishes the certificate: the local cloud's key is drawn once and kept with its
// state (LoadOrCreateSigner), and the certificate is what the token webhook is given
// (nodejoin-controller --instance-identity-cert) to check nodes' proofs. The signature is
// that of EC2's dynamic/instance-identity/signature: RSA PKCS #1 v1.5 over the SHA-256 of
// the document's bytes, in base64.
type Signer struct {
	key *rsa.PrivateKey
	// Cert is the self-signed certificate of the key; CertPEM the same in PEM.
	Cert    *x509.Certificate
	CertPEM []byte
}

// The files of a signer in its directory.
const (
	SignerKeyFile  = "instance-identity.key"
	SignerCertFile = "instance-identity.crt"
)

// NewSigner draws a new RSA-2048 key and certifies it for ten years.
func NewSigner() (*Signer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("drawing the instance identity key: %w", err)
	}
	return signerOf(key, nil)
}

func signerOf(key *rsa.PrivateKey, certDER []byte) (*Signer, error) {
	if certDER == nil {
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		if err != nil {
			return nil, err
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{Organization: []string{"nodejoin local EC2"}, CommonName: "instance identity"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature,
		}
		if certDER, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key); err != nil {
			return nil, fmt.Errorf("certifying the instance identity key: %w", err)
		}
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, err
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the instance identity certificate is not of the key")
	}
	return &Signer{key: key, Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})}, nil
}

// LoadOrCreateSigner reads the signer kept in dir, or makes one and keeps it there (the
// key with mode 0600, the certificate 0644), so that a cloud that restarts signs with
// the same key and the proofs nodes already sent stay valid.
func LoadOrCreateSigner(dir string) (*Signer, error) {
	keyPath, certPath := filepath.Join(dir, SignerKeyFile), filepath.Join(dir, SignerCertFile)
	keyPEM, kerr := os.ReadFile(keyPath)
	certPEM, cerr := os.ReadFile(certPath)
	if kerr == nil && cerr == nil {
		kb, _ := pem.Decode(keyPEM)
		cb, _ := pem.Decode(certPEM)
		if kb == nil || cb == nil {
			return nil, fmt.Errorf("%s or %s holds no PEM block", keyPath, certPath)
		}
		key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", keyPath, err)
		}
		return signerOf(key, cb.Bytes)
	}
	if !errors.Is(kerr, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", keyPath, kerr)
	}
	s, err := NewSigner()
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(s.key)}), 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certPath, s.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return s, nil
}

// writeFile writes atomically: a temporary file, synced, renamed.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Sign returns the signature of doc.
func (s *Signer) Sign(doc []byte) ([]byte, error) {
	sum := sha256.Sum256(doc)
	return rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
}
