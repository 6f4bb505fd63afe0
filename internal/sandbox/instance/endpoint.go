package instance

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// forwardHostEndpoint makes the API server's host endpoint — a loopback address, the
// one EKS DescribeCluster gives callers outside the VPC and eksctl writes into the user
// data it builds on the host — reach the API server from inside an instance too, as an
// EKS endpoint's name resolves inside and outside the VPC alike. It listens on that
// address in the instance's namespace (its own loopback) and relays each connection to
// the API server's address in the cluster namespace, until ctx ends. Nothing leaves
// the instance's namespace but what the instance could send anyway.
func (p *Provider) forwardHostEndpoint(ctx context.Context, ns netns.NS) error {
	host, err := url.Parse(p.cfg.HostEndpoint)
	if err != nil || host.Host == "" {
		return nil // no host endpoint: nothing to stand in for
	}
	ap, err := netip.ParseAddrPort(host.Host)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil
	}
	target, err := url.Parse(p.cfg.Cluster.Endpoint)
	if err != nil || target.Host == "" || target.Host == host.Host {
		return nil
	}
	l, err := ns.Listen("tcp", ap.String())
	if err != nil {
		return fmt.Errorf("the API server's host endpoint %s inside the instance: %w", ap, err)
	}
	go func() {
		if err := ns.Forward(ctx, l, target.Host, p.cfg.Log); err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("the API server's host endpoint stopped inside an instance", "namespace", ns.Name, "err", err)
		}
	}()
	return nil
}

