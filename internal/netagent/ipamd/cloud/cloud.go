// Package cloud is ipamd's view of AWS: the instance's metadata (IMDS) and the EC2 calls
// the VPC CNI's ipamd makes, behind two small interfaces so that the daemon's logic can
// be tested against a fake, with implementations over aws-sdk-go-v2.
package cloud

import (
	"context"
	"errors"
	"net/netip"

	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// InstanceMetadata is what IMDS says about the instance and its primary ENI: the
// node's own view of itself, which ipamd configures the network from. The record of an
// instance that nodejoin trusts is internal/inventory's Instance.
type InstanceMetadata struct {
	ID               string
	Type             string
	Region           string
	AvailabilityZone string
	PrimaryMAC       string
	PrimaryIP        netip.Addr
	PrimaryENIID     string
	VPCID            string
	SubnetID         string
	SubnetCIDR       netip.Prefix
	SecurityGroupIDs []string
	VPCCIDRs         []netip.Prefix
}

// MetadataENI is one ENI as IMDS lists it under network/interfaces/macs.
type MetadataENI struct {
	MAC          string
	ID           string
	DeviceNumber int
	// IPs are local-ipv4s: the ENI's primary address first.
	IPs        []netip.Addr
	SubnetCIDR netip.Prefix
}

// Metadata reads IMDS.
type Metadata interface {
	Instance(ctx context.Context) (InstanceMetadata, error)
	ENIs(ctx context.Context) ([]MetadataENI, error)
}

// ENI is a network interface as EC2 describes it.
type ENI struct {
	ID           string
	MAC          string
	SubnetID     string
	Description  string
	Status       string
	AttachmentID string
	InstanceID   string
	DeviceNumber int
	PrimaryIP    netip.Addr
	// Secondary are the addresses other than the primary one, sorted.
	Secondary []netip.Addr
	Tags      map[string]string
}

// CreateENIInput says how to create an ENI.
type CreateENIInput struct {
	SubnetID         string
	SecurityGroupIDs []string
	Description      string
	Tags             map[string]string
	// SecondaryIPs is SecondaryPrivateIpAddressCount (0: none).
	SecondaryIPs int
}

// EC2 is the EC2 API as ipamd uses it.
type EC2 interface {
	// InstanceTypeLimits is DescribeInstanceTypes: ENIs and IPv4 addresses per ENI of
	// the default network card.
	InstanceTypeLimits(ctx context.Context, instanceType string) (pool.Limits, error)
	// InstanceENIs is DescribeNetworkInterfaces filtered by attachment.instance-id.
	InstanceENIs(ctx context.Context, instanceID string) ([]ENI, error)
	// DescribeENI is DescribeNetworkInterfaces of one ENI.
	DescribeENI(ctx context.Context, eniID string) (ENI, error)
	// LeakedENIs are ENIs ipamd created for the instance that are attached nowhere
	// (filters tag:node.k8s.amazonaws.com/instance_id and status=available).
	LeakedENIs(ctx context.Context, instanceID string) ([]ENI, error)
	CreateENI(ctx context.Context, in CreateENIInput) (ENI, error)
	// AttachENI attaches an ENI at a device index and returns the attachment ID.
	AttachENI(ctx context.Context, instanceID, eniID string, deviceIndex int) (string, error)
	// SetDeleteOnTermination is ModifyNetworkInterfaceAttribute(Attachment.DeleteOnTermination=true).
	SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) error
	// AssignIPs is AssignPrivateIpAddresses(SecondaryPrivateIpAddressCount=n); it returns
	// the addresses assigned.
	AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error)
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
	DetachENI(ctx context.Context, attachmentID string) error
	DeleteENI(ctx context.Context, eniID string) error
}

// EC2 error codes ipamd acts on.
const (
	CodeENINotFound          = "InvalidNetworkInterfaceID.NotFound"
	CodeAttachmentNotFound   = "InvalidAttachmentID.NotFound"
	CodeIPLimitExceeded      = "PrivateIpAddressLimitExceeded"
	CodeAttachmentLimit      = "AttachmentLimitExceeded"
	CodeInsufficientSubnet   = "InsufficientFreeAddressesInSubnet"
	CodeUnauthorized         = "UnauthorizedOperation"
	CodeUnsupportedOperation = "UnsupportedOperation"
	CodeInvalidAction        = "InvalidAction"
)

// ErrorCode returns an EC2 error's code, or "" for an error that is not an API error.
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// ErrorMessage returns an EC2 error's message (the API's own words, which carry no
// credentials), or the error's text for other errors.
func ErrorMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return err.Error()
}

// Tags ipamd puts on the ENIs it creates, as the VPC CNI does.
const (
	TagInstanceID = "node.k8s.amazonaws.com/instance_id"
	TagCreatedAt  = "node.k8s.amazonaws.com/createdAt"
	TagCluster    = "cluster.k8s.amazonaws.com/name"
	TagOwner      = "eks:eni:owner"
)

// DescriptionPrefix starts the description of every ENI ipamd creates.
const DescriptionPrefix = "aws-K8S-"
