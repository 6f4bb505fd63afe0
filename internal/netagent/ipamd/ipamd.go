// Package ipamd is nodejoin's IPAM daemon, the VPC CNI's ipamd rebuilt: it reads the
// instance from IMDS, keeps a warm pool of secondary IPv4 addresses on the instance's
// ENIs through the EC2 API (pool.Decide says how), sets secondary ENIs up in the node's
// network namespace, hands addresses to the CNI plugin over ipamrpc, checkpoints every
// allocation, and writes the CNI configuration only once all of that is serving — the
// node's network becomes ready when, and only while, ipamd is.
//
// Its files share one Daemon's state (the instance, its limits, the datastore, the
// last errors); what needs none of it lives in subpackages: pool (the decision, pure),
// datastore (allocations and checkpoint), cloud (IMDS and EC2), hostnet (netlink).
// Files: ipamd.go (options, start-up and shutdown order), manager.go (the pool loop
// and the EC2 actions), server.go (ipamrpc.Backend), introspect.go (/healthz,
// /v1/state), metrics.go, ec2observe.go, conflist.go, env.go (the VPC CNI's environment
// knobs).
package ipamd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/netagent/cniplugin"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/datastore"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

// Defaults, as on EKS.
const (
	DefaultMetricsAddr       = ":61678"
	DefaultIntrospectionAddr = "127.0.0.1:61679"
	// SocketName and CheckpointName are the files ipamd keeps in its state directory.
	SocketName     = "ipamd.sock"
	CheckpointName = "ipam.json"
)

// HostNetwork configures secondary ENIs in the node's network namespace.
type HostNetwork interface {
	// SetupENI brings the ENI's interface up with its primary address and fills its
	// route table (ENI.RouteTable) with a default route via the subnet's gateway.
	SetupENI(ctx context.Context, e datastore.ENI) error
	// TeardownENI empties the ENI's route table before the ENI goes.
	TeardownENI(ctx context.Context, e datastore.ENI) error
}

// Options configure a Daemon.
type Options struct {
	Knobs Knobs
	// CNIConfDir receives 10-aws.conflist once ipamd is ready.
	CNIConfDir string
	// StateDir holds the gRPC socket and the checkpoint.
	StateDir string
	// LogDir is where the plugin logs unless Knobs.PluginLogFile says otherwise.
	LogDir string
	// MetricsAddr serves /metrics; IntrospectionAddr serves /healthz and /v1/state.
	// "" disables either.
	MetricsAddr, IntrospectionAddr string
	// PoolInterval is how often the pool is checked (2.5 s as the VPC CNI); ShrinkInterval
	// the least time between two shrinks (30 s); ReconcileInterval how often EC2's view
	// is compared with the datastore (60 s).
	PoolInterval, ShrinkInterval, ReconcileInterval time.Duration
	Metadata                                        cloud.Metadata
	EC2                                             cloud.EC2
	Host                                            HostNetwork
	Logger                                          *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Daemon is ipamd.
type Daemon struct {
	o     Options
	log   *slog.Logger
	ec2   cloud.EC2
	m     *metrics
	store *datastore.Store

	inst    cloud.InstanceMetadata
	limits  pool.Limits
	maxPods int

	ready       atomic.Bool
	initialized atomic.Bool
	kick        chan struct{}

	mu             sync.Mutex
	lastEC2Error   *EC2Error
	lastShrink     time.Time
	noDeleteOnTerm bool
	lastPoolError  string
}

// EC2Error is the last failed EC2 call, as /v1/state shows it: the API's code and
// message, which carry no credentials.
type EC2Error struct {
	Operation string    `json:"operation"`
	Code      string    `json:"code,omitempty"`
	Message   string    `json:"message"`
	Time      time.Time `json:"time"`
}

// New returns a daemon; Run starts it.
func New(o Options) (*Daemon, error) {
	if o.CNIConfDir == "" || o.StateDir == "" {
		return nil, errors.New("ipamd needs --cni-conf-dir and --state-dir")
	}
	if o.Metadata == nil || o.EC2 == nil || o.Host == nil {
		return nil, errors.New("ipamd needs instance metadata, EC2 and host network implementations")
	}
	if o.PoolInterval <= 0 {
		o.PoolInterval = 2500 * time.Millisecond
	}
	if o.ShrinkInterval <= 0 {
		o.ShrinkInterval = 30 * time.Second
	}
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Knobs.PluginLogFile == "" {
		dir := o.LogDir
		if dir == "" {
			dir = "/var/log/aws-routed-eni"
		}
		o.Knobs.PluginLogFile = filepath.Join(dir, "plugin.log")
	}
	d := &Daemon{o: o, log: o.Logger, m: newMetrics(), kick: make(chan struct{}, 1)}
	d.ec2 = observedEC2{next: o.EC2, observe: d.observeEC2}
	d.store = datastore.New(o.Knobs.Cooldown, datastore.File{Path: d.CheckpointPath()}, o.Now)
	return d, nil
}

// SocketPath is where the plugin reaches ipamd.
func (d *Daemon) SocketPath() string { return filepath.Join(d.o.StateDir, SocketName) }

// CheckpointPath is the allocations' checkpoint.
func (d *Daemon) CheckpointPath() string { return filepath.Join(d.o.StateDir, CheckpointName) }

// Ready reports whether ipamd has filled its pool, serves the plugin and wrote the conflist.
func (d *Daemon) Ready() bool { return d.ready.Load() }

func (d *Daemon) observeEC2(op string, took time.Duration, err error) {
	d.m.observeEC2(op, took, err)
	if err == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	msg := cloud.ErrorMessage(err)
	if len(msg) > 512 {
		msg = msg[:512]
	}
	d.lastEC2Error = &EC2Error{Operation: op, Code: cloud.ErrorCode(err), Message: msg, Time: d.o.Now().UTC()}
}

// Run starts ipamd and serves until ctx ends. The order matters and is the VPC CNI's:
// the conflist is removed before anything else; the pool is filled and the gRPC server
// is serving before the conflist is written; on shutdown the conflist goes first.
func (d *Daemon) Run(ctx context.Context) (err error) {
	if err := removeConflist(d.o.CNIConfDir); err != nil {
		return err
	}
	defer func() {
		if rerr := removeConflist(d.o.CNIConfDir); rerr != nil && err == nil {
			err = rerr
		}
	}()

	// Servers run until stop is cancelled, which happens after the conflist is gone.
	// Deferred calls run last first: servers are told to stop, then waited for.
	var wg sync.WaitGroup
	defer wg.Wait()
	srvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	errc := make(chan error, 4)
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(srvCtx); err != nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	for _, s := range []struct {
		name, addr string
		h          http.Handler
	}{
		{"metrics server", d.o.MetricsAddr, d.metricsHandler()},
		{"introspection server", d.o.IntrospectionAddr, d.introspectionHandler()},
	} {
		if s.addr == "" {
			continue
		}
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", s.addr)
		if err != nil {
			return fmt.Errorf("%s on %s: %w", s.name, s.addr, err)
		}
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		goRun(s.name, func(ctx context.Context) error { return httpserver.Serve(ctx, srv, l) })
	}

	if err := d.start(ctx); err != nil {
		return err
	}
	l, err := ipamrpc.Listen(d.SocketPath())
	if err != nil {
		return err
	}
	goRun("gRPC server", func(ctx context.Context) error { return ipamrpc.Serve(ctx, l, d) })
	if err := d.waitServing(ctx); err != nil {
		return err
	}
	if err := writeConflist(d.o.CNIConfDir, d.conflistOptions()); err != nil {
		return err
	}
	d.ready.Store(true)
	d.log.Info("ipamd ready", "conflist", filepath.Join(d.o.CNIConfDir, ConflistName), "socket", d.SocketPath())
	goRun("pool manager", d.manage)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	d.ready.Store(false)
	if rerr := removeConflist(d.o.CNIConfDir); rerr != nil && err == nil {
		err = rerr
	}
	d.log.Info("ipamd stopping", "reason", context.Cause(ctx))
	stop()
	return err
}

// ConflistOptions are what ipamd writes into 10-aws.conflist.
func (d *Daemon) conflistOptions() cniplugin.ConflistOptions {
	k := d.o.Knobs
	return cniplugin.ConflistOptions{IPAMDSocket: d.SocketPath(), PluginLogFile: k.PluginLogFile, PluginLogLevel: k.PluginLogLevel, MTU: k.MTU, VethPrefix: k.VethPrefix}
}

// waitServing waits until the gRPC health service answers SERVING on the socket, as
// the VPC CNI's entrypoint does before it copies the conflist.
func (d *Daemon) waitServing(ctx context.Context) error {
	c, err := ipamrpc.Dial(d.SocketPath())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	for {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Healthy(hctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ipamd's gRPC server: %w", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// start reads the instance, its limits and ENIs, restores the checkpoint and fills the
// pool; EC2 failures are retried with backoff (and shown on /v1/state) until ctx ends.
func (d *Daemon) start(ctx context.Context) error {
	inst, err := d.o.Metadata.Instance(ctx)
	if err != nil {
		return err
	}
	d.inst = inst
	d.log.Info("instance", "id", inst.ID, "type", inst.Type, "region", inst.Region, "subnet", inst.SubnetID, "subnetCIDR", inst.SubnetCIDR, "vpcCIDRs", inst.VPCCIDRs)

	if err := d.retry(ctx, "reading the instance type's limits", func() error {
		l, err := d.ec2.InstanceTypeLimits(ctx, inst.Type)
		if err != nil {
			info, ok := instancetypes.Lookup(inst.Type)
			if !ok {
				return err
			}
			d.log.Warn("DescribeInstanceTypes failed; using nodeadm's instance-type table", "type", inst.Type, "error", err)
			l = pool.Limits{ENIs: info.ENIs, IPv4PerENI: info.IPsPerENI}
		}
		d.limits = l
		return nil
	}); err != nil {
		return err
	}
	d.maxPods = d.limits.MaxPods()
	d.m.eniMax.Set(float64(pool.MaxENIs(d.o.Knobs.Pool, d.limits)))
	d.m.ipMax.Set(float64(pool.MaxENIs(d.o.Knobs.Pool, d.limits) * d.limits.SecondaryPerENI()))
	d.log.Info("instance limits", "enis", d.limits.ENIs, "ipv4PerENI", d.limits.IPv4PerENI, "maxPods", d.maxPods)

	if err := d.retry(ctx, "reading the instance's ENIs from EC2", func() error { return d.reconcile(ctx) }); err != nil {
		return err
	}
	if !d.o.Knobs.DisableLeakedENICleanup {
		d.cleanupLeakedENIs(ctx)
	}
	data, ok, err := datastore.File{Path: d.CheckpointPath()}.Load()
	if err != nil {
		return err
	}
	if ok {
		rep, err := d.store.Restore(data)
		if err != nil {
			return err
		}
		for _, dr := range rep.Dropped {
			d.log.Warn("checkpointed allocation dropped", "containerID", dr.Key.ContainerID, "ifName", dr.Key.IfName, "ip", dr.IP, "reason", dr.Reason)
		}
		d.log.Info("checkpoint restored", "allocations", len(rep.Restored), "dropped", len(rep.Dropped))
	}
	if err := d.retry(ctx, "filling the warm pool", func() error { return d.settle(ctx) }); err != nil {
		return err
	}
	d.mu.Lock()
	d.lastPoolError = "" // start-up succeeded: its retries are history
	d.mu.Unlock()
	d.initialized.Store(true)
	d.publish()
	return nil
}

// retry runs f until it succeeds, backing off from 1 s to 30 s, until ctx ends; each
// failure is logged and shown on /v1/state.
func (d *Daemon) retry(ctx context.Context, what string, f func() error) error {
	wait := time.Second
	for {
		err := f()
		if err == nil {
			return nil
		}
		d.log.Error("ipamd start-up step failed; retrying", "step", what, "error", err, "retryIn", wait)
		d.mu.Lock()
		d.lastPoolError = what + ": " + err.Error()
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (gave up: %w)", what, err, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
