package bootstrap

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// Cloud reads instance metadata once, when something first needs it.
type Cloud struct {
	imds     *IMDS
	progress io.Writer

	once sync.Once
	md   *Metadata
	err  error
}

// NewCloud returns a Cloud that reports what it resolves to progress.
func NewCloud(progress io.Writer) *Cloud {
	return &Cloud{imds: &IMDS{Client: NewIMDSClient()}, progress: progress}
}

func (c *Cloud) metadata(ctx context.Context) (*Metadata, error) {
	c.once.Do(func() {
		if c.md, c.err = c.imds.Metadata(ctx); c.err != nil {
			return
		}
		// The node's name is EC2's private DNS name, as the control plane sees it.
		api, err := NewEC2Client(ctx, c.md.Region)
		if err != nil {
			c.err = err
			return
		}
		warning, err := ResolvePrivateDNSName(ctx, c.md, api, PrivateDNSOptions{})
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

func (c *Cloud) resolver(ctx context.Context) (*CloudResolver, error) {
	md, err := c.metadata(ctx)
	if err != nil {
		return nil, err
	}
	return &CloudResolver{Metadata: md, Progress: func(format string, args ...any) {
		fmt.Fprintf(c.progress, "  "+format+"\n", args...)
	}}, nil
}

// DescribeCluster implements userdata.Resolver.
func (c *Cloud) DescribeCluster(ctx context.Context, name string, retries int) (*userdata.ClusterInfo, error) {
	r, err := c.resolver(ctx)
	if err != nil {
		return nil, err
	}
	info, err := r.DescribeCluster(ctx, name, retries)
	if err == nil {
		// bootstrap.sh given only the cluster's name: say where the rest came from.
		fmt.Fprintf(c.progress, "  cluster %s: API server endpoint %s and CA from EKS DescribeCluster\n", name, info.Endpoint)
	}
	return info, err
}

// VPCIPv4CIDRs implements userdata.Resolver.
func (c *Cloud) VPCIPv4CIDRs(ctx context.Context) ([]string, error) {
	r, err := c.resolver(ctx)
	if err != nil {
		return nil, err
	}
	return r.VPCIPv4CIDRs(ctx)
}

// Load reads and merges the configuration of sources.
func (c *Cloud) Load(ctx context.Context, sources []string) (*Loaded, error) {
	return Load(ctx, sources, Environment{IMDS: c.imds, Resolver: c})
}
