package pool

import (
	"fmt"
	"slices"
	"testing"
)

// sim is a node: the pool as Decide sees it, changed by applying Decide's actions and by
// pods taking addresses (from the lowest device number with a free one, as the datastore
// does).
type sim struct {
	t     *testing.T
	cfg   Config
	lim   Limits
	state State
	next  int
}

func newSim(t *testing.T, cfg Config, lim Limits) *sim {
	return &sim{t: t, cfg: cfg, lim: lim, state: State{
		ENIs: []ENI{{ID: "eni-0", Primary: true}}, MaxPods: lim.MaxPods(), ShrinkAllowed: true,
	}}
}

func (s *sim) eni(id string) *ENI {
	for i := range s.state.ENIs {
		if s.state.ENIs[i].ID == id {
			return &s.state.ENIs[i]
		}
	}
	s.t.Fatalf("action names unknown ENI %s", id)
	return nil
}

// settle applies actions until Decide returns None.
func (s *sim) settle() {
	for range 1000 {
		a := Decide(s.cfg, s.lim, s.state)
		switch a.Kind {
		case None:
			return
		case AssignIPs:
			e := s.eni(a.ENIID)
			if a.Count <= 0 || e.IPs+a.Count > s.lim.SecondaryPerENI() {
				s.t.Fatalf("%v: ENI holds %d of %d", a, e.IPs, s.lim.SecondaryPerENI())
			}
			e.IPs += a.Count
		case AllocENI:
			if len(s.state.ENIs) >= MaxENIs(s.cfg, s.lim) || a.Count <= 0 || a.Count > s.lim.SecondaryPerENI() {
				s.t.Fatalf("%v with %d ENIs", a, len(s.state.ENIs))
			}
			s.next++
			s.state.ENIs = append(s.state.ENIs, ENI{ID: fmt.Sprintf("eni-%d", s.next), DeviceNumber: len(s.state.ENIs), IPs: a.Count})
		case UnassignIPs:
			e := s.eni(a.ENIID)
			if a.Count <= 0 || a.Count > e.Free() {
				s.t.Fatalf("%v: ENI has %d free", a, e.Free())
			}
			e.IPs -= a.Count
		case FreeENI:
			e := s.eni(a.ENIID)
			if e.Primary || e.Assigned > 0 || e.Cooling > 0 {
				s.t.Fatalf("%v frees an ENI in use: %+v", a, *e)
			}
			s.state.ENIs = slices.DeleteFunc(s.state.ENIs, func(x ENI) bool { return x.ID == a.ENIID })
		}
	}
	s.t.Fatalf("pool never settles: %+v", s.state)
}

// pods settles, then adds or removes pods one at a time (settling after each) until n
// pods run.
func (s *sim) pods(n int) {
	s.settle()
	for s.state.Stats().Assigned < n {
		i := slices.IndexFunc(sortedByDevice(s.state.ENIs), func(e ENI) bool { return e.Free() > 0 })
		if i < 0 {
			s.t.Fatalf("no free address for pod %d: %+v", s.state.Stats().Assigned+1, s.state)
		}
		s.eni(sortedByDevice(s.state.ENIs)[i].ID).Assigned++
		s.settle()
	}
	for s.state.Stats().Assigned > n {
		enis := sortedByDevice(s.state.ENIs)
		for i := len(enis) - 1; i >= 0; i-- {
			if enis[i].Assigned > 0 {
				s.eni(enis[i].ID).Assigned--
				break
			}
		}
		s.settle()
	}
}

func (s *sim) perENI() []int {
	var out []int
	for _, e := range s.state.ENIs {
		out = append(out, e.IPs)
	}
	slices.Sort(out)
	return out
}

var (
	t3small = Limits{ENIs: 3, IPv4PerENI: 4}
	// p3dn.24xlarge has 15 ENIs of 50; the documented example stops at three.
	p3dn = Limits{ENIs: 15, IPv4PerENI: 50}
)

// TestDocumentedExamples replays the tables of the VPC CNI's docs/eni-and-ip-target.md:
// for each knob setting, the ENIs, addresses and unused addresses after 0, then more
// pods were placed.
func TestDocumentedExamples(t *testing.T) {
	type step struct {
		pods, enis, ips, unused int
		perENI                  []int // sorted
	}
	tests := []struct {
		name  string
		cfg   Config
		lim   Limits
		steps []step
	}{
		{"t3.small WARM_ENI_TARGET=1", Config{WarmENITarget: 1}, t3small, []step{
			{0, 1, 3, 3, []int{3}}, {5, 3, 9, 4, []int{3, 3, 3}}, {9, 3, 9, 0, []int{3, 3, 3}},
		}},
		{"t3.small WARM_IP_TARGET=1 MINIMUM_IP_TARGET=1", Config{WarmENITarget: 1, WarmIPTarget: 1, MinimumIPTarget: 1}, t3small, []step{
			{0, 1, 1, 1, []int{1}}, {5, 2, 6, 1, []int{3, 3}}, {9, 3, 9, 0, []int{3, 3, 3}},
		}},
		{"t3.small WARM_IP_TARGET=2 MINIMUM_IP_TARGET=5", Config{WarmENITarget: 1, WarmIPTarget: 2, MinimumIPTarget: 5}, t3small, []step{
			{0, 2, 5, 5, []int{2, 3}}, {5, 3, 7, 2, []int{1, 3, 3}}, {9, 3, 9, 0, []int{3, 3, 3}},
		}},
		{"p3dn.24xlarge WARM_ENI_TARGET=1", Config{WarmENITarget: 1}, p3dn, []step{
			{0, 1, 49, 49, []int{49}}, {3, 2, 98, 95, []int{49, 49}}, {95, 3, 147, 52, []int{49, 49, 49}},
		}},
		{"p3dn.24xlarge WARM_IP_TARGET=5 MINIMUM_IP_TARGET=10", Config{WarmENITarget: 1, WarmIPTarget: 5, MinimumIPTarget: 10}, p3dn, []step{
			{0, 1, 10, 10, []int{10}}, {7, 1, 12, 5, []int{12}}, {15, 1, 20, 5, []int{20}}, {45, 2, 50, 5, []int{1, 49}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, tt.cfg, tt.lim)
			for _, st := range tt.steps {
				s.pods(st.pods)
				got := s.state.Stats()
				if got.ENIs != st.enis || got.Total != st.ips || got.Total-got.Assigned != st.unused || !slices.Equal(s.perENI(), st.perENI) {
					t.Errorf("%d pods: %d ENIs, %d addresses, %d unused, per ENI %v; want %d, %d, %d, %v",
						st.pods, got.ENIs, got.Total, got.Total-got.Assigned, s.perENI(), st.enis, st.ips, st.unused, st.perENI)
				}
			}
		})
	}
}

// TestShrink: when pods go away the pool returns to what the targets ask, never below.
func TestShrink(t *testing.T) {
	tests := []struct {
		name              string
		cfg               Config
		lim               Limits
		peak, after       int
		wantENIs, wantIPs int
	}{
		{"WARM_ENI_TARGET=1 frees whole ENIs down to one spare", Config{WarmENITarget: 1}, t3small, 9, 0, 1, 3},
		{"WARM_ENI_TARGET=1 keeps the ENI that is the spare", Config{WarmENITarget: 1}, t3small, 9, 4, 3, 9},
		{"WARM_ENI_TARGET=1 with 2 pods", Config{WarmENITarget: 1}, t3small, 9, 2, 2, 6},
		{"WARM_IP_TARGET=1 MINIMUM_IP_TARGET=1 gives addresses back", Config{WarmIPTarget: 1, MinimumIPTarget: 1}, t3small, 9, 0, 1, 1},
		{"WARM_IP_TARGET=2 MINIMUM_IP_TARGET=5 keeps the floor", Config{WarmIPTarget: 2, MinimumIPTarget: 5}, t3small, 9, 1, 2, 5},
		{"WARM_IP_TARGET=5 MINIMUM_IP_TARGET=10 on p3dn", Config{WarmIPTarget: 5, MinimumIPTarget: 10}, p3dn, 45, 7, 1, 12},
		{"WARM_IP_TARGET=3 alone", Config{WarmIPTarget: 3}, t3small, 6, 2, 2, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, tt.cfg, tt.lim)
			s.pods(tt.peak)
			s.pods(tt.after)
			got := s.state.Stats()
			if got.ENIs != tt.wantENIs || got.Total != tt.wantIPs {
				t.Errorf("after %d then %d pods: %d ENIs, %d addresses (%v); want %d, %d", tt.peak, tt.after, got.ENIs, got.Total, s.perENI(), tt.wantENIs, tt.wantIPs)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		lim   Limits
		state State
		want  Action
	}{
		{"full instance, nothing free: nothing to do", Config{WarmENITarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 3}, {ID: "b", DeviceNumber: 1, IPs: 3, Assigned: 3}, {ID: "c", DeviceNumber: 2, IPs: 3, Assigned: 3}}, MaxPods: 11},
			Action{Kind: None}},
		{"MAX_ENI caps growth", Config{WarmENITarget: 1, MaxENI: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 3}}, MaxPods: 11},
			Action{Kind: None}},
		{"max pods reached: no growth", Config{WarmIPTarget: 5}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 3}}, MaxPods: 3},
			Action{Kind: None}},
		{"short is capped by max pods", Config{WarmIPTarget: 5}, Limits{ENIs: 3, IPv4PerENI: 10},
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 2, Assigned: 2}}, MaxPods: 4},
			Action{Kind: AssignIPs, ENIID: "a", Count: 2}},
		{"fills the lowest device number first", Config{WarmIPTarget: 2}, t3small,
			State{ENIs: []ENI{{ID: "b", DeviceNumber: 1, IPs: 1, Assigned: 1}, {ID: "a", Primary: true, IPs: 2, Assigned: 2}}},
			Action{Kind: AssignIPs, ENIID: "a", Count: 1}},
		{"cooling addresses are not free: grow", Config{WarmIPTarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 2, Assigned: 1, Cooling: 1}}},
			Action{Kind: AssignIPs, ENIID: "a", Count: 1}},
		{"cooling addresses are not given back", Config{WarmIPTarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Cooling: 2}}, ShrinkAllowed: true},
			Action{Kind: None}},
		{"shrink waits for the interval", Config{WarmIPTarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3}}, ShrinkAllowed: false},
			Action{Kind: None}},
		{"surplus given back from the emptiest ENI", Config{WarmIPTarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 1}, {ID: "b", DeviceNumber: 1, IPs: 3, Assigned: 2}}, ShrinkAllowed: true},
			Action{Kind: UnassignIPs, ENIID: "a", Count: 2}},
		{"an empty secondary ENI is freed under IP targets", Config{WarmIPTarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 2}, {ID: "b", DeviceNumber: 1}}, ShrinkAllowed: true},
			Action{Kind: FreeENI, ENIID: "b"}},
		{"an ENI with a cooling address stays", Config{WarmENITarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3}, {ID: "b", DeviceNumber: 1, IPs: 3}, {ID: "c", DeviceNumber: 2, IPs: 3, Cooling: 1}}, ShrinkAllowed: true},
			Action{Kind: FreeENI, ENIID: "b"}},
		{"the primary ENI is never freed", Config{WarmENITarget: 0, WarmIPTarget: 0}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3}}, ShrinkAllowed: true},
			Action{Kind: None}},
		{"WARM_ENI_TARGET=0 still keeps one address", Config{}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true}}},
			Action{Kind: AssignIPs, ENIID: "a", Count: 3}},
		{"new ENI under IP targets gets only what is short", Config{WarmIPTarget: 2}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 3}}},
			Action{Kind: AllocENI, Count: 2}},
		{"new ENI under WARM_ENI_TARGET comes full", Config{WarmENITarget: 1}, t3small,
			State{ENIs: []ENI{{ID: "a", Primary: true, IPs: 3, Assigned: 1}}},
			Action{Kind: AllocENI, Count: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.cfg, tt.lim, tt.state); got != tt.want {
				t.Errorf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMaxPods(t *testing.T) {
	for _, tt := range []struct {
		lim  Limits
		want int
	}{{Limits{3, 10}, 29}, {Limits{3, 6}, 17}, {Limits{4, 15}, 58}, {t3small, 11}} {
		if got := tt.lim.MaxPods(); got != tt.want {
			t.Errorf("%+v.MaxPods() = %d, want %d", tt.lim, got, tt.want)
		}
	}
}
