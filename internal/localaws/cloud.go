// Package localaws is a local AWS account: the AWS APIs that nodejoin calls, answered
// on this machine on their real wire protocols, so that the same aws-sdk-go-v2 code
// runs locally and on AWS. Cloud wires the services together and serves them; each
// service is a package of its own (ec2, autoscaling, iam, sts, imds, eks,
// cloudformation) over one wire layer (protocol). Other packages import this one only:
// api.go names what they use.
package localaws

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/localaws/autoscaling"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation"
	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// Cloud is one local AWS account: STS (over HTTPS, as token verifiers insist on), EC2
// and IAM, each served on a loopback port of the host, for the code of this process —
// nodejoin-controller in `nodejoin up` — to call through aws-sdk-go-v2.
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
	// STSRoots trusts STS's serving certificate.
	STSRoots *x509.CertPool

	dhcpDomain string
	done       chan error
}

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

// endpoints is the number of endpoints StartCloud serves.
const endpoints = 5

// StartCloud serves the account's endpoints on loopback until ctx ends, and runs Auto
// Scaling's reconcile loop; Wait reports how they ended. ca signs STS's serving
// certificate.
func StartCloud(ctx context.Context, accountID string, ca *pki.CA, log *slog.Logger, opts ...CloudOption) (*Cloud, error) {
	c := &Cloud{AccountID: accountID, Region: DefaultRegion, STS: sts.New(accountID), EC2: ec2.New(accountID), done: make(chan error, endpoints+1)}
	for _, o := range opts {
		o(c)
	}
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
	c.CloudFormation = cloudformation.New()
	// STS reports, and checks, each role's unique ID as IAM holds it.
	c.STS.RoleIDs = c.IAM.RoleID
	kp, err := ca.Issue(pki.Request{CommonName: "local-sts", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAuth, Validity: 365 * 24 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("issuing the local STS's certificate: %w", err)
	}
	c.STSRoots = x509.NewCertPool()
	c.STSRoots.AddCert(ca.Cert)
	stsTLS := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key, Leaf: kp.Cert}}, MinVersion: tls.VersionTLS12}
	var listeners []net.Listener
	for _, ep := range []struct {
		url     *string
		handler http.Handler
		tls     *tls.Config
	}{{&c.STSURL, c.STS, stsTLS}, {&c.EC2URL, c.EC2, nil}, {&c.IAMURL, c.IAM, nil},
		{&c.AutoScalingURL, c.AutoScaling, nil}, {&c.CloudFormationURL, c.CloudFormation, nil}} {
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listening on loopback: %w", err)
		}
		listeners = append(listeners, l)
		scheme := "http://"
		if ep.tls != nil {
			scheme = "https://"
		}
		*ep.url = scheme + l.Addr().String()
		srv := &http.Server{Handler: ep.handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: ep.tls,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() { c.done <- httpserver.Serve(ctx, srv, l) }()
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
	for range endpoints + 1 {
		errs = append(errs, <-c.done)
	}
	return errors.Join(errs...)
}

// ControllerConfig is the SDK configuration of the account's own control plane: static
// credentials (the emulators ask for a SigV4 signature, not for whose) and the region.
func (c *Cloud) ControllerConfig(region string) aws.Config {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCALCONTROLLER0", "local-controller-secret", ""),
	}
}

// STSHTTPClient calls STS trusting its certificate and following no redirect, as a
// token verifier must.
func (c *Cloud) STSHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: c.STSRoots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
