package localaws

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkautoscaling "github.com/aws/aws-sdk-go-v2/service/autoscaling"
	sdkec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	sdkeks "github.com/aws/aws-sdk-go-v2/service/eks"
	sdkiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
)

// engineConfig is the stack engine's configuration: SDK clients of the edge signed as
// the account's control plane, SSM parameters from the edge's SSM, and the region's
// zones.
func (c *Cloud) engineConfig(log *slog.Logger) cloudformation.EngineConfig {
	cfg := c.ControllerConfig(c.Region)
	cfg.BaseEndpoint, cfg.HTTPClient = aws.String(c.EdgeURL), c.STSHTTPClient()
	var zones []string
	for _, s := range DefaultSubnets(c.Region) {
		zones = append(zones, s.AvailabilityZone)
	}
	params := ssm.NewFromConfig(cfg)
	return cloudformation.EngineConfig{
		Clients: resource.Clients{EC2: sdkec2.NewFromConfig(cfg), IAM: sdkiam.NewFromConfig(cfg),
			AutoScaling: sdkautoscaling.NewFromConfig(cfg), EKS: sdkeks.NewFromConfig(cfg)},
		SSM: func(ctx context.Context, name string) (string, error) {
			out, err := params.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
			if err != nil {
				return "", err
			}
			return aws.ToString(out.Parameter.Value), nil
		},
		Zones: zones, Region: c.Region, AccountID: c.AccountID, Log: log.With("service", "cloudformation"),
	}
}
