package ipamrpc

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// pool hands out addresses from a fixed list, as a tiny ipamd would.
type pool struct {
	mu    sync.Mutex
	free  []string
	owner map[string]string
}

func (p *pool) AddNetwork(_ context.Context, req *AddRequest) (*AddReply, error) {
	if err := CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		return nil, ErrPoolEmpty
	}
	ip := p.free[0]
	p.free = p.free[1:]
	p.owner[req.ContainerID] = ip
	return &AddReply{IPv4Addr: ip, RouteTableID: 254, VPCv4CIDRs: []string{"198.18.0.0/16"}}, nil
}

func (p *pool) DelNetwork(_ context.Context, req *DelRequest) (*DelReply, error) {
	if err := CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ip, ok := p.owner[req.ContainerID]
	if !ok {
		return &DelReply{}, nil
	}
	delete(p.owner, req.ContainerID)
	p.free = append(p.free, ip)
	return &DelReply{IPv4Addr: ip, RouteTableID: 254}, nil
}

func TestAddDelOverSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, &pool{free: []string{"198.18.1.5"}, owner: map[string]string{}}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }() // the test is over: a close error changes nothing
	if err := c.Healthy(t.Context()); err != nil {
		t.Fatalf("Healthy: %v", err)
	}
	got, err := c.AddNetwork(t.Context(), &AddRequest{ContainerID: "c1", IfName: "eth0", PodName: "p", PodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if got.IPv4Addr != "198.18.1.5" || got.RouteTableID != 254 || len(got.VPCv4CIDRs) != 1 {
		t.Fatalf("AddNetwork = %+v", got)
	}
	if _, err := c.AddNetwork(t.Context(), &AddRequest{ContainerID: "c2", IfName: "eth0"}); !IsPoolEmpty(err) {
		t.Fatalf("second AddNetwork: err = %v, want pool empty", err)
	}
	del, err := c.DelNetwork(t.Context(), &DelRequest{ContainerID: "c1", IfName: "eth0", Reason: "PodDeleted"})
	if err != nil || del.IPv4Addr != "198.18.1.5" {
		t.Fatalf("DelNetwork = %+v, %v", del, err)
	}
	again, err := c.DelNetwork(t.Context(), &DelRequest{ContainerID: "c1", IfName: "eth0", Reason: "PodDeleted"})
	if err != nil || again.IPv4Addr != "" {
		t.Fatalf("repeated DelNetwork = %+v, %v; want an empty reply", again, err)
	}
}

func TestVersionMismatchIsRefused(t *testing.T) {
	if err := CheckVersion("nodejoin-ipam/0"); err == nil || IsPoolEmpty(err) {
		t.Fatalf("CheckVersion(old) = %v", err)
	}
}
