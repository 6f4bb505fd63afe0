package csr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
)

// FileInventory reads the node → instance map from a JSON file, re-reading it when it
// changes. It serves clusters whose instances are known locally (nodejoin's local
// instances, or a file an operator maintains):
//
//	{"ip-198-18-0-11.local.internal": {"id": "i-0abc", "state": "running",
//	  "dnsNames": ["ip-198-18-0-11.local.internal"], "ips": ["198.18.0.11"]}}
type FileInventory struct {
	Path string

	mu    sync.Mutex
	raw   []byte
	nodes map[string]*Instance
}

type fileInstance struct {
	ID       string   `json:"id"`
	State    string   `json:"state"`
	DNSNames []string `json:"dnsNames"`
	IPs      []string `json:"ips"`
}

// InstanceForNode implements Inventory.
func (f *FileInventory) InstanceForNode(_ context.Context, node string) (*Instance, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("reading inventory: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !bytes.Equal(data, f.raw) {
		nodes, err := parseInventory(data)
		if err != nil {
			return nil, fmt.Errorf("inventory %s: %w", f.Path, err)
		}
		f.raw, f.nodes = data, nodes
	}
	inst, ok := f.nodes[node]
	if !ok {
		return nil, ErrUnknownNode
	}
	return inst, nil
}

func parseInventory(data []byte) (map[string]*Instance, error) {
	var raw map[string]fileInstance
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	out := map[string]*Instance{}
	for node, fi := range raw {
		inst := &Instance{ID: fi.ID, State: fi.State}
		for _, n := range fi.DNSNames {
			inst.DNSNames = append(inst.DNSNames, strings.ToLower(n))
		}
		for _, s := range fi.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", node, err)
			}
			inst.IPs = append(inst.IPs, a)
		}
		out[node] = inst
	}
	return out, nil
}
