package authn

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/identity"
)

// InstanceProofs checks that a node is the instance it names, not only that it holds
// the instance's role: the token carries the instance identity document the cloud
// signed for the instance (identity.Proof, in a header the token's signature covers,
// so that it cannot be moved to another token), and the document must be signed by one
// of Certs and name the token's session (the instance ID), its account, a region of
// Regions and an address of the instance. The first document accepted for an instance
// is pinned (trust on first use, as SPIRE's aws_iid attestor does): a different
// document for the same instance is refused.
//
// Anyone holding the node role can name any instance in a session; only a process that
// can read that instance's metadata holds its signed document.
type InstanceProofs struct {
	// Certs are the certificates of the keys that sign instance identity documents: AWS's
	// published certificates of the cluster's regions, or the local cloud's.
	Certs []*x509.Certificate
	// Required requires a proof of every node of the cluster; otherwise only of nodes
	// whose mapping requires one (RoleMapping.RequireInstanceProof).
	Required bool
	// Regions, when set, are the regions a document may name.
	Regions []string
	// MaxAge, when set, refuses to pin a document whose instance became pending longer
	// ago: an instance proves itself when it joins, soon after launch.
	MaxAge time.Duration
	// MaxPins bounds the instances pinned (default 65536); beyond it the oldest pins are
	// forgotten.
	MaxPins int
	Now     func() time.Time

	mu   sync.Mutex
	pins map[string]pinned
}

type pinned struct {
	digest string
	at     time.Time
}

// InstanceProofAnnotation on a NodeAccessEntry requires ("required") an instance proof
// of the nodes the entry admits.
const InstanceProofAnnotation = nodejoinv1alpha1.InstanceProofAnnotation

// ParseCertificates reads the PEM certificates of instance identity signers, such as
// the file given to --instance-identity-cert.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing an instance identity certificate: %w", err)
		}
		if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("instance identity certificate %q has no RSA key", c.Subject.CommonName)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// checkInstanceProof checks the proof (the token's ProofHeader value, "" for none) of a
// caller that user maps to the node identity of an instance, when its mapping or the
// cluster requires one. Where none is required a proof is not looked at: a caller could
// as well leave it out, so checking it would refuse nothing that a plain token is not
// admitted for. Users that are not an instance's node need none.
func (p *InstanceProofs) checkInstanceProof(c *Caller, user *User, proof string) error {
	if user == nil || user.Instance == nil {
		return nil
	}
	if !user.RequireInstanceProof && (p == nil || !p.Required) {
		return nil
	}
	why := "the cluster"
	if user.RequireInstanceProof {
		why = user.Mapping
	}
	switch {
	case proof == "":
		return denied("%s requires an instance proof of %s, and the token carries none (nodeadm sends the instance identity document in the %s header)", why, c.SessionName, identity.ProofHeader)
	case p == nil || len(p.Certs) == 0:
		return denied("%s requires an instance proof of %s, but the webhook has no instance identity certificate to check it (--instance-identity-cert)", why, c.SessionName)
	}
	return p.Check(c, user.Instance.IPs, proof)
}

// Check verifies the proof for caller c, whose session names an instance with the
// addresses ips (nil: not known), and pins the instance's document on its first use.
func (p *InstanceProofs) Check(c *Caller, ips []netip.Addr, proof string) error {
	pr, err := identity.DecodeProof(proof)
	if err != nil {
		return denied("instance proof of %s: %v", c.SessionName, err)
	}
	sum := sha256.Sum256(pr.Document)
	if !p.signed(sum[:], pr.Signature) {
		return denied("instance proof of %s: the identity document's signature does not verify against the instance identity certificate", c.SessionName)
	}
	doc, err := identity.ParseDocument(pr.Document)
	if err != nil {
		return denied("instance proof of %s: %v", c.SessionName, err)
	}
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	switch {
	case doc.InstanceID != c.SessionName:
		return denied("instance proof: the identity document names instance %s, not the token's session %s", doc.InstanceID, c.SessionName)
	case doc.AccountID != c.Account:
		return denied("instance proof of %s: the identity document names account %s, not the token's account %s", c.SessionName, doc.AccountID, c.Account)
	case len(p.Regions) > 0 && !slices.Contains(p.Regions, doc.Region):
		return denied("instance proof of %s: the identity document names region %s, not one of %s", c.SessionName, doc.Region, strings.Join(p.Regions, ", "))
	case doc.AvailabilityZone != "" && !strings.HasPrefix(doc.AvailabilityZone, doc.Region):
		return denied("instance proof of %s: the identity document's availability zone %s is not in its region %s", c.SessionName, doc.AvailabilityZone, doc.Region)
	case doc.PendingTime.After(now.Add(time.Minute)):
		return denied("instance proof of %s: the identity document's pending time %s is in the future", c.SessionName, doc.PendingTime.UTC().Format(time.RFC3339))
	}
	if ip, err := netip.ParseAddr(doc.PrivateIP); len(ips) > 0 && (err != nil || !slices.Contains(ips, ip)) {
		return denied("instance proof of %s: the identity document's private IP %q is not an address of the instance", c.SessionName, doc.PrivateIP)
	}
	return p.pin(doc, hex.EncodeToString(sum[:]), now)
}

// signed reports whether sig is a signature of the digest by a key of Certs.
func (p *InstanceProofs) signed(digest, sig []byte) bool {
	for _, cert := range p.Certs {
		if pub, ok := cert.PublicKey.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest, sig) == nil {
			return true
		}
	}
	return false
}

// pin accepts the first document of an instance that is fresh enough, and afterwards
// that document only.
func (p *InstanceProofs) pin(doc *identity.Document, digest string, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pin, ok := p.pins[doc.InstanceID]; ok {
		if pin.digest != digest {
			return denied("instance proof of %s: another identity document of this instance was accepted first (pinned %s, this one %s)", doc.InstanceID, pin.digest[:16], digest[:16])
		}
		return nil
	}
	if p.MaxAge > 0 && now.Sub(doc.PendingTime) > p.MaxAge {
		return denied("instance proof of %s: the identity document is stale: the instance became pending at %s, more than %s ago, and it was never proven before", doc.InstanceID, doc.PendingTime.UTC().Format(time.RFC3339), p.MaxAge)
	}
	if p.pins == nil {
		p.pins = map[string]pinned{}
	}
	limit := p.MaxPins
	if limit == 0 {
		limit = 65536
	}
	for len(p.pins) >= limit {
		oldest := ""
		for id, pin := range p.pins {
			if oldest == "" || pin.at.Before(p.pins[oldest].at) {
				oldest = id
			}
		}
		delete(p.pins, oldest)
	}
	p.pins[doc.InstanceID] = pinned{digest: digest, at: now}
	return nil
}
