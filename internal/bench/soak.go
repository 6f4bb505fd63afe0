package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/kubeletsim"
)

// Soak defaults.
const (
	// DefaultSoakCertificateLifetime is the shortest lifetime the signer issues
	// (Kubernetes' minimum expirationSeconds): the staying nodes rotate after 7 to 9
	// minutes, so a soak shows rotations from about 10 minutes on.
	DefaultSoakCertificateLifetime = 10 * time.Minute
	soakInterval                   = 10 * time.Second
	// soakChurn is the share of the churning nodes replaced every interval: the first
	// half of the nodes stay for the whole soak (and rotate their certificates), the
	// other half come and go.
	soakChurn = 10
)

// SoakSample is the soak's state at one time.
type SoakSample struct {
	Seconds float64 `json:"seconds"`
	RSSMiB  float64 `json:"rss_mib"`
	Pending int     `json:"pending"`
	CSRs    int     `json:"csrs"`
	Nodes   int     `json:"nodes"`
}

// SoakReport is a soak's figures: nodes joining and leaving while certificates rotate,
// the controller's memory and the pending CSRs sampled over time.
type SoakReport struct {
	DurationSeconds     float64 `json:"duration_seconds"`
	CertificateLifetime string  `json:"certificate_lifetime"`
	NodesJoined         int     `json:"nodes_joined"`
	NodesLeft           int     `json:"nodes_left"`
	// Rotations counts certificates issued to a node after its first of each kind.
	Rotations int `json:"rotations"`
	// RSSFirstMiB and RSSLastMiB are the median resident memory of the soak's first
	// and last quarter; RSSGrowthMiB the difference.
	RSSFirstMiB  float64      `json:"rss_first_quarter_mib"`
	RSSLastMiB   float64      `json:"rss_last_quarter_mib"`
	RSSGrowthMiB float64      `json:"rss_growth_mib"`
	MaxPending   int          `json:"max_pending"`
	Samples      []SoakSample `json:"samples"`
}

// soak keeps o.Nodes nodes running for o.Duration: half of them stay (and rotate their
// short-lived certificates), a tenth of the other half is replaced every ten seconds.
//
//nolint:gocyclo // the soak's setup, loop and report in order, read top to bottom.
func soak(ctx context.Context, o Options) (*Report, error) {
	if o.CertificateLifetime == 0 {
		o.CertificateLifetime = DefaultSoakCertificateLifetime
	}
	r := &run{opts: o, label: "soak", dir: filepath.Join(o.StateDir, "soak"), rec: newRecorder()}
	cleanup, err := r.setUp(ctx, false)
	defer cleanup()
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	token, err := r.nodeAccess(ctx)
	if err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := r.rec.start(watchCtx, r.client); err != nil {
		return nil, err
	}
	rep := r.replicas[0]
	rep.cpuAtBurst = rep.sample().cpuSeconds

	type node struct {
		k    *kubeletsim.Kubelet
		stop context.CancelFunc
		id   string // its instance
	}
	var running, gone []*node
	next := 0
	startNode := func() error {
		inst, err := r.launch(next)
		if err != nil {
			return err
		}
		nctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		k, err := kubeletsim.Start(nctx, r.kubeletConfig(inst, token))
		if err != nil {
			stop()
			return err
		}
		running = append(running, &node{k: k, stop: stop, id: inst.ID})
		next++
		return nil
	}
	defer func() {
		for _, n := range append(running, gone...) {
			n.stop()
			_ = n.k.Wait()
		}
	}()
	// leave stops a node, deletes its Node and terminates its instance, as a
	// scale-in does.
	leave := func(n *node) error {
		n.stop()
		_ = n.k.Wait()
		if err := r.client.CoreV1().Nodes().Delete(ctx, n.k.Name(), metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting node %s: %w", n.k.Name(), err)
		}
		return r.cloud.EC2.SetState(n.id, "terminated")
	}
	r.progress("%d nodes for %s, certificates of %s; half stay, a tenth of the rest replaced every %s", o.Nodes, o.Duration, o.CertificateLifetime, soakInterval)
	start := time.Now()
	for range o.Nodes {
		if err := startNode(); err != nil {
			return nil, err
		}
	}
	out := &SoakReport{CertificateLifetime: o.CertificateLifetime.String()}
	for time.Since(start) < o.Duration {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(soakInterval):
		}
		for _, n := range running {
			if st := n.k.Status(); st.Phase == kubeletsim.PhaseFailed {
				return nil, fmt.Errorf("node %s failed: %s", st.Node, st.LastError)
			}
		}
		stay := o.Nodes / 2
		churn := max(1, (len(running)-stay)/soakChurn)
		churn = min(churn, len(running)-stay)
		for _, n := range running[stay : stay+churn] {
			if err := leave(n); err != nil {
				return nil, err
			}
			out.NodesLeft++
			gone = append(gone, n)
		}
		running = append(slices.Clone(running[:stay]), running[stay+churn:]...)
		for range churn {
			if err := startNode(); err != nil {
				return nil, err
			}
		}
		csrs, _ := r.rec.snapshot()
		st := rep.sample()
		s := SoakSample{Seconds: seconds(time.Since(start)), RSSMiB: round(st.rssMiB, 1), Pending: pendingCSRs(csrs), CSRs: len(csrs), Nodes: len(running)}
		out.Samples = append(out.Samples, s)
		out.MaxPending = max(out.MaxPending, s.Pending)
		r.progress("%.0fs: %d nodes, %d CSRs, %d pending, controller %.1f MiB", s.Seconds, s.Nodes, s.CSRs, s.Pending, s.RSSMiB)
	}
	out.DurationSeconds = seconds(time.Since(start))
	out.NodesJoined = next
	// The nodes still running settle their last CSRs.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		csrs, _ := r.rec.snapshot()
		if pendingCSRs(csrs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for _, n := range append(slices.Clone(running), gone...) {
		st := n.k.Status()
		out.Rotations += max(0, st.ServingCertificate.Issued-1) + max(0, st.ClientCertificate.Issued-1)
	}
	q := max(1, len(out.Samples)/4)
	out.RSSFirstMiB = medianRSS(out.Samples[:min(q, len(out.Samples))])
	out.RSSLastMiB = medianRSS(out.Samples[max(0, len(out.Samples)-q):])
	out.RSSGrowthMiB = round(out.RSSLastMiB-out.RSSFirstMiB, 1)

	csrs, _ := r.rec.snapshot()
	final := rep.sample()
	load, _ := os.ReadFile("/proc/loadavg")
	res := &Report{Nodes: o.Nodes, Identity: o.Identity, Approver: "nodejoin", CSRs: len(csrs), Soak: out,
		ControllerCPUSeconds: round(final.cpuSeconds-rep.cpuAtBurst, 2), ControllerPeakRSSMiB: round(final.peakMiB, 1),
		Load: loadAvg(load)}
	for _, s := range csrs {
		switch {
		case s.denied:
			res.Denied++
		case s.failed:
		case s.issued.IsZero():
			res.LeftPending++
		}
		if len(s.certs) > 1 {
			res.IssuedTwice++
		}
	}
	return res, nil
}

func medianRSS(s []SoakSample) float64 {
	if len(s) == 0 {
		return 0
	}
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = x.RSSMiB
	}
	slices.Sort(v)
	return v[len(v)/2]
}
