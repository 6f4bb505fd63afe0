// Package csr decides the certificate signing requests of kubelets — approve or deny,
// with a reason naming the failed check — and signs approved ones from the cluster CA.
//
// It handles the two kubelet signers only. A serving certificate is approved only when
// the requester is the node the certificate names and every DNS name and IP address in
// it belongs to that node's own instance according to the instance inventory — never
// according to the Node object, which the kubelet writes itself.
//
// The policy (policy.go), the signer (signer.go) and the reconciler that applies them
// (controller.go) share the CSR's parsed form and its reasons. It imports pki and the
// instance inventory.
package csr

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// The signers nodejoin approves and signs.
const (
	SignerKubeletServing = certificatesv1.KubeletServingSignerName
	SignerKubeletClient  = certificatesv1.KubeAPIServerClientKubeletSignerName
)

// Approval reasons and messages, as upstream and EKS write them.
const (
	ReasonApproved       = "AutoApproved"
	MessageServing       = "Auto approving self kubelet server certificate after SubjectAccessReview."
	MessageClient        = "Auto approving kubelet client certificate after SubjectAccessReview."
	MessageSelfClient    = "Auto approving self kubelet client certificate after SubjectAccessReview."
	nodeUserPrefix       = "system:node:"
	nodesGroup           = "system:nodes"
	subresourceNodeCli   = "nodeclient"
	subresourceSelfCli   = "selfnodeclient"
	subresourceSelfSrv   = "selfnodeserver"
	defaultMaxExpiration = 365 * 24 * time.Hour
)

// Denial reasons: the condition's Reason says which kind of check failed; its Message
// says exactly what.
const (
	ReasonBadRequest      = "InvalidRequest"
	ReasonNotANode        = "RequesterNotANode"
	ReasonSubject         = "InvalidSubject"
	ReasonUsages          = "InvalidUsages"
	ReasonSANs            = "SANNotOwned"
	ReasonExpiration      = "ExpirationTooLong"
	ReasonAccessReview    = "SubjectAccessReviewDenied"
	ReasonUnknownInstance = "InstanceNotFound"
	ReasonWeakKey         = "WeakKey"
	ReasonTokenRequester  = "ClientCertificateNotForTokenNodes"
	ReasonAlreadyJoined   = "NodeAlreadyJoined"
)

// bootstrappersGroup holds bootstrap-token users, and nodes that authenticate with
// identity tokens (the webhook maps them to system:node:<name> in system:bootstrappers
// and system:nodes); bootstrapUserPrefix begins a bootstrap token's user name.
const (
	bootstrappersGroup  = "system:bootstrappers"
	bootstrapUserPrefix = "system:bootstrap:"
)

// minRSABits is the smallest RSA modulus nodejoin certifies.
const minRSABits = 2048

// Inventory finds the instance behind a node name; inventory.ErrNotFound when there is none.
type Inventory interface {
	InstanceForNode(ctx context.Context, nodeName string) (*inventory.Instance, error)
}

// AccessReview asks the API server whether the CSR's requester may create the CSR
// subresource (nodeclient, selfnodeclient, selfnodeserver).
type AccessReview func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error)

// Policy decides kubelet CSRs.
type Policy struct {
	Inventory Inventory
	Review    AccessReview
	// MaxExpiration bounds spec.expirationSeconds; longer requests are denied. Default one year.
	MaxExpiration time.Duration
	// NodeRegistered reports whether a Node of that name exists. A bootstrap token's
	// client CSR for a registered node is denied: the node already has a client
	// certificate, and the token would otherwise take it over. Required.
	NodeRegistered func(ctx context.Context, name string) (bool, error)
	// Issued records the instances a bootstrap token's client certificate was issued
	// for; an instance gets one only once. Required.
	Issued IssuedRecord
	// ClusterName and NodeRoles bind bootstrap tokens to their node group (binding.go):
	// a bootstrap token's client CSR is approved only for an instance tagged
	// kubernetes.io/cluster/<ClusterName> and for the token's node group, whose role
	// NodeRoles knows as a node role. Without them every bootstrap token is denied.
	ClusterName string
	NodeRoles   NodeRoles
	// MaxSANs bounds the DNS and IP subjectAltNames of a serving CSR; 0 means
	// DefaultMaxSANs. MaxServingPerNode bounds the serving CSRs approved for one node
	// within ServingWindow; 0 means DefaultMaxServingPerNode and DefaultServingWindow
	// (caps.go).
	MaxSANs           int
	MaxServingPerNode int
	ServingWindow     time.Duration

	serving servingLedger
}

// IssuedRecord remembers, across restarts, which instance got a client certificate
// through a bootstrap token, and through which CSR.
type IssuedRecord interface {
	// Holder returns the CSR that claimed the instance, or "" when none did. It may
	// miss a claim made moments ago (Claim, which every signing goes through, does not),
	// but never names a holder the record does not have.
	Holder(ctx context.Context, instanceID string) (string, error)
	// Claim records csrName for the instance unless another CSR holds it already, and
	// returns the CSR that holds it after the call.
	Claim(ctx context.Context, instanceID, csrName string) (string, error)
}

// Decision is the outcome for one CSR.
type Decision struct {
	Approve bool
	Reason  string
	Message string
	// ClaimInstance, on the approval of a bootstrap token's client CSR, is the instance
	// the certificate is for: the signer claims it in the IssuedRecord before signing.
	ClaimInstance string
}

func deny(reason, format string, args ...any) *Decision {
	return &Decision{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Decide returns the decision for a CSR of a kubelet signer, or nil for other signers,
// which nodejoin leaves alone. An error means the decision could not be made (the
// inventory or the API server failed) and should be retried; it is never a denial.
func (p *Policy) Decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*Decision, error) {
	switch csr.Spec.SignerName {
	case SignerKubeletServing, SignerKubeletClient:
	default:
		return nil, nil
	}
	req, err := ParseRequest(csr.Spec.Request)
	if err != nil {
		return deny(ReasonBadRequest, "%v", err), nil
	}
	if err := req.CheckSignature(); err != nil {
		return deny(ReasonBadRequest, "the request's signature does not verify: %v", err), nil
	}
	if d := checkKey(req.PublicKey); d != nil {
		return d, nil
	}
	maxExp := p.MaxExpiration
	if maxExp == 0 {
		maxExp = defaultMaxExpiration
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && time.Duration(*s)*time.Second > maxExp {
		return deny(ReasonExpiration, "expirationSeconds %d exceeds the maximum of %d", *s, int64(maxExp/time.Second)), nil
	}
	if !slices.Equal(req.Subject.Organization, []string{nodesGroup}) {
		return deny(ReasonSubject, "subject organization %q is not exactly [system:nodes]", req.Subject.Organization), nil
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return deny(ReasonSANs, "email and URI subjectAltNames are not allowed"), nil
	}
	if csr.Spec.SignerName == SignerKubeletClient {
		return p.decideClient(ctx, csr, req)
	}
	return p.decideServing(ctx, csr, req)
}

// ParseRequest decodes a PEM CERTIFICATE REQUEST.
func ParseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request does not parse: %w", err)
	}
	return req, nil
}

// checkKey allows RSA keys of at least 2048 bits and ECDSA keys on P-256 or P-384, the
// keys the kubelet generates; anything else is denied with a reason naming the key.
func checkKey(pub any) *Decision {
	const want = "want RSA of at least 2048 bits or ECDSA P-256/P-384"
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < minRSABits {
			return deny(ReasonWeakKey, "RSA key of %d bits; %s", n, want)
		}
		return nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384():
			return nil
		}
		return deny(ReasonWeakKey, "ECDSA key on curve %s; %s", k.Curve.Params().Name, want)
	case ed25519.PublicKey:
		return deny(ReasonWeakKey, "Ed25519 key; %s", want)
	default:
		return deny(ReasonWeakKey, "%T key; %s", pub, want)
	}
}

func usageSet(us []certificatesv1.KeyUsage) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// usagesOK accepts exactly {digital signature, <auth>} or {digital signature, key
// encipherment, <auth>}, the kubelet's usages for RSA and other keys.
func usagesOK(us []certificatesv1.KeyUsage, auth certificatesv1.KeyUsage) bool {
	got := usageSet(us)
	if len(got) != len(us) {
		return false // duplicates
	}
	a := usageSet([]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, auth})
	b := usageSet([]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, auth})
	return slices.Equal(got, a) || slices.Equal(got, b)
}

func (p *Policy) decideClient(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) (*Decision, error) {
	if len(req.DNSNames) > 0 || len(req.IPAddresses) > 0 {
		return deny(ReasonSANs, "a kubelet client certificate has no subjectAltNames"), nil
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeUserPrefix) || req.Subject.CommonName == nodeUserPrefix {
		return deny(ReasonSubject, "subject common name %q does not begin with system:node:", req.Subject.CommonName), nil
	}
	if !usagesOK(csr.Spec.Usages, certificatesv1.UsageClientAuth) {
		return deny(ReasonUsages, "usages %v are not a kubelet client certificate's ([client auth digital signature] or with key encipherment)", usageSet(csr.Spec.Usages)), nil
	}
	// A node that authenticates with an identity token gets a new token every 15
	// minutes and never needs a client certificate; one would outlive the token by far.
	// Bootstrap-token users (system:bootstrap:<id>) are in system:bootstrappers too,
	// and renewing kubelets authenticate with their certificate, outside it.
	user := csr.Spec.Username
	if slices.Contains(csr.Spec.Groups, bootstrappersGroup) && !strings.HasPrefix(user, bootstrapUserPrefix) {
		return deny(ReasonTokenRequester, "requester %q authenticated with a token, not a bootstrap token; nodes that authenticate with tokens get no client certificate", user), nil
	}
	sub, msg := subresourceNodeCli, MessageClient
	if csr.Spec.Username == req.Subject.CommonName {
		sub, msg = subresourceSelfCli, MessageSelfClient
	}
	node := strings.TrimPrefix(req.Subject.CommonName, nodeUserPrefix)
	bootstrap := strings.HasPrefix(user, bootstrapUserPrefix)
	// Each lookup is a round trip to a busy API server. A bootstrap CSR's read of the
	// API server (is the Node registered) starts with the SubjectAccessReview; the
	// instance lookup, a cloud call, starts only once the review allowed the request,
	// so that a requester without the right costs no cloud call. Nothing is decided
	// before the review's answer, and the checks below keep their order.
	ctx, cancel := context.WithCancel(ctx) // ends a read left behind by a denial
	defer cancel()
	var registered <-chan nodeRead
	if bootstrap {
		registered = p.startNodeRead(ctx, node)
	}
	ok, err := p.Review(ctx, csr, sub)
	if err != nil {
		return nil, err
	}
	if !ok {
		return deny(ReasonAccessReview, "%s may not create certificatesigningrequests/%s", csr.Spec.Username, sub), nil
	}
	inst, d, err := p.runningInstance(ctx, node)
	if d != nil || err != nil {
		return d, err
	}
	if !bootstrap {
		return &Decision{Approve: true, Reason: ReasonApproved, Message: msg}, nil
	}
	return p.decideBootstrap(ctx, csr, inst, node, msg, registered)
}

// decideBootstrap decides the client CSR of a bootstrap token, whose review allowed it,
// for a running instance: the token may name any node (NodeRestriction does not apply
// to it), so it gets a first client certificate only for an instance of its node group
// (checkBinding) that has none yet.
func (p *Policy) decideBootstrap(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, inst *inventory.Instance, node, msg string, registered <-chan nodeRead) (*Decision, error) {
	if d, err := p.checkBinding(ctx, csr.Spec.Groups, csr.Spec.Username, inst); d != nil || err != nil {
		return d, err
	}
	reg := <-registered
	if reg.err != nil {
		return nil, fmt.Errorf("looking up Node %s: %w", node, reg.err)
	}
	if reg.registered {
		return deny(ReasonAlreadyJoined, "node %s is already registered; a bootstrap token cannot take it over", node), nil
	}
	holder, err := p.Issued.Holder(ctx, inst.ID)
	if err != nil {
		return nil, fmt.Errorf("reading the client certificates issued through bootstrap tokens: %w", err)
	}
	if holder != "" && holder != csr.Name {
		return deny(ReasonAlreadyJoined, "instance %s of node %s already got a client certificate through a bootstrap token (CSR %s)", inst.ID, node, holder), nil
	}
	return &Decision{Approve: true, Reason: ReasonApproved, Message: msg, ClaimInstance: inst.ID}, nil
}

// nodeRead is the answer to whether a Node is registered.
type nodeRead struct {
	registered bool
	err        error
}

// startNodeRead asks, in the background, whether the node is registered.
func (p *Policy) startNodeRead(ctx context.Context, node string) <-chan nodeRead {
	out := make(chan nodeRead, 1)
	go func() {
		registered, err := p.NodeRegistered(ctx, node)
		out <- nodeRead{registered, err}
	}()
	return out
}

func (p *Policy) decideServing(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) (*Decision, error) {
	user := csr.Spec.Username
	node, isNode := strings.CutPrefix(user, nodeUserPrefix)
	if !isNode || node == "" || !slices.Contains(csr.Spec.Groups, nodesGroup) {
		return deny(ReasonNotANode, "requester %q is not a node (want system:node:<name> in group system:nodes)", user), nil
	}
	if req.Subject.CommonName != user {
		return deny(ReasonSubject, "subject common name %q is not the requester %q", req.Subject.CommonName, user), nil
	}
	if !usagesOK(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		return deny(ReasonUsages, "usages %v are not a kubelet serving certificate's ([digital signature server auth] or with key encipherment)", usageSet(csr.Spec.Usages)), nil
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return deny(ReasonSANs, "a serving certificate needs at least one DNS or IP subjectAltName"), nil
	}
	if n, limit := len(req.DNSNames)+len(req.IPAddresses), p.maxSANs(); n > limit {
		return deny(ReasonTooManySANs, "the request has %d DNS and IP subjectAltNames, more than the maximum of %d", n, limit), nil
	}
	ok, err := p.Review(ctx, csr, subresourceSelfSrv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return deny(ReasonAccessReview, "%s may not create certificatesigningrequests/%s", user, subresourceSelfSrv), nil
	}
	inst, d, err := p.runningInstance(ctx, node)
	if d != nil || err != nil {
		return d, err
	}
	if d := checkSANs(req, inst); d != nil {
		return d, nil
	}
	if d := p.countServing(node, csr.Name); d != nil {
		return d, nil
	}
	return &Decision{Approve: true, Reason: ReasonApproved, Message: MessageServing}, nil
}

// runningInstance returns the instance behind a node name, or a denial when there is
// none or it is not running.
func (p *Policy) runningInstance(ctx context.Context, node string) (*inventory.Instance, *Decision, error) {
	inst, err := p.Inventory.InstanceForNode(ctx, node)
	if errors.Is(err, inventory.ErrNotFound) {
		return nil, deny(ReasonUnknownInstance, "no instance is known for node %s", node), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("looking up the instance of node %s: %w", node, err)
	}
	if inst.State != "running" {
		return nil, deny(ReasonUnknownInstance, "instance %s of node %s is %s, not running", inst.ID, node, inst.State), nil
	}
	return inst, nil, nil
}

// checkSANs requires every DNS and IP subjectAltName to be one of the instance's own,
// exactly: no wildcards, no upper case, no trailing dot, no IPv4-mapped IPv6, and no
// loopback, link-local, multicast or unspecified address.
func checkSANs(req *x509.CertificateRequest, inst *inventory.Instance) *Decision {
	for _, name := range req.DNSNames {
		switch {
		case strings.Contains(name, "*"):
			return deny(ReasonSANs, "DNS SAN %q is a wildcard", name)
		case name != strings.ToLower(name):
			return deny(ReasonSANs, "DNS SAN %q is not lower case", name)
		case strings.HasSuffix(name, "."):
			return deny(ReasonSANs, "DNS SAN %q ends with a dot", name)
		case !slices.Contains(inst.DNSNames, name):
			return deny(ReasonSANs, "DNS SAN %s is not a name of instance %s", name, inst.ID)
		}
	}
	for _, ip := range req.IPAddresses {
		if d := checkIP(ip, inst); d != nil {
			return d
		}
	}
	return nil
}

func checkIP(raw net.IP, inst *inventory.Instance) *Decision {
	addr, ok := netip.AddrFromSlice(raw)
	if !ok {
		return deny(ReasonSANs, "IP SAN %v does not parse", raw)
	}
	switch {
	case addr.Is4In6():
		return deny(ReasonSANs, "IP SAN %s is an IPv4-mapped IPv6 address", addr)
	case addr.IsLoopback(), addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast(), addr.IsMulticast(), addr.IsUnspecified():
		return deny(ReasonSANs, "IP SAN %s is a loopback, link-local, multicast or unspecified address", addr)
	case !slices.Contains(inst.IPs, addr):
		return deny(ReasonSANs, "IP SAN %s is not an address of instance %s", addr, inst.ID)
	}
	return nil
}
