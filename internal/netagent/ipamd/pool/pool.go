// Package pool decides how ipamd's warm pool of IPv4 addresses should change, with the
// VPC CNI's knobs and semantics (WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET,
// MAX_ENI). Decide is a pure function of the configuration and the pool's state: the
// daemon applies the one action it returns and asks again, until it returns None.
//
// Only secondary-IP mode (no prefix delegation) and network card 0 are modelled, as for
// the instance types nodejoin's table describes.
package pool

import (
	"fmt"
	"sort"
)

// Config holds the knobs, as the VPC CNI names them; zero or negative means unset.
type Config struct {
	// WarmENITarget keeps this many whole ENIs' worth of free addresses. Ignored when
	// WarmIPTarget or MinimumIPTarget is set.
	WarmENITarget int
	// WarmIPTarget keeps this many free addresses.
	WarmIPTarget int
	// MinimumIPTarget is a floor on the total number of addresses.
	MinimumIPTarget int
	// MaxENI caps the number of ENIs below the instance type's limit.
	MaxENI int
}

// IPTargetsSet reports whether WARM_IP_TARGET or MINIMUM_IP_TARGET is set, which turns
// WARM_ENI_TARGET off and lets single addresses be given back.
func (c Config) IPTargetsSet() bool { return c.WarmIPTarget > 0 || c.MinimumIPTarget > 0 }

// Limits are the instance type's, from DescribeInstanceTypes.
type Limits struct {
	// ENIs is the number of network interfaces the instance can have.
	ENIs int
	// IPv4PerENI is the number of IPv4 addresses one interface can hold, its own primary
	// address included (so each ENI has IPv4PerENI-1 addresses for pods).
	IPv4PerENI int
}

// SecondaryPerENI is the number of pod addresses one ENI can hold.
func (l Limits) SecondaryPerENI() int { return l.IPv4PerENI - 1 }

// MaxPods is EKS's max pods for these limits: ENIs × (IPv4 per ENI − 1) + 2 (one address
// per ENI is its own; two host-network pods, aws-node and kube-proxy, need none).
func (l Limits) MaxPods() int { return l.ENIs*(l.IPv4PerENI-1) + 2 }

// ENI is the state of one attached interface.
type ENI struct {
	ID           string
	DeviceNumber int
	// Primary is the instance's primary ENI (device 0), which is never freed.
	Primary bool
	// IPs is the number of secondary addresses the ENI holds.
	IPs int
	// Assigned is how many of them pods hold.
	Assigned int
	// Cooling is how many of them were released less than the cool-down ago: neither
	// free for a pod nor to be given back.
	Cooling int
}

// Free is the number of addresses of the ENI a pod can get now.
func (e ENI) Free() int { return e.IPs - e.Assigned - e.Cooling }

// State is the pool as the datastore sees it.
type State struct {
	ENIs []ENI
	// MaxPods stops growth once the pool holds this many addresses (0: no cap).
	MaxPods int
	// ShrinkAllowed is false while the last shrink is more recent than the scale-down
	// interval (the VPC CNI's decreaseIPPoolInterval, 30 s).
	ShrinkAllowed bool
}

// Stats sums a state.
type Stats struct {
	ENIs     int `json:"enis"`
	Total    int `json:"total"`
	Assigned int `json:"assigned"`
	Cooling  int `json:"cooling"`
	Free     int `json:"free"`
}

// Stats returns the state's totals.
func (s State) Stats() Stats {
	st := Stats{ENIs: len(s.ENIs)}
	for _, e := range s.ENIs {
		st.Total += e.IPs
		st.Assigned += e.Assigned
		st.Cooling += e.Cooling
	}
	st.Free = st.Total - st.Assigned - st.Cooling
	return st
}

// Kind is what an Action does.
type Kind int

const (
	// None means the pool is as it should be.
	None Kind = iota
	// AssignIPs assigns Count more secondary addresses to the existing ENI ENIID.
	AssignIPs
	// AllocENI creates and attaches a new ENI and assigns it Count secondary addresses.
	AllocENI
	// UnassignIPs gives Count free addresses of ENI ENIID back.
	UnassignIPs
	// FreeENI detaches and deletes ENI ENIID, which holds no address a pod has or had
	// within the cool-down.
	FreeENI
)

func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case AssignIPs:
		return "assign-ips"
	case AllocENI:
		return "alloc-eni"
	case UnassignIPs:
		return "unassign-ips"
	case FreeENI:
		return "free-eni"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Action is one change to the pool.
type Action struct {
	Kind  Kind
	ENIID string
	Count int
}

func (a Action) String() string {
	switch a.Kind {
	case None:
		return "none"
	case AllocENI:
		return fmt.Sprintf("%s %d", a.Kind, a.Count)
	case FreeENI:
		return fmt.Sprintf("%s %s", a.Kind, a.ENIID)
	}
	return fmt.Sprintf("%s %s %d", a.Kind, a.ENIID, a.Count)
}

// MaxENIs is the number of ENIs the pool may use: the instance limit, or MAX_ENI when
// that is set and lower.
func MaxENIs(cfg Config, lim Limits) int {
	if cfg.MaxENI > 0 && cfg.MaxENI < lim.ENIs {
		return cfg.MaxENI
	}
	return lim.ENIs
}

// Short is how many addresses the pool lacks, as ipamd's isDatastorePoolTooLow and
// datastoreTargetState compute it: with the IP targets
// max(WARM_IP_TARGET − free, MINIMUM_IP_TARGET − total, 0); otherwise a whole ENI's
// worth per WARM_ENI_TARGET when fewer are free (one address when the target is 0 and
// none is free). Nothing is short once the pool holds max pods' worth.
func Short(cfg Config, lim Limits, s State) int {
	st := s.Stats()
	short := 0
	if cfg.IPTargetsSet() {
		short = max(cfg.WarmIPTarget-st.Free, cfg.MinimumIPTarget-st.Total, 0)
	} else {
		want := lim.SecondaryPerENI() * max(cfg.WarmENITarget, 0)
		if st.Free < want {
			short = want - st.Free
		} else if want == 0 && st.Free == 0 {
			short = 1
		}
	}
	if s.MaxPods > 0 {
		short = min(short, max(s.MaxPods-st.Total, 0))
	}
	return short
}

// Over is how many free addresses the pool holds beyond the IP targets:
// min(free − WARM_IP_TARGET, total − MINIMUM_IP_TARGET), at least 0. Always 0 without
// IP targets (with WARM_ENI_TARGET alone only whole ENIs are given back).
func Over(cfg Config, s State) int {
	if !cfg.IPTargetsSet() {
		return 0
	}
	st := s.Stats()
	return max(min(st.Free-max(cfg.WarmIPTarget, 0), st.Total-max(cfg.MinimumIPTarget, 0)), 0)
}

// Decide returns the next action that brings s toward the targets.
//
// Growing fills existing ENIs first (lowest device number first), then allocates a new
// ENI — with only the short addresses under IP targets, full under WARM_ENI_TARGET.
// Shrinking (only when s.ShrinkAllowed) frees an ENI that holds nothing in use when
// what it holds is surplus, and under IP targets gives single surplus addresses back,
// from the ENI with the fewest addresses in use so that it can empty and be freed.
func Decide(cfg Config, lim Limits, s State) Action {
	enis := sortedByDevice(s.ENIs)
	per := lim.SecondaryPerENI()
	if short := Short(cfg, lim, s); short > 0 {
		for _, e := range enis {
			if room := per - e.IPs; room > 0 {
				n := room
				if cfg.IPTargetsSet() {
					n = min(room, short)
				}
				return Action{Kind: AssignIPs, ENIID: e.ID, Count: n}
			}
		}
		if len(enis) < MaxENIs(cfg, lim) {
			n := per
			if cfg.IPTargetsSet() {
				n = min(per, short)
			}
			return Action{Kind: AllocENI, Count: n}
		}
		return Action{Kind: None}
	}
	if !s.ShrinkAllowed {
		return Action{Kind: None}
	}
	st := s.Stats()
	// Whole ENIs first, highest device number first.
	for i := len(enis) - 1; i >= 0; i-- {
		e := enis[i]
		if e.Primary || e.Assigned > 0 || e.Cooling > 0 {
			continue
		}
		surplus := false
		if cfg.IPTargetsSet() {
			surplus = e.IPs <= Over(cfg, s)
		} else {
			surplus = st.Free-e.IPs >= per*max(cfg.WarmENITarget, 0)
		}
		if surplus {
			return Action{Kind: FreeENI, ENIID: e.ID}
		}
	}
	over := Over(cfg, s)
	if over == 0 {
		return Action{Kind: None}
	}
	// Single addresses: from the ENI with the fewest in use (then the highest device
	// number), so that ENIs empty and can go.
	cands := make([]ENI, 0, len(enis))
	for _, e := range enis {
		if e.Free() > 0 {
			cands = append(cands, e)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Assigned+cands[i].Cooling != cands[j].Assigned+cands[j].Cooling {
			return cands[i].Assigned+cands[i].Cooling < cands[j].Assigned+cands[j].Cooling
		}
		return cands[i].DeviceNumber > cands[j].DeviceNumber
	})
	if len(cands) == 0 {
		return Action{Kind: None}
	}
	return Action{Kind: UnassignIPs, ENIID: cands[0].ID, Count: min(over, cands[0].Free())}
}

func sortedByDevice(in []ENI) []ENI {
	out := append([]ENI(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].DeviceNumber < out[j].DeviceNumber })
	return out
}
