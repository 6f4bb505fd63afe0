package bootstrap

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// CloudResolver answers what AL2-style user data leaves out from the instance's
// metadata and from EKS DescribeCluster, through aws-sdk-go-v2. The EKS endpoint comes
// from the SDK's configuration (AWS_ENDPOINT_URL_EKS or AWS_ENDPOINT_URL locally).
type CloudResolver struct {
	Metadata *Metadata
	// Backoff is the wait before retry attempt n (1-based); nil uses bootstrap.sh's:
	// 5·2^n seconds plus 1 to 10 seconds of jitter.
	Backoff func(n int) time.Duration
	// Progress receives a line per failed attempt; nil discards them.
	Progress func(format string, args ...any)
}

var _ userdata.Resolver = (*CloudResolver)(nil)

// VPCIPv4CIDRs returns the VPC's CIDR blocks from instance metadata.
func (r *CloudResolver) VPCIPv4CIDRs(context.Context) ([]string, error) {
	if len(r.Metadata.VPCIPv4CIDRs) == 0 {
		return nil, errors.New("instance metadata lists no VPC IPv4 CIDR blocks")
	}
	return r.Metadata.VPCIPv4CIDRs, nil
}

func al2Backoff(n int) time.Duration {
	return time.Duration(5<<n)*time.Second + time.Duration(1+rand.IntN(10))*time.Second //nolint:gosec // G404: jitter, not a secret.
}

// DescribeCluster calls EKS DescribeCluster, retrying throttling and transient
// failures up to retries times with jittered exponential backoff. A cluster that does
// not exist, or access that is denied, fails at once.
func (r *CloudResolver) DescribeCluster(ctx context.Context, name string, retries int) (*userdata.ClusterInfo, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(r.Metadata.Region), config.WithRetryMaxAttempts(1))
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	client := eks.NewFromConfig(cfg)
	backoff := r.Backoff
	if backoff == nil {
		backoff = al2Backoff
	}
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			wait := backoff(attempt)
			if r.Progress != nil {
				r.Progress("DescribeCluster %s failed (attempt %d of %d): %v; retrying in %s", name, attempt, retries+1, lastErr, wait)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &name})
		if err == nil {
			return clusterInfo(out.Cluster)
		}
		lastErr = err
		var notFound *ekstypes.ResourceNotFoundException
		if errors.As(err, &notFound) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("exhausted %d attempts: %w", retries+1, lastErr)
}

func clusterInfo(c *ekstypes.Cluster) (*userdata.ClusterInfo, error) {
	if c == nil {
		return nil, errors.New("DescribeCluster returned no cluster")
	}
	info := &userdata.ClusterInfo{}
	if c.Endpoint != nil {
		info.Endpoint = *c.Endpoint
	}
	if c.Id != nil {
		info.ID = *c.Id
	}
	if c.CertificateAuthority != nil && c.CertificateAuthority.Data != nil {
		ca, err := base64.StdEncoding.DecodeString(*c.CertificateAuthority.Data)
		if err != nil {
			return nil, fmt.Errorf("DescribeCluster: certificateAuthority.data is not base64: %w", err)
		}
		info.CertificateData = ca
	}
	if n := c.KubernetesNetworkConfig; n != nil {
		if n.ServiceIpv4Cidr != nil {
			info.ServiceIPv4CIDR = *n.ServiceIpv4Cidr
		}
		if n.ServiceIpv6Cidr != nil {
			info.ServiceIPv6CIDR = *n.ServiceIpv6Cidr
		}
		info.IPFamily = string(n.IpFamily)
	}
	if c.OutpostConfig != nil && len(c.OutpostConfig.OutpostArns) > 0 {
		info.Outpost = true
	}
	return info, nil
}
