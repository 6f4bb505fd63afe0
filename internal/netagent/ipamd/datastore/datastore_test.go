package datastore

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)} }

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var (
	eni0 = ENI{ID: "eni-0", MAC: "02:00:00:00:00:01", DeviceNumber: 0, Primary: true, PrimaryIP: netip.MustParseAddr("198.18.0.11"), SubnetCIDR: netip.MustParsePrefix("198.18.0.0/16")}
	eni1 = ENI{ID: "eni-1", MAC: "02:00:00:00:00:02", DeviceNumber: 1, PrimaryIP: netip.MustParseAddr("198.18.1.20"), SubnetCIDR: netip.MustParsePrefix("198.18.0.0/16")}
)

func key(id string) Key { return Key{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"} }

// store returns a store with eni-0 (198.18.1.1, .2) and eni-1 (198.18.1.21).
func store(t *testing.T, c *clock, cp Checkpointer) *Store {
	t.Helper()
	s := New(30*time.Second, cp, c.now)
	s.AddENI(eni0)
	s.AddENI(eni1)
	if err := s.AddIPs("eni-0", addrs("198.18.1.2", "198.18.1.1")); err != nil {
		t.Fatal(err)
	}
	if err := s.AddIPs("eni-1", addrs("198.18.1.21")); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAssignRelease(t *testing.T) {
	c := newClock()
	s := store(t, c, nil)
	tests := []struct {
		op      string // "add" or "del"
		id      string
		want    string // address; "" for none
		wantErr error
		advance time.Duration
	}{
		{op: "add", id: "a", want: "198.18.1.1"},
		{op: "add", id: "a", want: "198.18.1.1"}, // repeated ADD: same address
		{op: "add", id: "b", want: "198.18.1.2"},
		{op: "add", id: "c", want: "198.18.1.21"}, // primary ENI full: device 1
		{op: "add", id: "d", wantErr: ErrNoFreeAddress},
		{op: "del", id: "a", want: "198.18.1.1"},
		{op: "del", id: "a"},                                                       // repeated DEL: nothing
		{op: "add", id: "d", wantErr: ErrNoFreeAddress, advance: 29 * time.Second}, // cooling down
		{op: "add", id: "d", want: "198.18.1.1", advance: time.Second},
		{op: "del", id: "never"},
	}
	for i, tt := range tests {
		c.advance(tt.advance)
		var got string
		var err error
		if tt.op == "add" {
			var a Allocation
			a, err = s.Assign(key(tt.id), PodMeta{Namespace: "default", Name: tt.id})
			if a.IP.IsValid() {
				got = a.IP.String()
			}
		} else {
			var a Allocation
			var ok bool
			a, ok, err = s.Release(key(tt.id))
			if ok {
				got = a.IP.String()
			}
		}
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Fatalf("step %d: %s %s = %q, %v; want %q, %v", i, tt.op, tt.id, got, err, tt.want, tt.wantErr)
		}
	}
	if a, _ := s.Lookup(key("c")); a.RouteTable != 2 || a.DeviceNumber != 1 || a.ENIID != "eni-1" {
		t.Errorf("allocation on eni-1 = %+v, want device 1, table 2", a)
	}
	if a, _ := s.Lookup(key("b")); a.RouteTable != 254 {
		t.Errorf("allocation on the primary ENI = %+v, want table 254", a)
	}
}

func TestPoolStateAndRelease(t *testing.T) {
	c := newClock()
	s := store(t, c, nil)
	if _, err := s.Assign(key("a"), PodMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Assign(key("b"), PodMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Release(key("a")); err != nil {
		t.Fatal(err)
	}
	st := s.PoolState().Stats()
	if st.Total != 3 || st.Assigned != 1 || st.Cooling != 1 || st.Free != 1 {
		t.Fatalf("stats = %+v, want 3 total, 1 assigned, 1 cooling, 1 free", st)
	}
	// A cooling address is not given back.
	if got := s.ReserveForRelease("eni-0", 2); len(got) != 0 {
		t.Fatalf("ReserveForRelease during cool-down = %v, want none", got)
	}
	c.advance(time.Minute)
	got := s.ReserveForRelease("eni-0", 2)
	if len(got) != 1 || got[0].String() != "198.18.1.1" {
		t.Fatalf("ReserveForRelease = %v, want [198.18.1.1]", got)
	}
	// Reserved addresses are not assigned.
	if a, err := s.Assign(key("c"), PodMeta{}); err != nil || a.IP.String() != "198.18.1.21" {
		t.Fatalf("Assign while .1 is reserved = %v, %v; want 198.18.1.21", a.IP, err)
	}
	if err := s.Forget("eni-0", got); err != nil {
		t.Fatal(err)
	}
	if ips := s.IPs("eni-0"); len(ips) != 1 {
		t.Fatalf("eni-0 holds %v after Forget", ips)
	}
	// An ENI in use cannot be reserved or removed; a free one can.
	if s.ReserveENIForRelease("eni-1") {
		t.Fatal("reserved eni-1 while sandbox c holds its address")
	}
	if err := s.RemoveENI("eni-1"); err == nil {
		t.Fatal("removed eni-1 while sandbox c holds its address")
	}
	if _, _, err := s.Release(key("c")); err != nil {
		t.Fatal(err)
	}
	if s.ReserveENIForRelease("eni-1") {
		t.Fatal("reserved eni-1 while its address cools down")
	}
	c.advance(time.Minute)
	if !s.ReserveENIForRelease("eni-1") {
		t.Fatal("could not reserve the unused eni-1")
	}
	if _, err := s.Assign(key("d"), PodMeta{}); !errors.Is(err, ErrNoFreeAddress) {
		t.Fatalf("Assign from a leaving ENI: err = %v, want ErrNoFreeAddress", err)
	}
	if s.ReserveENIForRelease("eni-0") {
		t.Fatal("reserved the primary ENI")
	}
	if err := s.RemoveENI("eni-1"); err != nil {
		t.Fatal(err)
	}
	if len(s.ENIs()) != 1 {
		t.Fatalf("ENIs = %v", s.ENIs())
	}
}

// TestConcurrentAssign: many sandboxes at once never share an address.
func TestConcurrentAssign(t *testing.T) {
	c := newClock()
	s := New(0, nil, c.now)
	s.AddENI(eni0)
	var ips []netip.Addr
	for i := range 50 {
		ips = append(ips, netip.AddrFrom4([4]byte{198, 18, 2, byte(i + 1)}))
	}
	if err := s.AddIPs("eni-0", ips); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	res := make([]string, 60)
	for i := range 60 {
		wg.Go(func() {
			a, err := s.Assign(key(fmt.Sprintf("c%d", i)), PodMeta{})
			if err == nil {
				res[i] = a.IP.String()
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	n := 0
	for _, ip := range res {
		if ip == "" {
			continue
		}
		if seen[ip] {
			t.Fatalf("%s assigned twice", ip)
		}
		seen[ip] = true
		n++
	}
	if n != 50 {
		t.Fatalf("%d sandboxes got an address, want 50", n)
	}
}

type failingCheckpoint struct{ err error }

func (f *failingCheckpoint) Save(CheckpointData) error           { return f.err }
func (f *failingCheckpoint) Load() (CheckpointData, bool, error) { return CheckpointData{}, false, nil }

// TestCheckpointFailureRollsBack: an allocation that could not be checkpointed is not
// handed out, and a release that could not be is not done.
func TestCheckpointFailureRollsBack(t *testing.T) {
	c := newClock()
	cp := &failingCheckpoint{}
	s := store(t, c, cp)
	if _, err := s.Assign(key("a"), PodMeta{}); err != nil {
		t.Fatal(err)
	}
	cp.err = errors.New("disk full")
	if _, err := s.Assign(key("b"), PodMeta{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Assign with a failing checkpoint: err = %v", err)
	}
	if _, ok := s.Lookup(key("b")); ok {
		t.Fatal("sandbox b holds an address that was never checkpointed")
	}
	if _, _, err := s.Release(key("a")); err == nil {
		t.Fatal("Release with a failing checkpoint succeeded")
	}
	if _, ok := s.Lookup(key("a")); !ok {
		t.Fatal("sandbox a lost its address although the release was not checkpointed")
	}
	if st := s.PoolState().Stats(); st.Assigned != 1 || st.Cooling != 0 {
		t.Fatalf("stats after failed operations = %+v", st)
	}
}

func TestCheckpointRoundTripAndRestore(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "ipam.json")
	cp := File{Path: path}
	s := store(t, c, cp)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Assign(key(id), PodMeta{Namespace: "default", Name: "pod-" + id}); err != nil {
			t.Fatal(err)
		}
		c.advance(time.Second)
	}
	if _, _, err := s.Release(key("b")); err != nil { // 198.18.1.2 cools down
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v, want 0600", fi.Mode().Perm())
	}
	d, ok, err := cp.Load()
	if err != nil || !ok {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	if len(d.Allocations) != 2 || len(d.Cooling) != 1 || d.Cooling[0].IPv4 != "198.18.1.2" {
		t.Fatalf("checkpoint = %+v", d)
	}

	// A restart: EC2 now says eni-1 lost 198.18.1.21 (c's address), so c is dropped;
	// a checkpoint entry naming a's address for another sandbox is dropped too.
	d.Allocations = append(d.Allocations, CheckpointEntry{NetworkName: "aws-cni", ContainerID: "z", IfName: "eth0", IPv4: "198.18.1.1", AllocationTimestamp: c.t.UnixNano()})
	c.advance(10 * time.Second)
	r := New(30*time.Second, cp, c.now)
	r.AddENI(eni0)
	r.AddENI(eni1)
	if err := r.AddIPs("eni-0", addrs("198.18.1.1", "198.18.1.2")); err != nil {
		t.Fatal(err)
	}
	if err := r.AddIPs("eni-1", addrs("198.18.1.22")); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Restore(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Restored) != 1 || rep.Restored[0].ContainerID != "a" || rep.Restored[0].IP.String() != "198.18.1.1" {
		t.Fatalf("restored %+v, want a on 198.18.1.1", rep.Restored)
	}
	if len(rep.Dropped) != 2 {
		t.Fatalf("dropped %+v, want c (address gone) and z (address held by a)", rep.Dropped)
	}
	// Nothing assigned twice, nothing leaked: the next sandboxes get .22 and, once its
	// cool-down ends, .2; a repeated ADD of a gets its old address.
	if got, _ := r.Assign(key("a"), PodMeta{}); got.IP.String() != "198.18.1.1" {
		t.Fatalf("a after restart got %v", got.IP)
	}
	if got, err := r.Assign(key("d"), PodMeta{}); err != nil || got.IP.String() != "198.18.1.22" {
		t.Fatalf("d after restart got %v, %v; want 198.18.1.22", got.IP, err)
	}
	if _, err := r.Assign(key("e"), PodMeta{}); !errors.Is(err, ErrNoFreeAddress) {
		t.Fatalf("e during .2's cool-down: err = %v", err)
	}
	c.advance(30 * time.Second)
	if got, err := r.Assign(key("e"), PodMeta{}); err != nil || got.IP.String() != "198.18.1.2" {
		t.Fatalf("e after the cool-down got %v, %v; want 198.18.1.2", got.IP, err)
	}
	d2, _, err := cp.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(d2.Allocations) != 3 {
		t.Fatalf("rewritten checkpoint holds %+v", d2.Allocations)
	}
}

func TestCheckpointVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	if _, ok, err := (File{Path: path}).Load(); ok || err != nil {
		t.Fatalf("missing checkpoint: %v, %v; want a fresh node", ok, err)
	}
	for _, body := range []string{`{"version":"vpc-cni-ipam/1","allocations":[]}`, `{`} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := (File{Path: path}).Load(); err == nil || !strings.Contains(err.Error(), "move") {
			t.Errorf("Load(%s): err = %v, want an error saying what to do", body, err)
		}
	}
}
