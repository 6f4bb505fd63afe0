package launcher

import (
	"fmt"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// joinProgress reports the join's steps: an event per node and step for a few nodes, a
// count every few seconds for many.
type joinProgress struct {
	rep     *progress.Reporter
	perNode bool
	steps   []joinstatus.Step
	total   int

	mu      sync.Mutex
	counts  map[joinstatus.Step]int
	last    time.Time
	changed bool
}

func newJoinProgress(rep *progress.Reporter, total int, bootstrap bool) *joinProgress {
	return &joinProgress{rep: rep, perNode: total <= 10, steps: joinstatus.Steps(bootstrap), total: total, counts: map[joinstatus.Step]int{}}
}

func (p *joinProgress) step(l *launched, step joinstatus.Step, at time.Time, detail string) {
	inst := l.state().inst
	l.mu.Lock()
	start := l.start
	l.mu.Unlock()
	p.mu.Lock()
	p.counts[step]++
	p.changed = true
	p.mu.Unlock()
	if !p.perNode {
		return
	}
	switch step {
	case joinstatus.StepInstance:
		detail = fmt.Sprintf("%s  %s  %s kubelet", inst.ID, inst.IP, inst.Kubelet)
	case stepImages:
		l.mu.Lock()
		detail = fmt.Sprintf("%d image archive(s) in containerd", l.images)
		l.mu.Unlock()
	case joinstatus.StepNodeadm:
		if inst.Kubelet == instance.KubeletSim {
			detail = "simulated kubelet started"
		} else {
			detail = "files written, containerd and kubelet running"
		}
	}
	p.rep.Report(progress.Event{Kind: progress.NodeStep, Node: inst.NodeName, Step: string(step), Elapsed: at.Sub(start), Detail: detail})
}

func (p *joinProgress) failed(l *launched) {
	st := l.state()
	name := "instance"
	if st.inst != nil {
		name = st.inst.NodeName
	}
	p.rep.Report(progress.Event{Kind: progress.NodeFailed, Node: name, Step: string(st.step), Detail: st.err.Error()})
}

// flush reports the counts when they changed (every 2 seconds at most, unless final).
func (p *joinProgress) flush(final bool) {
	p.mu.Lock()
	if p.perNode || !p.changed || (!final && time.Since(p.last) < 2*time.Second) {
		p.mu.Unlock()
		return
	}
	p.changed, p.last = false, time.Now()
	counts := make([]progress.StepCount, 0, len(p.steps))
	for _, s := range p.steps {
		counts = append(counts, progress.StepCount{Step: string(s), Nodes: p.counts[s]})
	}
	p.mu.Unlock()
	p.rep.Report(progress.Event{Kind: progress.NodeCounts, Total: p.total, Counts: counts})
}
