package datastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"time"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// CheckpointVersion names the checkpoint's format. A checkpoint of another version is an
// error, never silently read: a format this ipamd does not know may hold allocations it
// would drop.
const CheckpointVersion = "nodejoin-ipam/1"

// CheckpointData is the checkpoint: the allocations, and the addresses still cooling
// down, so that a restart neither forgets a pod's address nor hands a just-released one
// out again at once.
type CheckpointData struct {
	Version     string            `json:"version"`
	Allocations []CheckpointEntry `json:"allocations"`
	Cooling     []CoolingEntry    `json:"cooling,omitempty"`
}

// CheckpointEntry is one allocation.
type CheckpointEntry struct {
	NetworkName string `json:"networkName"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	IPv4        string `json:"ipv4"`
	// AllocationTimestamp is in nanoseconds since the epoch.
	AllocationTimestamp int64   `json:"allocationTimestamp"`
	Metadata            PodMeta `json:"metadata"`
}

// CoolingEntry is an address released at ReleasedAt (nanoseconds since the epoch).
type CoolingEntry struct {
	IPv4       string `json:"ipv4"`
	ReleasedAt int64  `json:"releasedAt"`
}

// Checkpointer stores checkpoints.
type Checkpointer interface {
	// Save replaces the stored checkpoint.
	Save(CheckpointData) error
	// Load returns the stored checkpoint; ok is false when there is none.
	Load() (data CheckpointData, ok bool, err error)
}

// File is a Checkpointer writing a JSON file atomically (temp file, fsync, rename).
type File struct{ Path string }

// Save writes d to the file.
func (f File) Save(d CheckpointData) error {
	d.Version = CheckpointVersion
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(f.Path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	return nil
}

// Load reads the file; a missing file is a fresh node.
func (f File) Load() (CheckpointData, bool, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return CheckpointData{}, false, nil
	}
	if err != nil {
		return CheckpointData{}, false, fmt.Errorf("reading checkpoint: %w", err)
	}
	var d CheckpointData
	if err := json.Unmarshal(b, &d); err != nil {
		return CheckpointData{}, false, fmt.Errorf("checkpoint %s is not valid JSON (%w): move it away to start with no allocations", f.Path, err)
	}
	if d.Version != CheckpointVersion {
		return CheckpointData{}, false, fmt.Errorf("checkpoint %s has version %q, this ipamd reads %q: run the nodejoin-netagent that wrote it, or move the file away to start with no allocations", f.Path, d.Version, CheckpointVersion)
	}
	return d, true, nil
}

// checkpointLocked renders the store's allocations and cooling addresses, sorted.
func (s *Store) checkpointLocked() CheckpointData {
	d := CheckpointData{Version: CheckpointVersion, Allocations: []CheckpointEntry{}}
	now := s.now()
	for _, e := range s.enis {
		for _, a := range e.addrs {
			switch {
			case a.owner != nil:
				d.Allocations = append(d.Allocations, CheckpointEntry{
					NetworkName: a.owner.NetworkName, ContainerID: a.owner.ContainerID, IfName: a.owner.IfName,
					IPv4: a.ip.String(), AllocationTimestamp: a.owner.AssignedAt.UnixNano(), Metadata: a.owner.Meta,
				})
			case s.coolingLocked(a, now):
				d.Cooling = append(d.Cooling, CoolingEntry{IPv4: a.ip.String(), ReleasedAt: a.releasedAt.UnixNano()})
			}
		}
	}
	sort.Slice(d.Allocations, func(i, j int) bool {
		a, b := d.Allocations[i], d.Allocations[j]
		if a.ContainerID != b.ContainerID {
			return a.ContainerID < b.ContainerID
		}
		return a.IfName < b.IfName
	})
	sort.Slice(d.Cooling, func(i, j int) bool { return d.Cooling[i].IPv4 < d.Cooling[j].IPv4 })
	return d
}

// RestoreReport says what Restore did with each checkpointed allocation.
type RestoreReport struct {
	Restored []Allocation
	// Dropped are allocations whose address no ENI of the instance holds any more, or
	// that another allocation of the checkpoint already held.
	Dropped []DroppedAllocation
}

// DroppedAllocation is an allocation Restore did not take back, and why.
type DroppedAllocation struct {
	Key    Key
	IP     string
	Reason string
}

// Restore takes the checkpoint's allocations back into a store whose ENIs and addresses
// were just read from EC2 (the source of truth): an allocation is restored when its
// address is on one of the ENIs and held by no other; every other is dropped, with a
// reason. Addresses that were cooling keep cooling. The checkpoint is then rewritten
// from the result (the view it was filtered by is EC2's own, not a cache's).
func (s *Store) Restore(d CheckpointData) (RestoreReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rep RestoreReport
	entries := append([]CheckpointEntry(nil), d.Allocations...)
	// Oldest first, so that of two allocations of one address the first one made wins.
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].AllocationTimestamp < entries[j].AllocationTimestamp })
	for _, c := range entries {
		k := Key{NetworkName: c.NetworkName, ContainerID: c.ContainerID, IfName: c.IfName}
		ip, err := netip.ParseAddr(c.IPv4)
		if err != nil {
			rep.Dropped = append(rep.Dropped, DroppedAllocation{Key: k, IP: c.IPv4, Reason: "not an IPv4 address"})
			continue
		}
		if _, dup := s.byKey[k]; dup {
			rep.Dropped = append(rep.Dropped, DroppedAllocation{Key: k, IP: c.IPv4, Reason: "sandbox already holds another address"})
			continue
		}
		a := s.addrLocked(ip)
		switch {
		case a == nil:
			rep.Dropped = append(rep.Dropped, DroppedAllocation{Key: k, IP: c.IPv4, Reason: "address is on none of the instance's ENIs"})
			continue
		case a.owner != nil:
			rep.Dropped = append(rep.Dropped, DroppedAllocation{Key: k, IP: c.IPv4, Reason: "address already held by sandbox " + a.owner.ContainerID})
			continue
		}
		e := s.enis[a.eni]
		a.owner = &Allocation{Key: k, IP: ip, ENIID: e.ID, DeviceNumber: e.DeviceNumber, RouteTable: e.RouteTable(), Meta: c.Metadata, AssignedAt: time.Unix(0, c.AllocationTimestamp)}
		s.byKey[k] = a
		rep.Restored = append(rep.Restored, *a.owner)
	}
	for _, c := range d.Cooling {
		ip, err := netip.ParseAddr(c.IPv4)
		if err != nil {
			continue
		}
		if a := s.addrLocked(ip); a != nil && a.owner == nil {
			a.releasedAt = time.Unix(0, c.ReleasedAt)
		}
	}
	if err := s.saveLocked(); err != nil {
		return rep, err
	}
	return rep, nil
}
