// Package inventory is the record of instances that nodejoin trusts over anything a
// node says about itself: which instance backs a node name, its state, role, names and
// addresses. The CSR policy checks serving certificates against it; the authentication
// webhook checks that a token's session is a running instance with the token's role.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/csr"
)

// File reads the inventory from a JSON file keyed by node name, re-reading it when it
// changes (nodejoin's local instances, or a file an operator maintains):
//
//	{"ip-198-18-0-11.local.internal": {"id": "i-0abc", "state": "running", "role": "nodes",
//	  "privateDnsName": "ip-198-18-0-11.local.internal",
//	  "dnsNames": ["ip-198-18-0-11.local.internal"], "ips": ["198.18.0.11"]}}
type File struct {
	Path string

	mu     sync.Mutex
	raw    []byte
	byNode map[string]*entry
	byID   map[string]*entry
}

type entry struct {
	ID             string   `json:"id"`
	State          string   `json:"state"`
	Role           string   `json:"role,omitempty"`
	PrivateDNSName string   `json:"privateDnsName,omitempty"`
	DNSNames       []string `json:"dnsNames,omitempty"`
	IPs            []string `json:"ips,omitempty"`
	ips            []netip.Addr
}

var (
	_ csr.Inventory   = (*File)(nil)
	_ authn.Instances = (*File)(nil)
)

func (f *File) load() error {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return fmt.Errorf("reading inventory: %w", err)
	}
	if bytes.Equal(data, f.raw) {
		return nil
	}
	var byNode map[string]*entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&byNode); err != nil {
		return fmt.Errorf("inventory %s: %w", f.Path, err)
	}
	byID := map[string]*entry{}
	for node, e := range byNode {
		if e.ID == "" {
			return fmt.Errorf("inventory %s: node %s has no instance id", f.Path, node)
		}
		for i, n := range e.DNSNames {
			e.DNSNames[i] = strings.ToLower(n)
		}
		for _, s := range e.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("inventory %s: node %s: %w", f.Path, node, err)
			}
			e.ips = append(e.ips, a)
		}
		byID[e.ID] = e
	}
	f.raw, f.byNode, f.byID = data, byNode, byID
	return nil
}

// InstanceForNode implements csr.Inventory.
func (f *File) InstanceForNode(_ context.Context, node string) (*csr.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.load(); err != nil {
		return nil, err
	}
	e, ok := f.byNode[node]
	if !ok {
		return nil, csr.ErrUnknownNode
	}
	return &csr.Instance{ID: e.ID, State: e.State, DNSNames: e.DNSNames, IPs: e.ips}, nil
}

// Instance implements authn.Instances.
func (f *File) Instance(_ context.Context, id string) (*authn.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.load(); err != nil {
		return nil, err
	}
	e, ok := f.byID[id]
	if !ok {
		return nil, authn.ErrNoInstance
	}
	return &authn.Instance{ID: e.ID, State: e.State, PrivateDNSName: e.PrivateDNSName, Role: e.Role}, nil
}
