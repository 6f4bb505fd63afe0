package csr

import (
	"sync"
	"time"
)

// Defaults of the serving CSR caps. A kubelet names its instance's private name and
// address, a few with public ones or several interfaces: 20 is well above what a node
// needs (postfinance/kubelet-csr-approver caps at 20 too), and far below the 20,000
// SANs a hostile node could otherwise get certified. A kubelet asks for a serving
// certificate when it starts without one and when its certificate nears expiry: ten
// approved in an hour leaves room for restarts and retries, and bounds what one node
// makes the signer do.
const (
	DefaultMaxSANs           = 20
	DefaultMaxServingPerNode = 10
	DefaultServingWindow     = time.Hour
)

// Denial reasons of the serving CSR caps.
const (
	ReasonTooManySANs = "TooManySANs"
	ReasonTooManyCSRs = "TooManyServingCSRs"
)

func (p *Policy) maxSANs() int {
	if p.MaxSANs > 0 {
		return p.MaxSANs
	}
	return DefaultMaxSANs
}

// servingLedger remembers, per node, the serving CSRs this policy approved within the
// window. Approvals are what cost: a pending or denied CSR costs a decision, an
// approved one a signature and a certificate that stays valid. It is kept in memory:
// a new leader starts with an empty ledger, so a node can get at most the cap once more
// per leader change, which is still a bound. Deciding a CSR again (after a conflict, or
// before signing an approval written by someone else) finds it in the ledger and does
// not count it twice.
type servingLedger struct {
	mu      sync.Mutex
	byNode  map[string][]approval
	inserts int
}

type approval struct {
	csr string
	at  time.Time
}

// sweepEvery is how many new nodes the ledger takes between sweeps of nodes whose
// approvals all left the window, so that it holds only nodes with recent approvals.
const sweepEvery = 1024

// countServing records the approval of a node's serving CSR, or denies it when the node
// already had the cap approved within the window.
func (p *Policy) countServing(node, csrName string) *Decision {
	limit, window := p.MaxServingPerNode, p.ServingWindow
	if limit <= 0 {
		limit = DefaultMaxServingPerNode
	}
	if window <= 0 {
		window = DefaultServingWindow
	}
	now := time.Now()
	l := &p.serving
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byNode == nil {
		l.byNode = map[string][]approval{}
	}
	recent, known := l.byNode[node]
	recent = fresh(recent, now, window)
	for _, a := range recent {
		if a.csr == csrName {
			l.byNode[node] = recent
			return nil
		}
	}
	if len(recent) >= limit {
		l.byNode[node] = recent
		return deny(ReasonTooManyCSRs, "node %s already had %d serving CSRs approved within %s, the maximum; the oldest leaves the window at %s",
			node, len(recent), window, recent[0].at.Add(window).UTC().Format(time.RFC3339))
	}
	l.byNode[node] = append(recent, approval{csr: csrName, at: now})
	if !known {
		l.inserts++
		if l.inserts%sweepEvery == 0 {
			for n, as := range l.byNode {
				if as = fresh(as, now, window); len(as) == 0 {
					delete(l.byNode, n)
				} else {
					l.byNode[n] = as
				}
			}
		}
	}
	return nil
}

// fresh returns the approvals still within the window, oldest first.
func fresh(as []approval, now time.Time, window time.Duration) []approval {
	i := 0
	for i < len(as) && now.Sub(as[i].at) >= window {
		i++
	}
	return as[i:]
}
