package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// TagNoManage on an ENI keeps ipamd's hands off it, as with the VPC CNI.
const TagNoManage = "node.k8s.amazonaws.com/no_manage"

// manage runs the pool loop until ctx ends: every PoolInterval, or at once when a
// request found the pool empty or an address was released, it settles the pool; every
// ReconcileInterval it first compares the datastore with EC2.
func (d *Daemon) manage(ctx context.Context) error {
	tick := time.NewTicker(d.o.PoolInterval)
	defer tick.Stop()
	lastReconcile := d.o.Now()
	// After a failed action the loop backs off (1 s doubling to 30 s; 120 s when the
	// subnet is out of addresses, as the VPC CNI does), so that pods retrying their
	// ADDs cannot turn into a stream of failing EC2 calls.
	var backoff time.Duration
	var quietUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-d.kick:
		}
		if time.Now().Before(quietUntil) {
			continue
		}
		if d.o.Now().Sub(lastReconcile) >= d.o.ReconcileInterval {
			lastReconcile = d.o.Now()
			if err := d.reconcile(ctx); err != nil {
				d.poolError("reconcile", err)
			}
		}
		err := d.settle(ctx)
		switch {
		case ctx.Err() != nil:
			return nil // stopping: an action cut short has not failed
		case err == nil:
			backoff = 0
		default:
			d.poolError("settle", err)
			backoff = min(max(2*backoff, time.Second), 30*time.Second)
			if cloud.ErrorCode(err) == cloud.CodeInsufficientSubnet {
				backoff = 120 * time.Second
			}
			quietUntil = time.Now().Add(backoff)
		}
		d.publish()
	}
}

// wake asks the pool loop to run now.
func (d *Daemon) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *Daemon) poolError(fn string, err error) {
	d.m.ipamdErrors.WithLabelValues(fn).Inc()
	d.log.Error("pool management step failed", "step", fn, "error", err)
	d.mu.Lock()
	d.lastPoolError = err.Error()
	d.mu.Unlock()
}

// publish updates the pool gauges.
func (d *Daemon) publish() { d.m.setPool(d.store.PoolState()) }

// poolState is the datastore's pool with the daemon's max pods and shrink gate.
func (d *Daemon) poolState() pool.State {
	s := d.store.PoolState()
	s.MaxPods = d.maxPods
	d.mu.Lock()
	s.ShrinkAllowed = d.lastShrink.IsZero() || d.o.Now().Sub(d.lastShrink) >= d.o.ShrinkInterval
	d.mu.Unlock()
	return s
}

// settle applies pool.Decide's actions until it returns None (at most 50, so that a
// cloud that keeps accepting and losing addresses cannot spin the loop).
func (d *Daemon) settle(ctx context.Context) error {
	for range 50 {
		a := pool.Decide(d.o.Knobs.Pool, d.limits, d.poolState())
		if a.Kind == pool.None {
			return nil
		}
		d.log.Debug("pool action", "action", a.String())
		if err := d.apply(ctx, a); err != nil {
			return fmt.Errorf("pool action %s: %w", a, err)
		}
		d.publish()
	}
	return nil
}

func (d *Daemon) apply(ctx context.Context, a pool.Action) error {
	switch a.Kind {
	case pool.AssignIPs:
		return d.assignIPs(ctx, a.ENIID, a.Count)
	case pool.AllocENI:
		return d.allocENI(ctx, a.Count)
	case pool.UnassignIPs:
		d.shrunk()
		return d.unassignIPs(ctx, a.ENIID, a.Count)
	case pool.FreeENI:
		d.shrunk()
		return d.freeENI(ctx, a.ENIID)
	}
	return nil
}

func (d *Daemon) shrunk() {
	d.mu.Lock()
	d.lastShrink = d.o.Now()
	d.mu.Unlock()
}

// assignIPs asks EC2 for n more addresses on an ENI. When EC2 says the ENI is full,
// the datastore learns what the ENI really holds.
func (d *Daemon) assignIPs(ctx context.Context, eniID string, n int) error {
	ips, err := d.ec2.AssignIPs(ctx, eniID, n)
	if cloud.ErrorCode(err) == cloud.CodeIPLimitExceeded {
		e, derr := d.ec2.DescribeENI(ctx, eniID)
		if derr != nil {
			return errors.Join(err, derr)
		}
		return errors.Join(err, d.store.AddIPs(eniID, e.Secondary))
	}
	if err != nil {
		return err
	}
	if err := d.store.AddIPs(eniID, ips); err != nil {
		return err
	}
	d.log.Info("addresses assigned", "eni", eniID, "ips", ips)
	return nil
}

// allocENI creates an ENI in the primary ENI's subnet with its security groups,
// attaches it at the lowest free device index, sets it up in the node and adds it with
// n addresses to the pool. Whatever fails after the create is undone.
func (d *Daemon) allocENI(ctx context.Context, n int) error {
	tags := map[string]string{
		cloud.TagInstanceID: d.inst.ID,
		cloud.TagCreatedAt:  d.o.Now().UTC().Format(time.RFC3339),
	}
	if c := d.o.Knobs.ClusterName; c != "" {
		tags[cloud.TagCluster] = c
		tags[cloud.TagOwner] = "amazon-vpc-cni"
	}
	e, err := d.ec2.CreateENI(ctx, cloud.CreateENIInput{
		SubnetID: d.inst.SubnetID, SecurityGroupIDs: d.inst.SecurityGroupIDs,
		Description: cloud.DescriptionPrefix + d.inst.ID, Tags: tags, SecondaryIPs: n,
	})
	if err != nil {
		return err
	}
	// Undo runs to its end even when ipamd is stopping, so that no ENI is left behind.
	undo := func(attachmentID string, cause error) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if attachmentID != "" {
			if err := d.ec2.DetachENI(ctx, attachmentID); err != nil {
				return errors.Join(cause, err)
			}
			if err := d.waitDetached(ctx, e.ID); err != nil {
				return errors.Join(cause, err)
			}
		}
		if err := d.ec2.DeleteENI(ctx, e.ID); err != nil && cloud.ErrorCode(err) != cloud.CodeENINotFound {
			return errors.Join(cause, err)
		}
		return cause
	}
	attached, err := d.ec2.InstanceENIs(ctx, d.inst.ID)
	if err != nil {
		return undo("", err)
	}
	used := map[int]bool{}
	for _, a := range attached {
		used[a.DeviceNumber] = true
	}
	idx := 1
	for used[idx] {
		idx++
	}
	attachmentID, err := d.ec2.AttachENI(ctx, d.inst.ID, e.ID, idx)
	if err != nil {
		return undo("", err)
	}
	d.mu.Lock()
	skipDOT := d.noDeleteOnTerm
	d.mu.Unlock()
	if !skipDOT {
		if err := d.ec2.SetDeleteOnTermination(ctx, e.ID, attachmentID); err != nil {
			switch cloud.ErrorCode(err) {
			case cloud.CodeUnsupportedOperation, cloud.CodeInvalidAction, "NotImplemented":
				d.mu.Lock()
				d.noDeleteOnTerm = true
				d.mu.Unlock()
				d.log.Warn("this EC2 does not support ModifyNetworkInterfaceAttribute; ENIs ipamd attaches are not deleted with the instance, only by ipamd and its leaked-ENI cleanup", "error", err)
			default:
				return undo(attachmentID, err)
			}
		}
	}
	de := datastore.ENI{
		ID: e.ID, MAC: e.MAC, DeviceNumber: idx, PrimaryIP: e.PrimaryIP,
		SubnetCIDR: d.inst.SubnetCIDR, AttachmentID: attachmentID,
	}
	if err := d.o.Host.SetupENI(ctx, de); err != nil {
		_ = d.o.Host.TeardownENI(context.WithoutCancel(ctx), de)
		return undo(attachmentID, fmt.Errorf("setting up ENI %s (%s) in the node: %w", e.ID, e.MAC, err))
	}
	ips := e.Secondary
	if len(ips) < n {
		more, err := d.ec2.AssignIPs(ctx, e.ID, n-len(ips))
		if err != nil {
			_ = d.o.Host.TeardownENI(ctx, de)
			return undo(attachmentID, err)
		}
		ips = append(ips, more...)
	}
	d.store.AddENI(de)
	if err := d.store.AddIPs(e.ID, ips); err != nil {
		return err
	}
	d.log.Info("ENI attached", "eni", e.ID, "mac", e.MAC, "deviceNumber", idx, "primaryIP", e.PrimaryIP, "ips", ips)
	return nil
}

// waitDetached waits until EC2 reports the ENI detached (status available), up to 30 s.
func (d *Daemon) waitDetached(ctx context.Context, eniID string) error {
	deadline := time.Now().Add(30 * time.Second)
	wait := 200 * time.Millisecond
	for {
		e, err := d.ec2.DescribeENI(ctx, eniID)
		if cloud.ErrorCode(err) == cloud.CodeENINotFound {
			return nil
		}
		if err == nil && e.AttachmentID == "" && (e.Status == "" || e.Status == "available") {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("ENI %s still %s", eniID, e.Status)
			}
			return fmt.Errorf("waiting for ENI %s to detach: %w", eniID, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// unassignIPs gives up to n free addresses of an ENI back to EC2.
func (d *Daemon) unassignIPs(ctx context.Context, eniID string, n int) error {
	ips := d.store.ReserveForRelease(eniID, n)
	if len(ips) == 0 {
		return nil
	}
	if err := d.ec2.UnassignIPs(ctx, eniID, ips); err != nil {
		d.store.Unreserve(ips)
		return err
	}
	d.log.Info("addresses unassigned", "eni", eniID, "ips", ips)
	return d.store.Forget(eniID, ips)
}

// freeENI detaches and deletes an ENI no pod uses.
func (d *Daemon) freeENI(ctx context.Context, eniID string) error {
	if !d.store.ReserveENIForRelease(eniID) {
		return nil
	}
	de, _ := d.store.ENI(eniID)
	err := func() error {
		e, err := d.ec2.DescribeENI(ctx, eniID)
		if cloud.ErrorCode(err) == cloud.CodeENINotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if err := d.o.Host.TeardownENI(ctx, de); err != nil {
			return fmt.Errorf("tearing down ENI %s in the node: %w", eniID, err)
		}
		if e.AttachmentID != "" {
			if err := d.ec2.DetachENI(ctx, e.AttachmentID); err != nil && cloud.ErrorCode(err) != cloud.CodeAttachmentNotFound {
				return err
			}
			if err := d.waitDetached(ctx, eniID); err != nil {
				return err
			}
		}
		if err := d.ec2.DeleteENI(ctx, eniID); err != nil && cloud.ErrorCode(err) != cloud.CodeENINotFound {
			return err
		}
		return nil
	}()
	if err != nil {
		d.store.UnreserveENI(eniID)
		return err
	}
	d.log.Info("ENI freed", "eni", eniID, "deviceNumber", de.DeviceNumber)
	return d.store.RemoveENI(eniID)
}

// reconcile makes the datastore match EC2's view of the instance's ENIs: ENIs attached
// and not known are set up and added, addresses EC2 added are added and addresses it
// no longer lists are forgotten (never from under a pod: that is reported), ENIs gone
// from EC2 are removed.
func (d *Daemon) reconcile(ctx context.Context) error {
	d.m.reconciles.Inc()
	enis, err := d.ec2.InstanceENIs(ctx, d.inst.ID)
	if err != nil {
		return err
	}
	subnets := map[string]netip.Prefix{}
	if md, err := d.o.Metadata.ENIs(ctx); err == nil {
		for _, m := range md {
			if m.SubnetCIDR.IsValid() {
				subnets[m.MAC] = m.SubnetCIDR
			}
		}
	} else {
		d.log.Warn("reading ENIs from instance metadata failed; using the primary ENI's subnet for all", "error", err)
	}
	var errs []error
	seen := map[string]bool{}
	for _, e := range enis {
		if e.Tags[TagNoManage] == "true" {
			continue
		}
		if err := d.reconcileENI(ctx, e, subnets); err != nil {
			errs = append(errs, err)
			if _, known := d.store.ENI(e.ID); !known {
				continue
			}
		}
		seen[e.ID] = true
	}
	for _, e := range d.store.ENIs() {
		if seen[e.ID] {
			continue
		}
		d.log.Warn("ENI no longer attached in EC2", "eni", e.ID, "deviceNumber", e.DeviceNumber)
		if err := d.store.RemoveENI(e.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		if !e.Primary {
			if err := d.o.Host.TeardownENI(ctx, e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// reconcileENI brings one attached ENI of EC2's view into the datastore.
func (d *Daemon) reconcileENI(ctx context.Context, e cloud.ENI, subnets map[string]netip.Prefix) error {
	primary := e.ID == d.inst.PrimaryENIID || e.DeviceNumber == 0
	subnet, ok := subnets[e.MAC]
	if !ok {
		subnet = d.inst.SubnetCIDR
	}
	de := datastore.ENI{ID: e.ID, MAC: e.MAC, DeviceNumber: e.DeviceNumber, Primary: primary, PrimaryIP: e.PrimaryIP, SubnetCIDR: subnet, AttachmentID: e.AttachmentID}
	if _, known := d.store.ENI(e.ID); !known && !primary {
		if err := d.o.Host.SetupENI(ctx, de); err != nil {
			return fmt.Errorf("setting up ENI %s (%s) in the node: %w", e.ID, e.MAC, err)
		}
		d.log.Info("ENI found attached", "eni", e.ID, "deviceNumber", e.DeviceNumber, "ips", e.Secondary)
	}
	d.store.AddENI(de)
	var errs []error
	if err := d.store.AddIPs(e.ID, e.Secondary); err != nil {
		errs = append(errs, err)
	}
	var gone []netip.Addr
	for _, ip := range d.store.IPs(e.ID) {
		if !slices.Contains(e.Secondary, ip) {
			gone = append(gone, ip)
		}
	}
	if len(gone) > 0 {
		d.log.Warn("addresses no longer on the ENI in EC2", "eni", e.ID, "ips", gone)
		if err := d.store.Forget(e.ID, gone); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanupLeakedENIs deletes ENIs ipamd created for this instance that are attached
// nowhere (left by a crash between create and attach, or by a detach without delete).
func (d *Daemon) cleanupLeakedENIs(ctx context.Context) {
	enis, err := d.ec2.LeakedENIs(ctx, d.inst.ID)
	if err != nil {
		d.log.Warn("listing leaked ENIs failed; skipping the cleanup", "error", err)
		return
	}
	for _, e := range enis {
		if e.AttachmentID != "" || len(e.Description) < len(cloud.DescriptionPrefix) || e.Description[:len(cloud.DescriptionPrefix)] != cloud.DescriptionPrefix {
			continue
		}
		if err := d.ec2.DeleteENI(ctx, e.ID); err != nil && cloud.ErrorCode(err) != cloud.CodeENINotFound {
			d.log.Warn("deleting a leaked ENI failed", "eni", e.ID, "error", err)
			continue
		}
		d.log.Info("leaked ENI deleted", "eni", e.ID)
	}
}
