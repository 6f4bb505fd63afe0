package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// instanceInventory answers both the CSR policy and the webhook.
type instanceInventory interface {
	csr.Inventory
	authn.Instances
}

// inventoryOptions choose the instance inventory: a JSON file, or EC2.
type inventoryOptions struct {
	file, source                        string
	awsRegion, ec2Endpoint, iamEndpoint string
}

func (o *inventoryOptions) flags(f *pflag.FlagSet) {
	f.StringVar(&o.file, "inventory", "", "JSON file mapping node names to their instances (or give --inventory-source ec2)")
	f.StringVar(&o.source, "inventory-source", "", `"ec2": look instances up with EC2 DescribeInstances and IAM GetInstanceProfile`)
	f.StringVar(&o.awsRegion, "aws-region", "", "AWS region of the instances (with --inventory-source ec2; default: the SDK's)")
	f.StringVar(&o.ec2Endpoint, "ec2-endpoint", "", "EC2 endpoint URL (default: the region's)")
	f.StringVar(&o.iamEndpoint, "iam-endpoint", "", "IAM endpoint URL (default: AWS's)")
}

func (o *inventoryOptions) validate() error {
	switch {
	case o.file != "" && o.source != "":
		return errors.New("give --inventory or --inventory-source, not both")
	case o.file == "" && o.source == "":
		return errors.New("--inventory is required (or --inventory-source ec2): without an instance inventory no node's names, addresses or role can be verified")
	case o.source != "" && o.source != "ec2":
		return fmt.Errorf("--inventory-source %q: the only source is \"ec2\"", o.source)
	}
	return nil
}

func (o *inventoryOptions) open(ctx context.Context) (instanceInventory, error) {
	if o.file != "" {
		return &inventory.File{Path: o.file}, nil
	}
	return openEC2(ctx, o)
}

// openEC2 looks instances up in EC2 through aws-sdk-go-v2's default credential chain.
func openEC2(ctx context.Context, o *inventoryOptions) (instanceInventory, error) {
	var opts []func(*config.LoadOptions) error
	if o.awsRegion != "" {
		opts = append(opts, config.WithRegion(o.awsRegion))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--inventory-source ec2: loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("--inventory-source ec2: no AWS region; give --aws-region or set AWS_REGION")
	}
	return inventory.NewEC2(cfg, inventory.EC2Options{EC2Endpoint: o.ec2Endpoint, IAMEndpoint: o.iamEndpoint}), nil
}

// instancesByID returns the inventory's lookup by instance ID (inventory.EC2's and
// File's), or nil when it has none: the record of bootstrap joins then forgets nothing.
func instancesByID(nodes csr.Inventory) csr.InstancesByID {
	if i, ok := nodes.(csr.InstancesByID); ok {
		return i
	}
	return nil
}
