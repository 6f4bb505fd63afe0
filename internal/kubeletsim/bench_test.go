package kubeletsim

import (
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
)

var benchNodes = flag.Int("kubeletsim.nodes", 50, "how many simulated nodes BenchmarkJoin joins at once")

// BenchmarkJoin starts -kubeletsim.nodes nodes at once, all with one node group's
// bootstrap token, against a real kube-apiserver and nodejoin's approver and signer in
// this process, and measures until every node is Ready with its serving certificate
// issued. Each iteration joins fresh nodes; run it with -benchtime=1x for one round.
//
// Metrics: s/all-joined (start to the last node joined), s/all-ready (to the last node
// Ready, before its serving certificate), s/median-joined (a node's own join time).
func BenchmarkJoin(b *testing.B) {
	cp := startControlPlane(b)
	token, err := bootstraptoken.Mint(b.Context(), cp.env.Client, "workers", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	n := *benchNodes
	var allJoined, allReady, median time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		insts := make([]instance, n)
		for j := range insts {
			insts[j] = simNode(i*n + j)
		}
		writeInventory(b, cp.inventory, insts...)
		s := newSims(b)
		b.StartTimer()

		start := time.Now()
		ks := make([]*Kubelet, n)
		for j, in := range insts {
			ks[j] = s.start(cp, in, func(c *Config) { c.BootstrapToken = token })
		}
		joinedAt := make([]time.Duration, n)
		var readyAt time.Duration
		for remaining := n; remaining > 0; {
			time.Sleep(20 * time.Millisecond)
			ready := 0
			for j, k := range ks {
				st := k.Status()
				if st.Ready {
					ready++
				}
				if joinedAt[j] == 0 && joined(k) {
					joinedAt[j] = time.Since(start)
					remaining--
				}
				if st.Phase == PhaseFailed {
					b.Fatalf("node %s failed: %s", k.Name(), st.LastError)
				}
			}
			if readyAt == 0 && ready == n {
				readyAt = time.Since(start)
			}
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%d of %d nodes not joined after 10 minutes", remaining, n)
			}
		}
		if readyAt == 0 {
			readyAt = time.Since(start)
		}
		b.StopTimer()
		slices.Sort(joinedAt)
		allJoined += joinedAt[n-1]
		allReady += readyAt
		median += joinedAt[n/2]
		s.stop()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(allJoined.Seconds()/float64(b.N), "s/all-joined")
	b.ReportMetric(allReady.Seconds()/float64(b.N), "s/all-ready")
	b.ReportMetric(median.Seconds()/float64(b.N), "s/median-joined")
	b.ReportMetric(float64(n), "nodes")
}
