package localaws

// This file names what other packages use of the local AWS, so that they import this
// package only: the services' types and constructors.

import (
	"log/slog"

	"github.com/nodejoin/nodejoin/internal/localaws/autoscaling"
	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/edge"
	"github.com/nodejoin/nodejoin/internal/localaws/eks"
	"github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/imds"
	"github.com/nodejoin/nodejoin/internal/localaws/ssm"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
)

// EC2 is the EC2 service; its types follow: instances, network and launch templates.
type (
	EC2 = ec2.EC2
	// Instance is ec2.Instance.
	Instance = ec2.Instance
	// InstanceRecord is ec2.InstanceRecord.
	InstanceRecord = ec2.InstanceRecord
	// LaunchOption is ec2.LaunchOption.
	LaunchOption = ec2.LaunchOption
	// Subnet is ec2.Subnet.
	Subnet = ec2.Subnet
	// NetworkInterface is ec2.NetworkInterface.
	NetworkInterface = ec2.NetworkInterface
	// NetworkInterfaceAttachment is ec2.NetworkInterfaceAttachment.
	NetworkInterfaceAttachment = ec2.NetworkInterfaceAttachment
	// NetworkHooks is ec2.NetworkHooks.
	NetworkHooks = ec2.NetworkHooks
	// LaunchTemplates is ec2.LaunchTemplates.
	LaunchTemplates = ec2.LaunchTemplates
)

// The subnet, VPC and security group of instances and interfaces that name none.
const (
	DefaultSubnetID        = ec2.DefaultSubnetID
	DefaultVPCID           = ec2.DefaultVPCID
	DefaultSecurityGroupID = ec2.DefaultSecurityGroupID
)

// NewEC2 returns an empty EC2 inventory of an account; it serves EC2's Query protocol.
func NewEC2(accountID string) *EC2 { return ec2.New(accountID) }

// NewLaunchTemplates returns an account without launch templates.
func NewLaunchTemplates(accountID string) *LaunchTemplates { return ec2.NewLaunchTemplates(accountID) }

// InstanceDefaults fills what inst leaves out, as EC2 names instances.
func InstanceDefaults(inst *Instance) error { return ec2.InstanceDefaults(inst) }

// WithTags tags a launched instance.
func WithTags(tags map[string]string) LaunchOption { return ec2.WithTags(tags) }

// WithPublicIPv4 gives a launched instance a public IPv4 address.
func WithPublicIPv4(addr string) LaunchOption { return ec2.WithPublicIPv4(addr) }

// WithSecondaryPrivateIPv4s adds private addresses to a launched instance's primary
// network interface.
func WithSecondaryPrivateIPv4s(addrs ...string) LaunchOption {
	return ec2.WithSecondaryPrivateIPv4s(addrs...)
}

// ValidateDHCPDomainName checks a DHCP options domain-name (WithDHCPDomainName).
func ValidateDHCPDomainName(name string) error { return ec2.ValidateDHCPDomainName(name) }

// AutoScaling is the Auto Scaling service; Launcher is the seam through which it
// launches instances, which the sandbox implements.
type (
	AutoScaling = autoscaling.AutoScaling
	// AutoScalingConfig is autoscaling.Config.
	AutoScalingConfig = autoscaling.Config
	// Launcher is autoscaling.Launcher.
	Launcher = autoscaling.Launcher
	// LaunchSpec is autoscaling.LaunchSpec.
	LaunchSpec = autoscaling.LaunchSpec
	// LaunchError is autoscaling.LaunchError.
	LaunchError = autoscaling.LaunchError
)

// NewAutoScaling returns the Auto Scaling service of an account, without groups.
func NewAutoScaling(cfg AutoScalingConfig) *AutoScaling { return autoscaling.New(cfg) }

// DefaultSubnets are the local VPC's subnets: one in each of the region's zones a, b
// and c.
func DefaultSubnets(region string) []Subnet { return autoscaling.DefaultSubnets(region) }

// IAM is the IAM service; STS and IMDS (instance metadata) follow.
type (
	IAM = iam.IAM
	// STS is sts.STS.
	STS = sts.STS
	// Credentials is sts.Credentials.
	Credentials = sts.Credentials
	// IMDS is imds.IMDS.
	IMDS = imds.IMDS
	// CredentialSource is imds.CredentialSource.
	CredentialSource = imds.CredentialSource
)

// NewIAM returns the IAM endpoint of an account, whose instance profiles include one per
// role of the instances of e (which may be nil).
func NewIAM(accountID string, e *EC2) *IAM { return iam.New(accountID, e) }

// NewSTS returns an STS for an account.
func NewSTS(accountID string) *STS { return sts.New(accountID) }

// NewIMDS returns the metadata service of inst; creds may be nil when it has no role.
func NewIMDS(inst Instance, creds CredentialSource) *IMDS { return imds.New(inst, creds) }

// EKS is the EKS service; Cluster is what it knows of a cluster.
type (
	EKS = eks.EKS
	// Cluster is eks.Cluster.
	Cluster = eks.Cluster
)

// NewEKS returns an EKS endpoint that knows clusters.
func NewEKS(clusters ...Cluster) *EKS { return eks.New(clusters...) }

// Edge is the one endpoint of every service (edge.Edge): Cloud.Edge.Route adds one.
type Edge = edge.Edge

// EKSBackend is what the local EKS serves from (eks.Backend).
type EKSBackend = eks.Backend

// NewEKSWithBackend returns an EKS endpoint over b; log records the backend's failures.
func NewEKSWithBackend(b EKSBackend, log *slog.Logger) *EKS { return eks.NewWithBackend(b, log) }

// ReleaseCatalog is the EKS-optimized AMI releases the local EC2 lists (ec2.ReleaseCatalog).
type ReleaseCatalog = ec2.ReleaseCatalog

// NewSSM returns the SSM endpoint of the public EKS AMI parameters of releases.
func NewSSM(region string, releases *ReleaseCatalog) *SSM { return ssm.New(region, releases) }

// SSM is the SSM service (ssm.SSM).
type SSM = ssm.SSM

// NewReleaseCatalog returns the EKS-optimized AMI releases the local EC2 lists by
// default (ec2.NewReleaseCatalog).
func NewReleaseCatalog(versions ...string) *ReleaseCatalog { return ec2.NewReleaseCatalog(versions...) }

// IdentitySigner signs instance identity documents (imds.Signer).
type IdentitySigner = imds.Signer

// LoadOrCreateIdentitySigner reads the local cloud's instance identity key kept in dir,
// or makes one and keeps it there (imds.LoadOrCreateSigner).
func LoadOrCreateIdentitySigner(dir string) (*IdentitySigner, error) {
	return imds.LoadOrCreateSigner(dir)
}
