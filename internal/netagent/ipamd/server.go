package ipamd

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

var _ ipamrpc.Backend = (*Daemon)(nil)

// AddNetwork gives a pod sandbox an address: the one it already holds when the runtime
// repeats an ADD, else a free one; ipamrpc.ErrPoolEmpty when none is free (the pool
// loop is woken to grow the pool, and the plugin tells the runtime to try again).
func (d *Daemon) AddNetwork(_ context.Context, req *ipamrpc.AddRequest) (*ipamrpc.AddReply, error) {
	if err := ipamrpc.CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	if req.ContainerID == "" || req.IfName == "" {
		return nil, status.Error(codes.InvalidArgument, "AddNetwork needs containerID and ifName")
	}
	d.m.addReqs.Inc()
	a, err := d.store.Assign(datastore.Key{NetworkName: req.NetworkName, ContainerID: req.ContainerID, IfName: req.IfName},
		datastore.PodMeta{Namespace: req.PodNamespace, Name: req.PodName, UID: req.PodUID})
	if errors.Is(err, datastore.ErrNoFreeAddress) {
		d.m.noAddress.Inc()
		d.wake()
		d.log.Warn("no free address for a pod", "pod", req.PodNamespace+"/"+req.PodName, "containerID", req.ContainerID)
		return nil, ipamrpc.ErrPoolEmpty
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.wake()
	d.publish()
	d.log.Info("address assigned", "pod", req.PodNamespace+"/"+req.PodName, "containerID", req.ContainerID, "ifName", req.IfName, "ip", a.IP, "eni", a.ENIID)
	cidrs := make([]string, len(d.inst.VPCCIDRs))
	for i, c := range d.inst.VPCCIDRs {
		cidrs[i] = c.String()
	}
	return &ipamrpc.AddReply{IPv4Addr: a.IP.String(), DeviceNumber: a.DeviceNumber, RouteTableID: a.RouteTable, VPCv4CIDRs: cidrs, MTU: d.o.Knobs.MTU}, nil
}

// DelNetwork releases a sandbox's address; it starts its cool-down. A sandbox that
// holds none gets an empty reply (DEL is idempotent).
func (d *Daemon) DelNetwork(_ context.Context, req *ipamrpc.DelRequest) (*ipamrpc.DelReply, error) {
	if err := ipamrpc.CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	if req.ContainerID == "" || req.IfName == "" {
		return nil, status.Error(codes.InvalidArgument, "DelNetwork needs containerID and ifName")
	}
	reason := req.Reason
	if reason == "" {
		reason = "PodDeleted"
	}
	d.m.delReqs.WithLabelValues(reason).Inc()
	a, ok, err := d.store.Release(datastore.Key{NetworkName: req.NetworkName, ContainerID: req.ContainerID, IfName: req.IfName})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !ok {
		return &ipamrpc.DelReply{}, nil
	}
	d.wake()
	d.publish()
	d.log.Info("address released", "pod", req.PodNamespace+"/"+req.PodName, "containerID", req.ContainerID, "ifName", req.IfName, "ip", a.IP, "reason", reason)
	return &ipamrpc.DelReply{IPv4Addr: a.IP.String(), DeviceNumber: a.DeviceNumber, RouteTableID: a.RouteTable}, nil
}
