package joinstatus

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
)

// commonName decodes a PEM certificate request's subject common name.
func commonName(request []byte) (string, error) {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return "", errors.New("not a PEM certificate request")
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "", err
	}
	return cr.Subject.CommonName, nil
}
