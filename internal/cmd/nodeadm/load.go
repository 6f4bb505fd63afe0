package nodeadm

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// cloud reads instance metadata once, when something first needs it.
type cloud struct {
	imds     *bootstrap.IMDS
	progress io.Writer

	once sync.Once
	md   *bootstrap.Metadata
	err  error
}

func newCloud(progress io.Writer) *cloud {
	return &cloud{imds: &bootstrap.IMDS{Client: bootstrap.NewIMDSClient()}, progress: progress}
}

func (c *cloud) metadata(ctx context.Context) (*bootstrap.Metadata, error) {
	c.once.Do(func() {
		if c.md, c.err = c.imds.Metadata(ctx); c.err != nil {
			return
		}
		// The node's name is EC2's private DNS name, as the control plane sees it.
		api, err := bootstrap.NewEC2Client(ctx, c.md.Region)
		if err != nil {
			c.err = err
			return
		}
		warning, err := bootstrap.ResolvePrivateDNSName(ctx, c.md, api, bootstrap.PrivateDNSOptions{})
		if err != nil {
			c.err = fmt.Errorf("finding the node's name: %w", err)
			return
		}
		if warning != "" && api != nil {
			fmt.Fprintf(c.progress, "  warning: %s\n", warning)
		}
	})
	return c.md, c.err
}

func (c *cloud) resolver(ctx context.Context) (*bootstrap.CloudResolver, error) {
	md, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	return &bootstrap.CloudResolver{Metadata: md, Progress: func(format string, args ...any) {
		fmt.Fprintf(c.progress, "  "+format+"\n", args...)
	}}, nil
}

// DescribeCluster implements userdata.Resolver.
func (c *cloud) DescribeCluster(ctx context.Context, name string, retries int) (*userdata.ClusterInfo, error) {
	r, err := c.resolver(ctx)
	if err != nil {
		return nil, err
	}
	return r.DescribeCluster(ctx, name, retries)
}

// VPCIPv4CIDRs implements userdata.Resolver.
func (c *cloud) VPCIPv4CIDRs(ctx context.Context) ([]string, error) {
	r, err := c.resolver(ctx)
	if err != nil {
		return nil, err
	}
	return r.VPCIPv4CIDRs(ctx)
}

func (c *cloud) load(ctx context.Context, sources []string) (*bootstrap.Loaded, error) {
	return bootstrap.Load(ctx, sources, bootstrap.Environment{IMDS: c.imds, Resolver: c})
}
