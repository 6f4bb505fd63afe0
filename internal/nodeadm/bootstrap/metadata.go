package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// EnvIMDSEndpoint overrides the metadata service's address, as for the AWS SDKs.
const EnvIMDSEndpoint = "AWS_EC2_METADATA_SERVICE_ENDPOINT"

// NewIMDSClient returns an IMDSv2 client for the endpoint in $AWS_EC2_METADATA_SERVICE_ENDPOINT,
// or the instance's own metadata service, retrying transient failures for about a
// minute (an instance's metadata service can come up late at boot).
func NewIMDSClient() *imds.Client {
	return imds.New(imds.Options{
		Endpoint: os.Getenv(EnvIMDSEndpoint),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 60
			o.MaxBackoff = time.Second
		}),
	})
}

// IMDS reads what nodeadm needs from instance metadata.
type IMDS struct{ Client *imds.Client }

func (m IMDS) get(ctx context.Context, path string) (string, error) {
	out, err := m.Client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	defer func() { _ = out.Content.Close() }()
	b, err := io.ReadAll(io.LimitReader(out.Content, 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Metadata reads the instance's identity and network facts.
func (m IMDS) Metadata(ctx context.Context) (*Metadata, error) {
	doc, err := m.Client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return nil, fmt.Errorf("reading the instance identity document: %w", err)
	}
	md := &Metadata{InstanceID: doc.InstanceID, InstanceType: doc.InstanceType, Region: doc.Region, AvailabilityZone: doc.AvailabilityZone}
	if md.MAC, err = m.get(ctx, "mac"); err != nil {
		return nil, err
	}
	if md.LocalIPv4, err = m.get(ctx, "local-ipv4"); err != nil {
		return nil, err
	}
	if md.LocalHostname, err = m.get(ctx, "local-hostname"); err != nil {
		return nil, err
	}
	// EC2's name replaces it where EC2 can be asked (ResolvePrivateDNSName).
	md.PrivateDNSName = md.LocalHostname
	nic := "network/interfaces/macs/" + md.MAC + "/"
	if blocks, err := m.get(ctx, nic+"vpc-ipv4-cidr-blocks"); err == nil && blocks != "" {
		md.VPCIPv4CIDRs = strings.Fields(blocks)
	}
	if v6, err := m.get(ctx, nic+"ipv6s"); err == nil && v6 != "" {
		md.IPv6 = strings.Fields(v6)
	}
	return md, nil
}

// UserData returns the instance's user data; none is an empty slice.
func (m IMDS) UserData(ctx context.Context) ([]byte, error) {
	out, err := m.Client.GetUserData(ctx, &imds.GetUserDataInput{})
	if err != nil {
		var notFound interface{ HTTPStatusCode() int }
		if errors.As(err, &notFound) && notFound.HTTPStatusCode() == 404 {
			return nil, nil
		}
		return nil, fmt.Errorf("reading user data: %w", err)
	}
	defer func() { _ = out.Content.Close() }()
	return io.ReadAll(io.LimitReader(out.Content, 16<<20))
}
