// Package datastore holds ipamd's view of the instance's ENIs and their secondary IPv4
// addresses: which pod sandbox holds which address, which addresses cool down after a
// release, and which are on their way back to EC2. Every change to the allocations is
// checkpointed before it is acknowledged.
package datastore

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// ErrNoFreeAddress is returned by Assign when no address is free.
var ErrNoFreeAddress = errors.New("no free IPv4 address")

// Key identifies an allocation, as CNI does: network, sandbox and interface.
type Key struct {
	NetworkName string `json:"networkName"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// PodMeta names the pod an address was given to.
type PodMeta struct {
	Namespace string `json:"k8sPodNamespace,omitempty"`
	Name      string `json:"k8sPodName,omitempty"`
	UID       string `json:"k8sPodUID,omitempty"`
}

// ENI describes an attached network interface.
type ENI struct {
	ID           string       `json:"id"`
	MAC          string       `json:"mac"`
	DeviceNumber int          `json:"deviceNumber"`
	Primary      bool         `json:"primary"`
	PrimaryIP    netip.Addr   `json:"primaryIP"`
	SubnetCIDR   netip.Prefix `json:"subnetCIDR"`
	AttachmentID string       `json:"attachmentID,omitempty"`
}

// RouteTable is the policy-routing table of traffic from pods on the ENI: the main table
// for the primary ENI, device number + 1 for the others (as the VPC CNI does).
func (e ENI) RouteTable() int {
	if e.Primary || e.DeviceNumber == 0 {
		return 254
	}
	return e.DeviceNumber + 1
}

// Allocation is an address held by a pod sandbox.
type Allocation struct {
	Key
	IP           netip.Addr
	ENIID        string
	DeviceNumber int
	RouteTable   int
	Meta         PodMeta
	AssignedAt   time.Time
}

type addr struct {
	ip         netip.Addr
	eni        string
	owner      *Allocation
	releasedAt time.Time
	// leaving is set while the address is being given back to EC2.
	leaving bool
}

type eniState struct {
	ENI
	addrs map[netip.Addr]*addr
	// leaving is set while the ENI is being detached and deleted.
	leaving bool
}

// Store is the datastore. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	now      func() time.Time
	cooldown time.Duration
	cp       Checkpointer
	enis     map[string]*eniState
	byKey    map[Key]*addr
}

// New returns an empty store. A released address is not handed out again before
// cooldown has passed; cp (nil: none) receives a checkpoint on every change to the
// allocations; now (nil: time.Now) is the clock.
func New(cooldown time.Duration, cp Checkpointer, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, cooldown: cooldown, cp: cp, enis: map[string]*eniState{}, byKey: map[Key]*addr{}}
}

func (s *Store) saveLocked() error {
	if s.cp == nil {
		return nil
	}
	return s.cp.Save(s.checkpointLocked())
}

func (s *Store) coolingLocked(a *addr, now time.Time) bool {
	return a.owner == nil && !a.releasedAt.IsZero() && now.Sub(a.releasedAt) < s.cooldown
}

func (s *Store) addrLocked(ip netip.Addr) *addr {
	for _, e := range s.enis {
		if a, ok := e.addrs[ip]; ok {
			return a
		}
	}
	return nil
}

// AddENI adds an ENI, or updates what is known of it.
func (s *Store) AddENI(e ENI) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.enis[e.ID]; ok {
		cur.ENI = e
		for _, a := range cur.addrs {
			if a.owner != nil {
				a.owner.DeviceNumber, a.owner.RouteTable = e.DeviceNumber, e.RouteTable()
			}
		}
		return
	}
	s.enis[e.ID] = &eniState{ENI: e, addrs: map[netip.Addr]*addr{}}
}

// ENI returns an ENI's description.
func (s *Store) ENI(id string) (ENI, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[id]
	if !ok {
		return ENI{}, false
	}
	return e.ENI, true
}

// ENIs returns the ENIs, by device number.
func (s *Store) ENIs() []ENI {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ENI, 0, len(s.enis))
	for _, e := range s.enis {
		out = append(out, e.ENI)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceNumber < out[j].DeviceNumber })
	return out
}

// AddIPs adds secondary addresses EC2 assigned to an ENI. An address another ENI holds
// is an error.
func (s *Store) AddIPs(eniID string, ips []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok {
		return fmt.Errorf("adding addresses to ENI %s: unknown ENI", eniID)
	}
	for _, ip := range ips {
		if a := s.addrLocked(ip); a != nil && a.eni != eniID {
			return fmt.Errorf("adding %s to ENI %s: ENI %s holds it", ip, eniID, a.eni)
		}
	}
	for _, ip := range ips {
		if _, ok := e.addrs[ip]; !ok {
			e.addrs[ip] = &addr{ip: ip, eni: eniID}
		}
	}
	return nil
}

// ReserveForRelease picks up to n addresses of an ENI that no pod holds and that are
// not cooling down, and keeps them from being assigned until Forget (they went back to
// EC2) or Unreserve (giving them back failed). Highest addresses first.
func (s *Store) ReserveForRelease(eniID string, n int) []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok {
		return nil
	}
	now := s.now()
	var free []netip.Addr
	for ip, a := range e.addrs {
		if a.owner == nil && !a.leaving && !s.coolingLocked(a, now) {
			free = append(free, ip)
		}
	}
	sort.Slice(free, func(i, j int) bool { return free[j].Less(free[i]) })
	if len(free) > n {
		free = free[:n]
	}
	for _, ip := range free {
		e.addrs[ip].leaving = true
	}
	return free
}

// Unreserve makes reserved addresses assignable again.
func (s *Store) Unreserve(ips []netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ip := range ips {
		if a := s.addrLocked(ip); a != nil {
			a.leaving = false
		}
	}
}

// Forget removes addresses that are no longer on their ENI. An address a pod holds is
// kept (and reported), never dropped from under the pod.
func (s *Store) Forget(eniID string, ips []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok {
		return nil
	}
	var held []string
	for _, ip := range ips {
		a, ok := e.addrs[ip]
		if !ok {
			continue
		}
		if a.owner != nil {
			held = append(held, ip.String())
			continue
		}
		delete(e.addrs, ip)
	}
	if len(held) > 0 {
		return fmt.Errorf("ENI %s no longer holds %v, which pods hold", eniID, held)
	}
	return nil
}

// ReserveENIForRelease marks an ENI that no pod uses and none used within the cool-down
// as leaving, so that none of its addresses is assigned; it reports false when the ENI
// is in use, primary or unknown.
func (s *Store) ReserveENIForRelease(eniID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok || e.Primary || e.leaving {
		return false
	}
	now := s.now()
	for _, a := range e.addrs {
		if a.owner != nil || s.coolingLocked(a, now) {
			return false
		}
	}
	e.leaving = true
	return true
}

// UnreserveENI makes a reserved ENI's addresses assignable again.
func (s *Store) UnreserveENI(eniID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.enis[eniID]; ok {
		e.leaving = false
	}
}

// RemoveENI removes an ENI that no pod uses.
func (s *Store) RemoveENI(eniID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok {
		return nil
	}
	for _, a := range e.addrs {
		if a.owner != nil {
			return fmt.Errorf("removing ENI %s: sandbox %s holds %s on it", eniID, a.owner.ContainerID, a.ip)
		}
	}
	delete(s.enis, eniID)
	return nil
}

// Assign gives the sandbox key an address: the one it already holds, if any (an ADD
// repeated by the runtime gets the same answer), else a free one that is not cooling
// down, from the ENI with the lowest device number, lowest address first. The
// allocation is checkpointed before it is returned; ErrNoFreeAddress when none is free.
func (s *Store) Assign(k Key, meta PodMeta) (Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.byKey[k]; ok {
		return *a.owner, nil
	}
	now := s.now()
	var best *addr
	var bestENI *eniState
	for _, e := range s.enis {
		if e.leaving {
			continue
		}
		for _, a := range e.addrs {
			if a.owner != nil || a.leaving || s.coolingLocked(a, now) {
				continue
			}
			if best == nil || e.DeviceNumber < bestENI.DeviceNumber || (e.DeviceNumber == bestENI.DeviceNumber && a.ip.Less(best.ip)) {
				best, bestENI = a, e
			}
		}
	}
	if best == nil {
		return Allocation{}, ErrNoFreeAddress
	}
	best.owner = &Allocation{Key: k, IP: best.ip, ENIID: bestENI.ID, DeviceNumber: bestENI.DeviceNumber, RouteTable: bestENI.RouteTable(), Meta: meta, AssignedAt: now}
	s.byKey[k] = best
	if err := s.saveLocked(); err != nil {
		best.owner = nil
		delete(s.byKey, k)
		return Allocation{}, fmt.Errorf("checkpointing the allocation of %s: %w", best.ip, err)
	}
	return *best.owner, nil
}

// Release frees the sandbox key's address; it starts cooling down. ok is false when the
// sandbox held none (DEL is idempotent). The release is checkpointed before it returns.
func (s *Store) Release(k Key) (Allocation, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byKey[k]
	if !ok {
		return Allocation{}, false, nil
	}
	owner, released := a.owner, a.releasedAt
	a.owner, a.releasedAt = nil, s.now()
	delete(s.byKey, k)
	if err := s.saveLocked(); err != nil {
		a.owner, a.releasedAt = owner, released
		s.byKey[k] = a
		return Allocation{}, false, fmt.Errorf("checkpointing the release of %s: %w", a.ip, err)
	}
	return *owner, true, nil
}

// Lookup returns the sandbox key's allocation.
func (s *Store) Lookup(k Key) (Allocation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byKey[k]
	if !ok {
		return Allocation{}, false
	}
	return *a.owner, true
}

// Allocations returns every allocation, by container ID and interface.
func (s *Store) Allocations() []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Allocation, 0, len(s.byKey))
	for _, a := range s.byKey {
		out = append(out, *a.owner)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerID != out[j].ContainerID {
			return out[i].ContainerID < out[j].ContainerID
		}
		return out[i].IfName < out[j].IfName
	})
	return out
}

// PoolState returns the pool as pool.Decide reads it. Addresses on their way back to
// EC2 count as neither free nor held; an ENI on its way out is left out.
func (s *Store) PoolState() pool.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var st pool.State
	for _, e := range s.enis {
		if e.leaving {
			continue
		}
		pe := pool.ENI{ID: e.ID, DeviceNumber: e.DeviceNumber, Primary: e.Primary}
		for _, a := range e.addrs {
			pe.IPs++
			switch {
			case a.owner != nil:
				pe.Assigned++
			case a.leaving || s.coolingLocked(a, now):
				pe.Cooling++
			}
		}
		st.ENIs = append(st.ENIs, pe)
	}
	sort.Slice(st.ENIs, func(i, j int) bool { return st.ENIs[i].DeviceNumber < st.ENIs[j].DeviceNumber })
	return st
}

// AddrState is one address as the introspection endpoint shows it.
type AddrState struct {
	IP string `json:"ip"`
	// State is "assigned", "cooling", "releasing" or "free".
	State       string `json:"state"`
	ContainerID string `json:"containerID,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	Pod         string `json:"pod,omitempty"`
}

// ENIState is one ENI with its addresses.
type ENIState struct {
	ENI
	Leaving bool        `json:"leaving,omitempty"`
	IPs     []AddrState `json:"ips"`
}

// Snapshot returns the ENIs and their addresses, sorted.
func (s *Store) Snapshot() []ENIState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]ENIState, 0, len(s.enis))
	for _, e := range s.enis {
		es := ENIState{ENI: e.ENI, Leaving: e.leaving, IPs: []AddrState{}}
		for _, a := range e.addrs {
			as := AddrState{IP: a.ip.String(), State: "free"}
			switch {
			case a.owner != nil:
				as.State, as.ContainerID, as.IfName = "assigned", a.owner.ContainerID, a.owner.IfName
				if a.owner.Meta.Name != "" {
					as.Pod = a.owner.Meta.Namespace + "/" + a.owner.Meta.Name
				}
			case a.leaving:
				as.State = "releasing"
			case s.coolingLocked(a, now):
				as.State = "cooling"
			}
			es.IPs = append(es.IPs, as)
		}
		sort.Slice(es.IPs, func(i, j int) bool {
			return netip.MustParseAddr(es.IPs[i].IP).Less(netip.MustParseAddr(es.IPs[j].IP))
		})
		out = append(out, es)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceNumber < out[j].DeviceNumber })
	return out
}

// IPs returns the secondary addresses the store holds for an ENI, sorted.
func (s *Store) IPs(eniID string) []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.enis[eniID]
	if !ok {
		return nil
	}
	out := make([]netip.Addr, 0, len(e.addrs))
	for ip := range e.addrs {
		out = append(out, ip)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}
