package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// The node's name is its private DNS name as EC2 reports it (DescribeInstances'
// PrivateDnsName), which is also what the control plane's webhook names the node from.
// IMDS local-hostname is not always the same: in a VPC whose DHCP options set a custom
// domain it carries that domain, and a kubelet named from it registers a Node that
// NodeRestriction refuses. Upstream nodeadm asks EC2 for the same reason.

// EC2API is the EC2 call nodeadm makes.
type EC2API interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// PrivateDNSOptions bound the wait for EC2 to report a private DNS name, which a
// just-launched instance may not have yet.
type PrivateDNSOptions struct {
	// Interval between DescribeInstances calls while the name is empty (default 3s).
	Interval time.Duration
	// Timeout of the wait (default 5m).
	Timeout time.Duration
}

// ErrNoPrivateDNSName reports an instance EC2 keeps without a private DNS name.
var ErrNoPrivateDNSName = errors.New("no private DNS name")

// EC2PrivateDNSName asks EC2 for an instance's private DNS name, polling while EC2
// reports none yet. Errors of the call itself are returned at once (the SDK retries
// the transient ones).
func EC2PrivateDNSName(ctx context.Context, api EC2API, instanceID string, o PrivateDNSOptions) (string, error) {
	if o.Interval <= 0 {
		o.Interval = 3 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(o.Timeout)
	for {
		out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
		if err != nil {
			return "", fmt.Errorf("ec2:DescribeInstances %s: %w", instanceID, err)
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if aws.ToString(i.InstanceId) == instanceID {
					if name := strings.ToLower(aws.ToString(i.PrivateDnsName)); name != "" {
						return name, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: ec2:DescribeInstances reports none for instance %s after %s", ErrNoPrivateDNSName, instanceID, o.Timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(o.Interval):
		}
	}
}

// ResolvePrivateDNSName sets md.PrivateDNSName from EC2 when api is not nil. When EC2
// cannot be asked, or the call fails, the name stays IMDS local-hostname and the
// returned warning says what that risks. An instance EC2 keeps without a name is an
// error.
func ResolvePrivateDNSName(ctx context.Context, md *Metadata, api EC2API, o PrivateDNSOptions) (warning string, err error) {
	risk := "the control plane names nodes from EC2's private DNS name; where the VPC's DHCP options set a custom domain the two differ and the API server refuses the Node"
	if api == nil {
		return fmt.Sprintf("the node's name is IMDS local-hostname %s: no EC2 endpoint to ask for the private DNS name (set AWS_ENDPOINT_URL_EC2); %s", md.LocalHostname, risk), nil
	}
	name, err := EC2PrivateDNSName(ctx, api, md.InstanceID, o)
	if err != nil {
		if errors.Is(err, ErrNoPrivateDNSName) || ctx.Err() != nil {
			return "", err
		}
		return fmt.Sprintf("the node's name is IMDS local-hostname %s: %v; %s", md.LocalHostname, err, risk), nil
	}
	md.PrivateDNSName = name
	return "", nil
}

// NewEC2Client returns an EC2 client for the instance's region, with the instance's
// credentials and the SDK's endpoint configuration (AWS_ENDPOINT_URL_EC2). It returns
// nil when instance metadata is an emulator ($AWS_EC2_METADATA_SERVICE_ENDPOINT) and
// no EC2 endpoint is set: such an instance is no EC2 instance, and its EC2 is not AWS's.
func NewEC2Client(ctx context.Context, region string) (EC2API, error) {
	if os.Getenv(EnvIMDSEndpoint) != "" && os.Getenv("AWS_ENDPOINT_URL_EC2") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		return nil, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return ec2.NewFromConfig(cfg), nil
}
