package ipamd

import (
	"context"
	"net/netip"
	"time"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// observedEC2 counts and times every EC2 call and keeps the last error for the
// introspection endpoint.
type observedEC2 struct {
	next    cloud.EC2
	observe func(op string, took time.Duration, err error)
}

func (o observedEC2) done(op string, start time.Time, err error) {
	o.observe(op, time.Since(start), err)
}

func (o observedEC2) InstanceTypeLimits(ctx context.Context, t string) (pool.Limits, error) {
	start := time.Now()
	l, err := o.next.InstanceTypeLimits(ctx, t)
	o.done("DescribeInstanceTypes", start, err)
	return l, err
}

func (o observedEC2) InstanceENIs(ctx context.Context, id string) ([]cloud.ENI, error) {
	start := time.Now()
	e, err := o.next.InstanceENIs(ctx, id)
	o.done("DescribeNetworkInterfaces", start, err)
	return e, err
}

func (o observedEC2) DescribeENI(ctx context.Context, id string) (cloud.ENI, error) {
	start := time.Now()
	e, err := o.next.DescribeENI(ctx, id)
	o.done("DescribeNetworkInterfaces", start, err)
	return e, err
}

func (o observedEC2) LeakedENIs(ctx context.Context, id string) ([]cloud.ENI, error) {
	start := time.Now()
	e, err := o.next.LeakedENIs(ctx, id)
	o.done("DescribeNetworkInterfaces", start, err)
	return e, err
}

func (o observedEC2) CreateENI(ctx context.Context, in cloud.CreateENIInput) (cloud.ENI, error) {
	start := time.Now()
	e, err := o.next.CreateENI(ctx, in)
	o.done("CreateNetworkInterface", start, err)
	return e, err
}

func (o observedEC2) AttachENI(ctx context.Context, instanceID, eniID string, idx int) (string, error) {
	start := time.Now()
	id, err := o.next.AttachENI(ctx, instanceID, eniID, idx)
	o.done("AttachNetworkInterface", start, err)
	return id, err
}

func (o observedEC2) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) error {
	start := time.Now()
	err := o.next.SetDeleteOnTermination(ctx, eniID, attachmentID)
	o.done("ModifyNetworkInterfaceAttribute", start, err)
	return err
}

func (o observedEC2) AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error) {
	start := time.Now()
	ips, err := o.next.AssignIPs(ctx, eniID, n)
	o.done("AssignPrivateIpAddresses", start, err)
	return ips, err
}

func (o observedEC2) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error {
	start := time.Now()
	err := o.next.UnassignIPs(ctx, eniID, ips)
	o.done("UnassignPrivateIpAddresses", start, err)
	return err
}

func (o observedEC2) DetachENI(ctx context.Context, attachmentID string) error {
	start := time.Now()
	err := o.next.DetachENI(ctx, attachmentID)
	o.done("DetachNetworkInterface", start, err)
	return err
}

func (o observedEC2) DeleteENI(ctx context.Context, eniID string) error {
	start := time.Now()
	err := o.next.DeleteENI(ctx, eniID)
	o.done("DeleteNetworkInterface", start, err)
	return err
}
