package csr

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

const nodeA = "ip-198-18-0-11.us-west-2.compute.internal"

// staticInventory is the inventory of a fixed set of instances (the local provider's).
type staticInventory map[string]*inventory.Instance

func (s staticInventory) InstanceForNode(_ context.Context, node string) (*inventory.Instance, error) {
	if i, ok := s[node]; ok {
		return i, nil
	}
	return nil, inventory.ErrNotFound
}

// workerTags are the tags of an instance of node group "workers" of cluster "test".
var workerTags = map[string]string{NodeGroupTag: "workers", ClusterTagPrefix + "test": "owned"}

var instances = staticInventory{
	nodeA: {ID: "i-0aaa", State: "running", Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/nodes", Tags: workerTags, DNSNames: []string{nodeA, "ec2-3-18-214-69.us-west-2.compute.amazonaws.com"},
		IPs: []netip.Addr{netip.MustParseAddr("198.18.0.11"), netip.MustParseAddr("3.18.214.69")}},
	"ip-198-18-0-12.us-west-2.compute.internal": {ID: "i-0bbb", State: "running", Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/nodes", Tags: workerTags, DNSNames: []string{"ip-198-18-0-12.us-west-2.compute.internal"},
		IPs: []netip.Addr{netip.MustParseAddr("198.18.0.12")}},
	"ip-198-18-0-13.us-west-2.compute.internal": {ID: "i-0ccc", State: "terminated", DNSNames: []string{"ip-198-18-0-13.us-west-2.compute.internal"},
		IPs: []netip.Addr{netip.MustParseAddr("198.18.0.13")}},
}

type reqSpec struct {
	cn       string
	orgs     []string
	dns      []string
	ips      []string
	emails   []string
	uris     []string
	rawIPSAN []byte        // an IP SAN written as these exact bytes
	key      crypto.Signer // the request's key; default a new P-256 key
}

func request(t *testing.T, s reqSpec) []byte {
	t.Helper()
	key := s.key
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: s.cn, Organization: s.orgs}, DNSNames: s.dns, EmailAddresses: s.emails}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.uris {
		pu, _ := url.Parse(u)
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	if s.rawIPSAN != nil {
		// Go writes IPv4-mapped addresses as 4 bytes; a hostile client need not.
		san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: s.rawIPSAN}})
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: san}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

var (
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
)

func servingCSR(t *testing.T, user string, groups []string, s reqSpec) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-test"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request(t, s), SignerName: SignerKubeletServing, Usages: servingUsages, Username: user, Groups: groups,
		},
	}
}

func TestServingDecisions(t *testing.T) {
	user := "system:node:" + nodeA
	nodes := []string{"system:nodes", "system:authenticated"}
	good := reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}}
	with := func(mod func(*reqSpec)) reqSpec { s := good; mod(&s); return s }
	seven := int32(400 * 24 * 3600)
	type servingCase struct {
		name   string
		csr    *certificatesv1.CertificateSigningRequest
		reason string
		msg    string
	}
	tests := []servingCase{
		{"own names and addresses", servingCSR(t, user, nodes, good), ReasonApproved, MessageServing},
		{"public name and IP", servingCSR(t, user, nodes, with(func(s *reqSpec) {
			s.dns = []string{nodeA, "ec2-3-18-214-69.us-west-2.compute.amazonaws.com"}
			s.ips = []string{"198.18.0.11", "3.18.214.69"}
		})), ReasonApproved, MessageServing},
		{"another node's IP", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.ips = []string{"198.18.0.11", "198.18.0.12"} })), ReasonSANs, "IP SAN 198.18.0.12 is not an address of instance i-0aaa"},
		{"another node's name", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns = []string{"ip-198-18-0-12.us-west-2.compute.internal"} })), ReasonSANs, "DNS SAN ip-198-18-0-12.us-west-2.compute.internal is not a name of instance i-0aaa"},
		{"the API server's name", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns = []string{"kubernetes.default.svc"} })), ReasonSANs, "DNS SAN kubernetes.default.svc is not a name"},
		{"the service IP", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.ips = []string{"10.100.0.1"} })), ReasonSANs, "IP SAN 10.100.0.1 is not an address"},
		{"wildcard", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns = []string{"*.us-west-2.compute.internal"} })), ReasonSANs, "is a wildcard"},
		{"upper case", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns = []string{strings.ToUpper(nodeA)} })), ReasonSANs, "is not lower case"},
		{"trailing dot", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns = []string{nodeA + "."} })), ReasonSANs, "ends with a dot"},
		{"IPv4-mapped IPv6", servingCSR(t, user, nodes, with(func(s *reqSpec) {
			s.ips = nil
			s.rawIPSAN = net.ParseIP("::ffff:198.18.0.11").To16()
		})), ReasonSANs, "IP SAN ::ffff:198.18.0.11 is an IPv4-mapped IPv6 address"},
		{"link-local", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.ips = []string{"169.254.169.254"} })), ReasonSANs, "link-local"},
		{"loopback", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.ips = []string{"127.0.0.1"} })), ReasonSANs, "loopback"},
		{"requester outside system:nodes", servingCSR(t, user, []string{"system:authenticated"}, good), ReasonNotANode, "is not a node"},
		{"requester not a node user", servingCSR(t, "alice", nodes, good), ReasonNotANode, `requester "alice" is not a node`},
		{"CN is another node", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.cn = "system:node:ip-198-18-0-12.us-west-2.compute.internal" })), ReasonSubject, "is not the requester"},
		{"extra organization", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.orgs = []string{"system:nodes", "system:masters"} })), ReasonSubject, "is not exactly [system:nodes]"},
		{"email SAN", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.emails = []string{"a@b.c"} })), ReasonSANs, "email and URI"},
		{"URI SAN", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.uris = []string{"spiffe://x/y"} })), ReasonSANs, "email and URI"},
		{"no SANs", servingCSR(t, user, nodes, with(func(s *reqSpec) { s.dns, s.ips = nil, nil })), ReasonSANs, "at least one DNS or IP"},
		{"terminated instance", servingCSR(t, "system:node:ip-198-18-0-13.us-west-2.compute.internal", nodes, reqSpec{cn: "system:node:ip-198-18-0-13.us-west-2.compute.internal", orgs: []string{"system:nodes"}, ips: []string{"198.18.0.13"}}), ReasonUnknownInstance, "is terminated, not running"},
		{"unknown node", servingCSR(t, "system:node:ghost", nodes, reqSpec{cn: "system:node:ghost", orgs: []string{"system:nodes"}, ips: []string{"198.18.0.99"}}), ReasonUnknownInstance, "no instance is known for node ghost"},
	}
	wrongUsages := servingCSR(t, user, nodes, good)
	wrongUsages.Spec.Usages = append(wrongUsages.Spec.Usages, certificatesv1.UsageClientAuth)
	tests = append(tests, servingCase{"client auth on a serving cert", wrongUsages, ReasonUsages, "are not a kubelet serving certificate's"})
	long := servingCSR(t, user, nodes, good)
	long.Spec.ExpirationSeconds = &seven
	tests = append(tests, servingCase{"excessive expirationSeconds", long, ReasonExpiration, "exceeds the maximum of 31536000"})

	p := &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
		return true, nil
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := p.Decide(t.Context(), tt.csr)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != tt.reason || !strings.Contains(d.Message, tt.msg) || d.Approve != (tt.reason == ReasonApproved) {
				t.Errorf("decision = %+v, want reason %s and message containing %q", d, tt.reason, tt.msg)
			}
		})
	}
}

func TestClientDecisions(t *testing.T) {
	bootstrappers := []string{"system:bootstrappers", "system:bootstrappers:workers", "system:authenticated"}
	certNode := []string{"system:nodes", "system:authenticated"}
	tokenNode := []string{"system:bootstrappers", "system:nodes", "system:authenticated"}
	client := func(user string, groups []string, cn string, dns []string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request(t, reqSpec{cn: cn, orgs: []string{"system:nodes"}, dns: dns}), SignerName: SignerKubeletClient,
			Usages: clientUsages, Username: user, Groups: groups,
		}}
	}
	const (
		cnA          = "system:node:" + nodeA
		cnTerminated = "system:node:ip-198-18-0-13.us-west-2.compute.internal"
	)
	allowed := map[string]bool{}
	issued := mapRecord{"i-0bbb": "csr-earlier"}
	p := &Policy{Inventory: instances, Review: func(_ context.Context, c *certificatesv1.CertificateSigningRequest, sub string) (bool, error) {
		return allowed[c.Spec.Username+"/"+sub], nil
	}, NodeRegistered: func(_ context.Context, name string) (bool, error) {
		return name == "ip-198-18-0-12.us-west-2.compute.internal", nil
	}, Issued: issued, ClusterName: "test", NodeRoles: roleSet{"arn:aws:iam::111122223333:role/nodes": true}}
	allowed["system:bootstrap:abcdef/nodeclient"] = true
	allowed[cnA+"/selfnodeclient"] = true
	allowed[cnA+"/nodeclient"] = true
	allowed[cnTerminated+"/selfnodeclient"] = true
	tests := []struct {
		name           string
		csr            *certificatesv1.CertificateSigningRequest
		reason, substr string
	}{
		{"bootstrap token, first join", client("system:bootstrap:abcdef", bootstrappers, cnA, nil), ReasonApproved, MessageClient},
		{"renewal with a client certificate", client(cnA, certNode, cnA, nil), ReasonApproved, MessageSelfClient},
		{"bootstrap token without nodeclient", client("system:bootstrap:zzzzzz", bootstrappers, cnA, nil), ReasonAccessReview, "system:bootstrap:zzzzzz may not create certificatesigningrequests/nodeclient"},
		{"SANs", client("system:bootstrap:abcdef", bootstrappers, cnA, []string{"a"}), ReasonSANs, "no subjectAltNames"},
		{"not a node CN", client("system:bootstrap:abcdef", bootstrappers, "admin", nil), ReasonSubject, "does not begin with system:node:"},
		{"junk", &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: SignerKubeletClient, Request: []byte("junk")}}, ReasonBadRequest, "not a PEM CERTIFICATE REQUEST"},
		// Finding 4: a node authenticated by an identity token is in
		// system:bootstrappers but is not a bootstrap-token user.
		{"identity-token node, own name", client(cnA, tokenNode, cnA, nil), ReasonTokenRequester, `requester "system:node:` + nodeA + `" authenticated with a token, not a bootstrap token; nodes that authenticate with tokens get no client certificate`},
		{"identity-token node, another name", client(cnA, tokenNode, "system:node:ip-198-18-0-12.us-west-2.compute.internal", nil), ReasonTokenRequester, "authenticated with a token"},
		// Finding 4: every client CSR names a running instance.
		{"bootstrap token, unknown node", client("system:bootstrap:abcdef", bootstrappers, "system:node:ghost", nil), ReasonUnknownInstance, "no instance is known for node ghost"},
		{"bootstrap token, terminated instance", client("system:bootstrap:abcdef", bootstrappers, cnTerminated, nil), ReasonUnknownInstance, "instance i-0ccc of node ip-198-18-0-13.us-west-2.compute.internal is terminated, not running"},
		{"renewal, terminated instance", client(cnTerminated, certNode, cnTerminated, nil), ReasonUnknownInstance, "is terminated, not running"},
		// Finding 3: a bootstrap token takes over no node.
		{"bootstrap token, registered node", client("system:bootstrap:abcdef", bootstrappers, "system:node:ip-198-18-0-12.us-west-2.compute.internal", nil), ReasonAlreadyJoined,
			"node ip-198-18-0-12.us-west-2.compute.internal is already registered; a bootstrap token cannot take it over"},
	}
	for _, tt := range tests {
		d, err := p.Decide(t.Context(), tt.csr)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != tt.reason || !strings.Contains(d.Message, tt.substr) || d.Approve != (tt.reason == ReasonApproved) {
			t.Errorf("%s: decision = %+v, want %s %q", tt.name, d, tt.reason, tt.substr)
		}
	}
	// Once instance i-0aaa got its client certificate through a bootstrap token, the
	// token gets no second one; the kubelet renews with its certificate.
	issued["i-0aaa"] = "csr-first"
	again := client("system:bootstrap:abcdef", bootstrappers, cnA, nil)
	again.Name = "csr-again"
	if d, err := p.Decide(t.Context(), again); err != nil || d.Reason != ReasonAlreadyJoined ||
		d.Message != "instance i-0aaa of node "+nodeA+" already got a client certificate through a bootstrap token (CSR csr-first)" {
		t.Errorf("second bootstrap client CSR: %+v, %v", d, err)
	}
	if d, err := p.Decide(t.Context(), client(cnA, certNode, cnA, nil)); err != nil || !d.Approve {
		t.Errorf("renewal after a bootstrap-token certificate: %+v, %v", d, err)
	}
	other := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/other"}}
	if d, err := p.Decide(t.Context(), other); d != nil || err != nil {
		t.Errorf("other signer: %+v, %v; want left alone", d, err)
	}
}

// Only RSA keys of at least 2048 bits and ECDSA keys on P-256 or P-384 are certified,
// for both signers; the denial names the key.
func TestKeyStrength(t *testing.T) {
	mustKey := func(k crypto.Signer, err error) crypto.Signer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const want = "; want RSA of at least 2048 bits or ECDSA P-256/P-384"
	tests := []struct {
		name string
		key  crypto.Signer
		msg  string // "" approves
	}{
		{"RSA 1024", mustKey(rsa.GenerateKey(rand.Reader, 1024)), "RSA key of 1024 bits" + want}, //nolint:gosec // a weak key is what the policy must deny
		{"RSA 2047", mustKey(rsa.GenerateKey(rand.Reader, 2047)), "RSA key of 2047 bits" + want}, //nolint:gosec // a weak key is what the policy must deny
		{"RSA 2048", mustKey(rsa.GenerateKey(rand.Reader, 2048)), ""},
		{"P-224", mustKey(ecdsa.GenerateKey(elliptic.P224(), rand.Reader)), "ECDSA key on curve P-224" + want},
		{"P-256", mustKey(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)), ""},
		{"P-384", mustKey(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)), ""},
		{"P-521", mustKey(ecdsa.GenerateKey(elliptic.P521(), rand.Reader)), "ECDSA key on curve P-521" + want},
		{"Ed25519", edKey, "Ed25519 key" + want},
	}
	user := "system:node:" + nodeA
	p := &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
		return true, nil
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serving := servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, key: tt.key})
			client := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    request(t, reqSpec{cn: user, orgs: []string{"system:nodes"}, key: tt.key}),
				SignerName: SignerKubeletClient, Usages: clientUsages, Username: user, Groups: []string{"system:nodes"},
			}}
			for _, c := range []*certificatesv1.CertificateSigningRequest{serving, client} {
				d, err := p.Decide(t.Context(), c)
				if err != nil {
					t.Fatal(err)
				}
				if tt.msg == "" {
					if !d.Approve {
						t.Errorf("%s: %+v, want approved", c.Spec.SignerName, d)
					}
					continue
				}
				if d.Approve || d.Reason != ReasonWeakKey || d.Message != tt.msg {
					t.Errorf("%s: %+v, want denied %s %q", c.Spec.SignerName, d, ReasonWeakKey, tt.msg)
				}
			}
		})
	}
}

// roleSet is NodeRoles of a fixed set of role ARNs.
type roleSet map[string]bool

func (r roleSet) NodeRole(_ context.Context, inst *inventory.Instance) (string, error) {
	if r[inst.RoleARN] {
		return "test entry", nil
	}
	return "", nil
}

// mapRecord is an IssuedRecord in memory.
type mapRecord map[string]string

func (m mapRecord) Holder(_ context.Context, id string) (string, error) { return m[id], nil }

func (m mapRecord) Claim(_ context.Context, id, csrName string) (string, error) {
	if h := m[id]; h != "" {
		return h, nil
	}
	m[id] = csrName
	return csrName, nil
}
