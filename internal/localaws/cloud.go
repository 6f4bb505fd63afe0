// Package localaws is a local AWS account: the AWS APIs that nodejoin calls, answered
// on this machine on their real wire protocols, so that the same aws-sdk-go-v2 code
// runs locally and on AWS. Cloud wires the services together and serves them; each
// service is a package of its own (ec2, autoscaling, iam, sts, imds, eks,
// cloudformation) over one wire layer (protocol). Other packages import this one only:
// api.go names what they use.
package localaws

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/localaws/autoscaling"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation"
	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/edge"
	"github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/imds"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// Cloud is one local AWS account: STS (over HTTPS, as token verifiers insist on), EC2,
// IAM, Auto Scaling and CloudFormation, each served on a loopback port of the host, for
// the code of this process — nodejoin-controller in `nodejoin up` — to call through
// aws-sdk-go-v2; and, with WithEdge, all of them on one HTTPS endpoint that verifies
// signatures (Edge), for users' AWS CLI and eksctl. The per-service ports check that a
// request is signed, not by whom.
type Cloud struct {
	AccountID string
	Region    string
	STS       *sts.STS
	EC2       *ec2.EC2
	IAM       *iam.IAM
	// LaunchTemplates are EC2's launch templates, served on EC2URL too.
	LaunchTemplates *ec2.LaunchTemplates
	// AutoScaling launches its groups' instances through the Launcher set with
	// AutoScaling.SetLauncher.
	AutoScaling *autoscaling.AutoScaling
	// CloudFormation records cfn-signal's signals.
	CloudFormation *cloudformation.CloudFormation
	// The endpoints.
	STSURL, EC2URL, IAMURL            string
	AutoScalingURL, CloudFormationURL string
	// STSRoots trusts STS's serving certificate (and the edge's).
	STSRoots *x509.CertPool
	// Edge serves every service on one endpoint, verifying signatures against the
	// account's credentials; Edge.Route adds services (EKS, SSM). It is served on
	// EdgeURL (HTTPS) when StartCloud was given WithEdge, and may be served elsewhere too.
	Edge    *edge.Edge
	EdgeURL string
	// Admin is the account's administrator: an IAM user with a long-term access key.
	Admin AdminCredentials
	// IdentitySigner, when set, signs the instance identity documents of the instances'
	// metadata services (imds.IMDS.WithSigner).
	IdentitySigner *imds.Signer

	dhcpDomain string
	edgeAddr   string
	servers    int
	done       chan error
}

// AdminCredentials are the account administrator's access key, and who it is.
type AdminCredentials struct {
	UserName        string `json:"userName"`
	ARN             string `json:"arn"`
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// AdminUserName is the local account administrator's IAM user name.
const AdminUserName = "nodejoin-admin"

// NewAdminKey draws a new access key for the account's administrator: an AKIA… key ID
// and a 40-character secret, from crypto/rand.
func NewAdminKey() (accessKeyID, secret string, err error) {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := make([]byte, 56)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("drawing the administrator's access key: %w", err)
	}
	id, sec := []byte("AKIA"), make([]byte, 40)
	for _, c := range b[:16] {
		id = append(id, upper[int(c)%len(upper)])
	}
	for i, c := range b[16:] {
		sec[i] = secretChars[int(c)%len(secretChars)]
	}
	return string(id), string(sec), nil
}

// WithAdminKey gives the account's administrator (AdminUserName) this access key, so
// that it stays the same across restarts; without it, StartCloud draws one.
func WithAdminKey(accessKeyID, secret string) CloudOption {
	return func(c *Cloud) { c.Admin.AccessKeyID, c.Admin.SecretAccessKey = accessKeyID, secret }
}

// WithEdge serves the edge (every service on one endpoint) over HTTPS on addr, a
// loopback address such as 127.0.0.1:4566 (port 0 picks one), with a certificate from
// the cluster CA for 127.0.0.1 and localhost.
func WithEdge(addr string) CloudOption { return func(c *Cloud) { c.edgeAddr = addr } }

// DefaultRegion is the local cloud's region unless WithRegion says otherwise.
const DefaultRegion = "us-west-2"

// CloudOption changes how StartCloud sets up the account.
type CloudOption func(*Cloud)

// WithRegion sets the account's region (Auto Scaling's zones and ARNs).
func WithRegion(region string) CloudOption { return func(c *Cloud) { c.Region = region } }

// WithDHCPDomainName gives the account's VPC (DefaultVPCID) DHCP options whose
// domain-name is domain, as a VPC's DHCP options set does on AWS: instance metadata then
// names instances ip-A-B-C-D.DOMAIN (local-hostname), while EC2's PrivateDnsName stays
// as it was. StartCloud refuses a domain that ValidateDHCPDomainName refuses.
func WithDHCPDomainName(domain string) CloudOption {
	return func(c *Cloud) { c.dhcpDomain = domain }
}

// StartCloud serves the account's endpoints on loopback until ctx ends, and runs Auto
// Scaling's reconcile loop; Wait reports how they ended. ca signs STS's serving
// certificate.
func StartCloud(ctx context.Context, accountID string, ca *pki.CA, log *slog.Logger, opts ...CloudOption) (*Cloud, error) {
	c := &Cloud{AccountID: accountID, Region: DefaultRegion, STS: sts.New(accountID), EC2: ec2.New(accountID), done: make(chan error, 8)}
	for _, o := range opts {
		o(c)
	}
	if c.Admin.AccessKeyID == "" {
		var err error
		if c.Admin.AccessKeyID, c.Admin.SecretAccessKey, err = NewAdminKey(); err != nil {
			return nil, err
		}
	}
	c.Admin.UserName, c.Admin.ARN = AdminUserName, fmt.Sprintf("arn:aws:iam::%s:user/%s", accountID, AdminUserName)
	c.EC2.Region = c.Region
	if c.dhcpDomain != "" {
		if err := c.EC2.SetDHCPDomainName(DefaultVPCID, c.dhcpDomain); err != nil {
			return nil, fmt.Errorf("setting the VPC's DHCP domain name: %w", err)
		}
	}
	c.IAM = iam.New(accountID, c.EC2)
	c.LaunchTemplates = ec2.NewLaunchTemplates(accountID)
	c.EC2.WithLaunchTemplates(c.LaunchTemplates)
	c.AutoScaling = autoscaling.New(autoscaling.Config{AccountID: accountID, Region: c.Region, Templates: c.LaunchTemplates,
		EC2: c.EC2, Profiles: c.IAM, Log: log})
	c.CloudFormation = cloudformation.New().WithStacks(cloudformation.NewStacks(c.Region, accountID))
	// STS reports, and checks, each role's unique ID as IAM holds it, and its trust policy.
	c.STS.RoleIDs, c.STS.TrustPolicies = c.IAM.RoleID, c.IAM.TrustPolicy
	c.STS.Users = c.users().Lookup
	c.Edge = edge.New(c.STS.Lookup)
	c.Edge.Log = log
	for service, h := range map[string]http.Handler{"sts": c.STS, "ec2": c.EC2, "iam": c.IAM, "autoscaling": c.AutoScaling, "cloudformation": c.CloudFormation} {
		c.Edge.Route(service, h)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "local-sts", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		Usage: pki.ServerAuth, Validity: 365 * 24 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("issuing the local STS's certificate: %w", err)
	}
	c.STSRoots = x509.NewCertPool()
	c.STSRoots.AddCert(ca.Cert)
	stsTLS := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}}, MinVersion: tls.VersionTLS12}
	var listeners []net.Listener
	type endpoint struct {
		url     *string
		handler http.Handler
		tls     *tls.Config
		addr    string
	}
	eps := []endpoint{{&c.STSURL, c.STS, stsTLS, ""}, {&c.EC2URL, c.EC2, nil, ""}, {&c.IAMURL, c.IAM, nil, ""},
		{&c.AutoScalingURL, c.AutoScaling, nil, ""}, {&c.CloudFormationURL, c.CloudFormation, nil, ""}}
	if c.edgeAddr != "" {
		eps = append(eps, endpoint{&c.EdgeURL, c.Edge, stsTLS, c.edgeAddr})
	}
	type serving struct {
		srv *http.Server
		l   net.Listener
	}
	var servers []serving
	for _, ep := range eps {
		var lc net.ListenConfig
		addr := cmp.Or(ep.addr, "127.0.0.1:0")
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listening on %s: %w", addr, err)
		}
		listeners = append(listeners, l)
		scheme := "http://"
		if ep.tls != nil {
			scheme = "https://"
		}
		*ep.url = scheme + l.Addr().String()
		servers = append(servers, serving{&http.Server{Handler: ep.handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: ep.tls,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}, l})
	}
	// The stack engine makes resources through the edge, as the account's own control
	// plane, so it runs only where the edge is served.
	if c.EdgeURL != "" {
		c.CloudFormation.WithEngine(ctx, c.engineConfig(log))
	}
	for _, s := range servers {
		c.servers++
		go func() { c.done <- httpserver.Serve(ctx, s.srv, s.l) }()
	}
	go func() {
		c.AutoScaling.Run(ctx)
		c.done <- nil
	}()
	return c, nil
}

// Wait returns once every endpoint has stopped, with their errors.
func (c *Cloud) Wait() error {
	var errs []error
	for range c.servers + 1 {
		errs = append(errs, <-c.done)
	}
	return errors.Join(errs...)
}

// The account's own control plane's access key (ControllerConfig), an IAM user of the
// account: the per-service endpoints ask for a SigV4 signature, not for whose, but the
// edge verifies it.
const (
	controllerKeyID  = "AKIDLOCALCONTROLLER0"
	controllerSecret = "local-controller-secret"
	controllerUser   = "nodejoin-controller"
)

// ControllerKey is the long-term key of the account's control-plane user, for
// nodejoin-controller's pods (the SDK's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
func ControllerKey() (id, secret string) { return controllerKeyID, controllerSecret }

// ControllerConfig is the SDK configuration of the account's own control plane: its
// static credentials and the region.
func (c *Cloud) ControllerConfig(region string) aws.Config {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(controllerKeyID, controllerSecret, ""),
	}
}

// AdminConfig is the SDK configuration of the account's administrator, calling the edge.
func (c *Cloud) AdminConfig() aws.Config {
	return aws.Config{
		Region:       c.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(c.Admin.AccessKeyID, c.Admin.SecretAccessKey, ""),
		BaseEndpoint: aws.String(c.EdgeURL),
		HTTPClient:   c.STSHTTPClient(),
	}
}

// users are the account's IAM users and their long-term keys: the administrator and
// the control plane.
func (c *Cloud) users() edge.Static {
	user := func(name, key, secret string) protocol.Credential {
		sum := sha256.Sum256([]byte(c.AccountID + "/" + name))
		return protocol.Credential{Secret: secret, Caller: protocol.Caller{
			ARN: fmt.Sprintf("arn:aws:iam::%s:user/%s", c.AccountID, name), UserID: "AIDA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:17],
			Account: c.AccountID, AccessKey: key}}
	}
	return edge.Static{
		c.Admin.AccessKeyID: user(AdminUserName, c.Admin.AccessKeyID, c.Admin.SecretAccessKey),
		controllerKeyID:     user(controllerUser, controllerKeyID, controllerSecret),
	}
}

// STSHTTPClient calls STS trusting its certificate and following no redirect, as a
// token verifier must.
func (c *Cloud) STSHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: c.STSRoots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
