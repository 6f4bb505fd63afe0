package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/kubeletsim"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// counters are the cumulative figures read before, during and after a burst.
type counters struct {
	api           counter
	calls         map[string]float64 // per node, by call
	sts, ec2, iam int
}

// apiRequests reads apiserver_request_total, summed over its labels.
func (r *run) apiRequests(ctx context.Context) (float64, error) {
	calls, err := r.apiRequestsByCall(ctx)
	return total(calls), err
}

// apiRequestsByCall reads apiserver_request_total, summed by verb and resource.
func (r *run) apiRequestsByCall(ctx context.Context) (map[string]float64, error) {
	raw, err := r.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	s, err := parseMetrics(strings.NewReader(string(raw)), "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	return byCall(s), nil
}

// join runs the burst: N kubelets at once, until every node is Ready with every
// certificate issued.
//
//nolint:gocyclo // the burst's steps in order, read top to bottom.
func (r *run) join(ctx context.Context) (*burstResult, error) {
	n := r.opts.Nodes
	token, err := r.nodeAccess(ctx)
	if err != nil {
		return nil, err
	}
	r.instances = make([]localaws.Instance, n)
	for i := range n {
		if r.instances[i], err = r.launch(i); err != nil {
			return nil, err
		}
	}
	if r.approver == BaselineFloor {
		if err := r.switchToFloor(); err != nil {
			return nil, err
		}
		defer r.floor.Stop(5 * time.Second)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := r.rec.start(watchCtx, r.client); err != nil {
		return nil, err
	}
	var c counters
	callsBefore, err := r.apiRequestsByCall(ctx)
	if err != nil {
		return nil, err
	}
	c.api.observe(total(callsBefore))
	sts0, ec20, iam0 := r.cloud.STS.Calls(), r.cloud.EC2.Calls(), r.cloud.IAM.Calls()
	m0 := r.controllerMetrics(ctx)
	for _, rep := range r.replicas {
		rep.cpuAtBurst = rep.sample().cpuSeconds
	}
	load, _ := os.ReadFile("/proc/loadavg")
	procs := r.processes()
	cpu0 := cpuByPID(procs)
	rss0 := selfRSSMiB()

	r.progress("starting %d simulated kubelets at once", n)
	simCtx, stopSims := context.WithCancel(context.WithoutCancel(ctx))
	kubelets := make([]*kubeletsim.Kubelet, n)
	stopProfiles := r.burstProfiles(ctx)
	defer stopProfiles()
	start := time.Now()
	for i, inst := range r.instances {
		k, err := kubeletsim.Start(simCtx, r.kubeletConfig(inst, token))
		if err != nil {
			stopSims()
			return nil, err
		}
		kubelets[i] = k
	}
	defer func() {
		stopSims()
		for _, k := range kubelets {
			_ = k.Wait()
		}
	}()

	var faultAt time.Duration
	var faultOnce sync.Once
	var faultErr error
	deadline := start.Add(r.opts.Timeout)
	for {
		done, failed := 0, ""
		for _, k := range kubelets {
			st := k.Status()
			if st.Ready && st.ServingCertificate.Issued > 0 && (token == "" || st.ClientCertificate.Issued > 0) {
				done++
			}
			if st.Phase == kubeletsim.PhaseFailed && failed == "" {
				failed = st.Node + ": " + st.LastError
			}
		}
		if failed != "" {
			return nil, fmt.Errorf("node %s", failed)
		}
		if done == n {
			break
		}
		if r.fault != "" && done >= n/2 {
			faultOnce.Do(func() {
				faultAt = time.Since(start)
				r.progress("%d of %d nodes joined: injecting %s", done, n, r.fault)
				faultErr = r.inject(ctx, &c)
			})
			if faultErr != nil {
				return nil, faultErr
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d nodes joined after %s", done, n, r.opts.Timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.progress("all %d nodes joined after %.1fs", n, time.Since(start).Seconds())
	// Read while every kubelet still runs and before the settling second.
	kubeletsMiB := selfRSSMiB() - rss0
	cpuByProc := cpuSeconds(cpu0, mergeProcs(procs, r.processes()))
	stopProfiles()
	// Whatever is still on its way (a late duplicate CSR) has a moment to settle.
	time.Sleep(time.Second)

	callsAfter, err := r.apiRequestsByCall(ctx)
	if err != nil {
		return nil, err
	}
	c.api.observe(total(callsAfter))
	if !c.api.restarted {
		c.calls = callsPerNode(callsBefore, callsAfter, n)
	}
	m1 := r.controllerMetrics(ctx)
	c.sts, c.ec2, c.iam = r.cloud.STS.Calls()-sts0, r.cloud.EC2.Calls()-ec20, r.cloud.IAM.Calls()-iam0
	var cpu, peak float64
	for _, rep := range r.replicas {
		st := rep.final
		if !rep.killed {
			st = rep.sample()
		}
		cpu += st.cpuSeconds - rep.cpuAtBurst
		peak = max(peak, st.peakMiB)
	}
	if r.floor != nil {
		// The floor approver stands in for the controller in the controller's rows.
		cpu = cpuByProc[procFloor]
		if st, err := readProc(r.floor.PID()); err == nil {
			peak = st.peakMiB
		}
	}
	if r.opts.ProfileDir != "" {
		r.heapProfiles(ctx)
	}
	csrs, ready := r.rec.snapshot()
	rep := r.report(start, kubelets, csrs, ready, &c, m0, m1)
	rep.ControllerCPUSeconds = round(cpu, 2)
	rep.ControllerPeakRSSMiB = round(peak, 1)
	rep.Load = loadAvg(load)
	rep.CPUSeconds = cpuByProc
	rep.KubeletsMiBPerNode = round(kubeletsMiB/float64(n), 3)
	return &burstResult{Report: rep, faultAt: seconds(faultAt)}, nil
}

// switchToFloor stops nodejoin-controller, which has set the cluster up (its RBAC and
// CRDs, which the nodes' access needs), and starts the floor approver in its place:
// nothing of nodejoin runs during the floor's burst.
func (r *run) switchToFloor() error {
	for _, rep := range r.replicas {
		rep.proc.Stop(10 * time.Second)
	}
	r.replicas = nil
	r.progress("nodejoin-controller stopped; starting the floor approver")
	p, err := r.startFloor()
	if err != nil {
		return err
	}
	r.floor = p
	// It approves what it finds when its cache has synced, so a CSR created before that
	// waits only until then; a moment lets it start before the clock does.
	select {
	case <-p.Done():
		return fmt.Errorf("the floor approver exited while starting: %w (log: %s)\n%s", p.Err(), p.LogFile(), p.LogTail(20))
	case <-time.After(2 * time.Second):
	}
	return nil
}

// mergeProcs adds the processes of b to a (a process started during the burst).
func mergeProcs(a, b procSet) procSet {
	out := procSet{}
	for name, pids := range a {
		out[name] = append(out[name], pids...)
	}
	for name, pids := range b {
		for _, pid := range pids {
			if !slices.Contains(out[name], pid) {
				out[name] = append(out[name], pid)
			}
		}
	}
	return out
}

// inject injects the run's fault.
func (r *run) inject(ctx context.Context, c *counters) error {
	switch r.fault {
	case FaultAPIServerRestart:
		// The request counter starts again at zero: count what it had reached.
		if v, err := r.apiRequests(ctx); err == nil {
			c.api.observe(v)
		}
		if err := r.cluster.RestartAPIServer(ctx); err != nil {
			return fmt.Errorf("restarting kube-apiserver: %w", err)
		}
		return nil
	case FaultLeaderKill:
		lease, err := r.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "nodejoin-controller", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the leader's Lease: %w", err)
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, rep := range r.replicas {
			if rep.id == holder {
				rep.sample()
				rep.killed = true
				rep.proc.Kill()
				r.progress("killed the leader, replica %s", rep.id)
				return nil
			}
		}
		return fmt.Errorf("the Lease's holder %q is none of the replicas", holder)
	}
	return nil
}
