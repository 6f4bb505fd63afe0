// Package imds is the local AWS's instance metadata service (IMDSv2) of one instance:
// its metadata, user data, identity document and role credentials, and, with EC2, its
// network interfaces as EC2 holds them now. Of the local AWS it imports ec2 and sts.
package imds

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
)

// CredentialSource issues credentials for an instance's role: the local STS.
type CredentialSource interface {
	InstanceCredentials(instanceID, role string) (sts.Credentials, error)
}

// IMDS serves the instance metadata of one instance over the IMDSv2 protocol: a
// session token from PUT /latest/api/token, then GETs that carry it. Requests
// without a valid token are refused, as on an instance that requires IMDSv2.
type IMDS struct {
	instance ec2.Instance
	creds    CredentialSource
	now      func() time.Time
	ec2      *ec2.EC2
	signer   *Signer

	mu     sync.Mutex
	tokens map[string]time.Time // token → expiry
}

// Token headers and limits of IMDSv2.
const (
	tokenHeader    = "X-Aws-Ec2-Metadata-Token"             //nolint:gosec // G101: a header name, not a credential.
	tokenTTLHeader = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds" //nolint:gosec // G101: a header name, not a credential.
	maxTokenTTL    = 21600
	maxTokens      = 1024
)

// New returns the metadata service of inst. creds may be nil when the instance has no
// role.
func New(inst ec2.Instance, creds CredentialSource) *IMDS {
	return &IMDS{instance: inst, creds: creds, now: time.Now, tokens: map[string]time.Time{}}
}

// WithEC2 makes the metadata show the instance's network interfaces as EC2 holds them
// now (network/interfaces/macs/...), so that an attachment or an address assignment
// shows at once, as ipamd expects. It returns m.
func (m *IMDS) WithEC2(e *ec2.EC2) *IMDS {
	m.ec2 = e
	return m
}

// WithSigner makes the metadata serve dynamic/instance-identity/signature, the
// document's signature by s. It returns m.
func (m *IMDS) WithSigner(s *Signer) *IMDS {
	m.signer = s
	return m
}

// ServeHTTP implements the IMDSv2 API.
func (m *IMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" {
		m.serveToken(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !m.validToken(r.Header.Get(tokenHeader)) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	body, ok, err := m.lookup(strings.TrimPrefix(r.URL.Path, "/latest/"))
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case !ok:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(body) //nolint:gosec // G705: plain-text metadata for API clients, never rendered as HTML.
	}
}

func (m *IMDS) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// A forwarded request is refused, as the real service refuses X-Forwarded-For.
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		http.Error(w, "Bad Request: "+tokenTTLHeader+" must be 1 to 21600", http.StatusBadRequest)
		return
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		http.Error(w, "token generation failed", http.StatusInternalServerError)
		return
	}
	token := hex.EncodeToString(buf)
	now := m.now()
	m.mu.Lock()
	for t, exp := range m.tokens {
		if !exp.After(now) {
			delete(m.tokens, t)
		}
	}
	if len(m.tokens) >= maxTokens {
		m.mu.Unlock()
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		return
	}
	m.tokens[token] = now.Add(time.Duration(ttl) * time.Second)
	m.mu.Unlock()
	w.Header().Set(tokenTTLHeader, strconv.Itoa(ttl))
	_, _ = w.Write([]byte(token))
}

func (m *IMDS) validToken(token string) bool {
	if token == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	exp, ok := m.tokens[token]
	return ok && exp.After(m.now())
}

// lookup returns the document at a path below /latest/.
func (m *IMDS) lookup(path string) ([]byte, bool, error) {
	in := m.instance
	if path == "user-data" {
		if len(in.UserData) == 0 {
			return nil, false, nil
		}
		return in.UserData, true, nil
	}
	if rest, ok := strings.CutPrefix(path, "dynamic/"); ok {
		return m.dynamic(rest)
	}
	if rest, ok := strings.CutPrefix(path, "meta-data/iam/security-credentials/"); ok && rest != "" {
		return m.credentials(strings.TrimSuffix(rest, "/"))
	}
	tree := m.metadata()
	p := strings.TrimPrefix(path, "meta-data/")
	if path == "meta-data" || path == "meta-data/" {
		p = ""
	} else if p == path {
		return nil, false, nil
	}
	if v, ok := tree[strings.TrimSuffix(p, "/")]; ok && !strings.HasSuffix(p, "/") {
		return []byte(v), true, nil
	}
	// A directory lists its children, sub-directories with a trailing slash.
	prefix := p
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var children []string
	for k := range tree {
		if rest, ok := strings.CutPrefix(k, prefix); ok && rest != "" {
			child, _, deeper := strings.Cut(rest, "/")
			if deeper {
				child += "/"
			}
			if !slices.Contains(children, child) {
				children = append(children, child)
			}
		}
	}
	if len(children) == 0 {
		return nil, false, nil
	}
	slices.Sort(children)
	return []byte(strings.Join(children, "\n")), true, nil
}

// dynamic returns the document at a path below /latest/dynamic/.
func (m *IMDS) dynamic(path string) ([]byte, bool, error) {
	switch path {
	case "instance-identity/document":
		doc, err := m.document()
		return doc, true, err
	case "instance-identity/signature":
		if m.signer == nil {
			return nil, false, nil
		}
		doc, err := m.document()
		if err != nil {
			return nil, false, err
		}
		sig, err := m.signer.Sign(doc)
		if err != nil {
			return nil, false, fmt.Errorf("signing the identity document: %w", err)
		}
		return []byte(base64.StdEncoding.EncodeToString(sig)), true, nil
	}
	return nil, false, nil
}

// document is the instance identity document: the same bytes for the instance's whole
// life (the pending time is EC2's launch time when EC2 is known), as its signature and
// the webhook's trust on first use need.
func (m *IMDS) document() ([]byte, error) {
	in := m.instance
	pending := "2026-01-01T00:00:00Z"
	if m.ec2 != nil {
		for _, r := range m.ec2.Instances() {
			if r.ID == in.ID && !r.LaunchTime.IsZero() {
				pending = r.LaunchTime.UTC().Format(time.RFC3339)
			}
		}
	}
	return json.MarshalIndent(map[string]any{
		"accountId": in.AccountID, "architecture": "x86_64", "availabilityZone": in.AvailabilityZone,
		"imageId": in.ImageID, "instanceId": in.ID, "instanceType": in.Type,
		"pendingTime": pending, "privateIp": in.PrivateIPv4, "region": in.Region, "version": "2017-09-30",
	}, "", "  ")
}

func (m *IMDS) credentials(role string) ([]byte, bool, error) {
	if m.instance.Role == "" || role != m.instance.Role || m.creds == nil {
		return nil, false, nil
	}
	c, err := m.creds.InstanceCredentials(m.instance.ID, role)
	if err != nil {
		return nil, false, fmt.Errorf("issuing credentials: %w", err)
	}
	doc, err := json.MarshalIndent(map[string]string{
		"Code": "Success", "LastUpdated": m.now().UTC().Format(time.RFC3339), "Type": "AWS-HMAC",
		"AccessKeyId": c.AccessKeyID, "SecretAccessKey": c.SecretAccessKey, "Token": c.Token,
		"Expiration": c.Expiration.UTC().Format(time.RFC3339),
	}, "", "  ")
	return doc, true, err
}

// metadata is the flat tree of meta-data paths.
func (m *IMDS) metadata() map[string]string {
	in := m.instance
	// In a VPC whose DHCP options name a domain, the instance's host name is in that
	// domain; EC2's PrivateDnsName is not.
	hostname := in.PrivateDNSName
	if domain := m.dhcpDomain(); domain != "" {
		if a, err := ec2.ParseIPv4(in.PrivateIPv4); err == nil {
			hostname = ec2.DHCPHostname(a, domain)
		}
	}
	t := map[string]string{
		"ami-id":                      in.ImageID,
		"instance-id":                 in.ID,
		"instance-type":               in.Type,
		"instance-life-cycle":         "on-demand",
		"local-ipv4":                  in.PrivateIPv4,
		"local-hostname":              hostname,
		"hostname":                    hostname,
		"mac":                         in.MAC,
		"placement/availability-zone": in.AvailabilityZone,
		"placement/region":            in.Region,
		"services/domain":             "amazonaws.com",
		"services/partition":          "aws",
	}
	if m.ec2 != nil {
		m.liveInterfaces(t)
	} else if in.MAC != "" {
		nic := "network/interfaces/macs/" + in.MAC + "/"
		t[nic+"device-number"] = "0"
		t[nic+"interface-id"] = "eni-" + strings.TrimPrefix(in.ID, "i-")
		t[nic+"local-hostname"] = hostname
		t[nic+"local-ipv4s"] = in.PrivateIPv4
		t[nic+"mac"] = in.MAC
		t[nic+"subnet-id"] = in.SubnetID
		t[nic+"vpc-id"] = in.VPCID
		if len(in.VPCIPv4CIDRs) > 0 {
			t[nic+"vpc-ipv4-cidr-block"] = in.VPCIPv4CIDRs[0]
			t[nic+"vpc-ipv4-cidr-blocks"] = strings.Join(in.VPCIPv4CIDRs, "\n")
		}
		if len(in.IPv6) > 0 {
			t[nic+"ipv6s"] = strings.Join(in.IPv6, "\n")
		}
	}
	if in.Role != "" {
		t["iam/security-credentials/"+in.Role] = "" // listed; served by credentials()
		t["iam/info"] = fmt.Sprintf(`{"Code":"Success","InstanceProfileArn":"arn:aws:iam::%s:instance-profile/%s","InstanceProfileId":"AIPA%s"}`,
			in.AccountID, in.Role, strings.ToUpper(strings.TrimPrefix(in.ID, "i-")))
	}
	for k, v := range t {
		if v == "" && !strings.HasPrefix(k, "iam/security-credentials/") {
			delete(t, k)
		}
	}
	return t
}

// dhcpDomain is the custom domain-name of the DHCP options of the instance's VPC, as
// EC2 holds them; "" without EC2 or for the default options.
func (m *IMDS) dhcpDomain() string {
	if m.ec2 == nil {
		return ""
	}
	return m.ec2.DHCPDomainName(m.instance.VPCID)
}

// liveInterfaces adds the instance's interfaces, as EC2 holds them now, to t.
func (m *IMDS) liveInterfaces(t map[string]string) {
	in := m.instance
	domain := m.dhcpDomain()
	for _, n := range m.ec2.InstanceNetworkInterfaces(in.ID) {
		nic := "network/interfaces/macs/" + n.MAC + "/"
		t[nic+"device-number"] = strconv.Itoa(n.Attachment.DeviceIndex)
		t[nic+"network-card"] = strconv.Itoa(n.Attachment.NetworkCardIndex)
		t[nic+"interface-id"] = n.ID
		t[nic+"mac"] = n.MAC
		t[nic+"owner-id"] = n.OwnerID
		t[nic+"subnet-id"] = n.SubnetID
		t[nic+"vpc-id"] = n.VPCID
		t[nic+"local-ipv4s"] = strings.Join(n.PrivateIPv4s, "\n")
		if len(n.PrivateIPv4s) > 0 {
			if a, err := ec2.ParseIPv4(n.PrivateIPv4s[0]); err == nil {
				t[nic+"local-hostname"] = ec2.PrivateDNSName(a, in.Region)
				if domain != "" {
					t[nic+"local-hostname"] = ec2.DHCPHostname(a, domain)
				}
			}
		}
		if n.Attachment.DeviceIndex == 0 {
			t[nic+"local-hostname"] = t["local-hostname"]
		}
		t[nic+"security-group-ids"] = strings.Join(n.Groups, "\n")
		var names []string
		for _, g := range n.Groups {
			names = append(names, ec2.SecurityGroupName(g))
		}
		t[nic+"security-groups"] = strings.Join(names, "\n")
		if s, ok := m.ec2.SubnetOf(n.SubnetID); ok {
			t[nic+"subnet-ipv4-cidr-block"] = s.CIDR.String()
		}
		if len(in.VPCIPv4CIDRs) > 0 {
			t[nic+"vpc-ipv4-cidr-block"] = in.VPCIPv4CIDRs[0]
			t[nic+"vpc-ipv4-cidr-blocks"] = strings.Join(in.VPCIPv4CIDRs, "\n")
		}
		if len(n.IPv6) > 0 {
			t[nic+"ipv6s"] = strings.Join(n.IPv6, "\n")
		}
		if n.Attachment.DeviceIndex == 0 {
			t["mac"] = n.MAC
		}
	}
}
