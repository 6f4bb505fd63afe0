package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Instance proof: a node sends the cloud-signed instance identity document of the
// instance it runs on, with its signature, in the header ProofHeader of the presigned
// request. The header is one of the request's signed headers, so STS refuses the token
// if the proof is swapped for another; the token carries the header's value in the query
// parameter ProofParam, which the verifier moves back into the header before asking STS
// (that parameter is added after signing and is not part of the signature).
const (
	ProofHeader = "x-nodejoin-iid"
	ProofParam  = "X-Nodejoin-Iid"
	// MaxDocumentBytes and MaxSignatureBytes bound the decoded parts of a proof.
	MaxDocumentBytes  = 4096
	MaxSignatureBytes = 1024
	// maxProofTokenLen bounds a token that carries a proof (the proof doubles in size:
	// base64 in the query, base64 again in the token).
	maxProofTokenLen = 12288
)

// Proof is an instance identity document as the instance metadata service served it
// (the exact bytes its signature covers) and that signature.
type Proof struct {
	Document  []byte
	Signature []byte
}

// Encode returns the header value of p: unpadded base64url of the document, a dot, and
// unpadded base64url of the signature.
func (p Proof) Encode() string {
	return base64.RawURLEncoding.EncodeToString(p.Document) + "." + base64.RawURLEncoding.EncodeToString(p.Signature)
}

// DecodeProof reads a header value written by Encode, strictly (no padding, no stray
// bits: one proof has one encoding). The error never quotes the value.
func DecodeProof(s string) (Proof, error) {
	doc, sig, ok := strings.Cut(s, ".")
	if !ok || doc == "" || sig == "" {
		return Proof{}, fmt.Errorf("the proof is not <document>.<signature>")
	}
	if base64.RawURLEncoding.DecodedLen(len(doc)) > MaxDocumentBytes || base64.RawURLEncoding.DecodedLen(len(sig)) > MaxSignatureBytes {
		return Proof{}, fmt.Errorf("the proof exceeds %d bytes of document or %d bytes of signature", MaxDocumentBytes, MaxSignatureBytes)
	}
	d, err := base64.RawURLEncoding.Strict().DecodeString(doc)
	if err != nil {
		return Proof{}, fmt.Errorf("the proof's document is not unpadded base64url")
	}
	g, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return Proof{}, fmt.Errorf("the proof's signature is not unpadded base64url")
	}
	p := Proof{Document: d, Signature: g}
	if p.Encode() != s {
		// The decoder skips line breaks; a proof has exactly one form.
		return Proof{}, fmt.Errorf("the proof is not in canonical unpadded base64url")
	}
	return p, nil
}

// Document is the part of an instance identity document that proofs are checked
// against (EC2's names and formats).
type Document struct {
	InstanceID       string    `json:"instanceId"`
	AccountID        string    `json:"accountId"`
	Region           string    `json:"region"`
	AvailabilityZone string    `json:"availabilityZone"`
	PrivateIP        string    `json:"privateIp"`
	ImageID          string    `json:"imageId"`
	InstanceType     string    `json:"instanceType"`
	Architecture     string    `json:"architecture"`
	PendingTime      time.Time `json:"pendingTime"`
	Version          string    `json:"version"`
}

var (
	docInstanceIDRE = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	docAccountRE    = regexp.MustCompile(`^\d{12}$`)
	docRegionRE     = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d{1,2}$`)
)

// ParseDocument reads an instance identity document: one JSON object, no trailing data,
// with an instance ID, a 12-digit account, a region and a pending time. Unknown fields
// are allowed: EC2 adds fields over time (billingProducts, marketplaceProductCodes…).
func ParseDocument(b []byte) (*Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("the instance identity document is not JSON of the document's fields")
	}
	if dec.More() {
		return nil, fmt.Errorf("the instance identity document has data after its object")
	}
	switch {
	case !docInstanceIDRE.MatchString(d.InstanceID):
		return nil, fmt.Errorf("the instance identity document has no instance ID of the form i-…")
	case !docAccountRE.MatchString(d.AccountID):
		return nil, fmt.Errorf("the instance identity document of %s has no 12-digit account ID", d.InstanceID)
	case !docRegionRE.MatchString(d.Region):
		return nil, fmt.Errorf("the instance identity document of %s has no region", d.InstanceID)
	case d.PendingTime.IsZero():
		return nil, fmt.Errorf("the instance identity document of %s has no pending time", d.InstanceID)
	}
	return &d, nil
}
