package nodeadm

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/nodejoin/nodejoin/internal/node"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// cloud reads instance metadata once, when something first needs it.
type cloud struct {
	imds     *node.IMDS
	progress io.Writer

	once sync.Once
	md   *node.Metadata
	err  error
}

func newCloud(progress io.Writer) *cloud {
	return &cloud{imds: &node.IMDS{Client: node.NewIMDSClient()}, progress: progress}
}

func (c *cloud) metadata(ctx context.Context) (*node.Metadata, error) {
	c.once.Do(func() {
		if c.md, c.err = c.imds.Metadata(ctx); c.err != nil {
			return
		}
		// The node's name is EC2's private DNS name, as the control plane sees it.
		api, err := node.NewEC2Client(ctx, c.md.Region)
		if err != nil {
			c.err = err
			return
		}
		warning, err := node.ResolvePrivateDNSName(ctx, c.md, api, node.PrivateDNSOptions{})
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

func (c *cloud) resolver(ctx context.Context) (*node.CloudResolver, error) {
	md, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	return &node.CloudResolver{Metadata: md, Progress: func(format string, args ...any) {
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

func (c *cloud) load(ctx context.Context, sources []string) (*node.Loaded, error) {
	return node.Load(ctx, sources, node.Environment{IMDS: c.imds, Resolver: c})
}
