package instance

// This file holds what an instance is served in its own namespace: its instance
// metadata (IMDS) and the API server at its host endpoint.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netns"
)

// forwardHostEndpoint makes the API server's host endpoint — a loopback address, the
// one EKS DescribeCluster gives callers outside the VPC and eksctl writes into the user
// data it builds on the host — reach the API server from inside an instance too, as an
// EKS endpoint's name resolves inside and outside the VPC alike. It listens on that
// address in the instance's namespace (its own loopback) and relays each connection to
// the API server's address in the cluster namespace, until ctx ends. Nothing leaves
// the instance's namespace but what the instance could send anyway.
// relayedEndpoint is the loopback address of the host endpoint and the host:port of
// the API server as instances reach it; false when the host endpoint is not a loopback
// URL or names the same address.
func relayedEndpoint(hostEndpoint, instanceEndpoint string) (netip.AddrPort, string, bool) {
	host, herr := url.Parse(hostEndpoint)
	target, terr := url.Parse(instanceEndpoint)
	if herr != nil || terr != nil || host.Host == "" || target.Host == "" || host.Host == target.Host {
		return netip.AddrPort{}, "", false
	}
	ap, err := netip.ParseAddrPort(host.Host)
	if err != nil || !ap.Addr().IsLoopback() {
		return netip.AddrPort{}, "", false
	}
	return ap, target.Host, true
}

func (p *Provider) forwardHostEndpoint(ctx context.Context, ns netns.NS) error {
	ap, target, ok := relayedEndpoint(p.cfg.HostEndpoint, p.cfg.Cluster.Endpoint)
	if !ok {
		return nil // no loopback host endpoint to stand in for
	}
	l, err := ns.Listen("tcp", ap.String())
	if err != nil {
		return fmt.Errorf("the API server's host endpoint %s inside the instance: %w", ap, err)
	}
	go func() {
		if err := ns.Forward(ctx, l, target, p.cfg.Log); err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("the API server's host endpoint stopped inside an instance", "namespace", ns.Name, "err", err)
		}
	}()
	return nil
}

// serveIMDS gives the instance its network (a real one) and its metadata endpoint.
func (inst *Instance) serveIMDS(ctx context.Context, spec *Spec, li localaws.Instance) error {
	p := inst.p
	var creds localaws.CredentialSource = p.cfg.Cloud.STS
	if spec.CredentialsOf != "" {
		creds = stolenCredentials{sts: p.cfg.Cloud.STS, from: spec.CredentialsOf}
	}
	var l net.Listener
	var err error
	if spec.Kubelet == KubeletReal {
		if err := inst.setupNetwork(ctx, li.MAC); err != nil {
			return err
		}
		if spec.ClaimAddress != "" {
			if err := inst.claim(ctx, spec.ClaimAddress); err != nil {
				return err
			}
			spec.KubeletFlags = append(spec.KubeletFlags, "--node-ip="+spec.ClaimAddress)
		}
		if l, err = (netns.NS{Name: inst.Namespace}).Listen("tcp", imdsAddr.String()); err != nil {
			return fmt.Errorf("instance metadata endpoint: %w", err)
		}
	} else {
		var lc net.ListenConfig
		if l, err = lc.Listen(ctx, "tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("instance metadata endpoint: %w", err)
		}
		inst.imdsURL = "http://" + l.Addr().String()
	}
	imdsCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	inst.imdsStop, inst.imdsDone = stop, make(chan error, 1)
	if spec.Kubelet == KubeletReal {
		if err := p.forwardHostEndpoint(imdsCtx, netns.NS{Name: inst.Namespace}); err != nil {
			stop()
			_ = l.Close()
			return err
		}
	}
	srv := &http.Server{Handler: localaws.NewIMDS(li, creds).WithEC2(p.cfg.Cloud.EC2).WithSigner(p.cfg.Cloud.IdentitySigner), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(p.cfg.Log.Handler(), slog.LevelWarn)}
	go func() { inst.imdsDone <- httpserver.Serve(imdsCtx, srv, l) }()
	return nil
}
