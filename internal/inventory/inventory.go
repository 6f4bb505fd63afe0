// Package inventory is the record of instances that nodejoin trusts over anything a
// node says about itself: which instance backs a node name, its state, role, names and
// addresses. The CSR policy checks serving certificates against it; the authentication
// webhook checks that a token's session is a running instance with the token's role;
// the node initializer checks a Node against its instance.
//
// It owns the one model of an instance, Instance, the one "not found" answer,
// ErrNotFound, and the file format (File reads it, Encode writes it). Its users declare
// the one-method interface they need (csr.Inventory, authn.Instances,
// cloudnode.Inventory), which File and EC2 satisfy. Other packages' instance types are
// other things: sandbox/instance.Instance is a handle on a running local instance (its
// namespace and processes), ipamd's cloud.InstanceMetadata is what IMDS tells a node
// about itself, and internal/localaws's Instance is the EC2 emulator's own record. It
// imports internal/strictyaml and the AWS SDK.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// Instance is what the inventory knows of an instance, whether it was found by node
// name or by ID.
type Instance struct {
	ID string
	// State is EC2's state name: "running" for a live instance.
	State string
	// AccountID is the account that owns the instance ("" when the inventory does not say).
	AccountID string
	// Role is the name of the role of the instance's instance profile, RoleARN its ARN;
	// both are empty when it has none (RoleARN also when the inventory does not say).
	Role, RoleARN string
	// PrivateDNSName is the instance's private DNS name, lower case: its node name.
	PrivateDNSName string
	// DNSNames are the instance's private and public DNS names, lower case.
	DNSNames []string
	// IPs are every private and public address of the instance's network interfaces.
	IPs []netip.Addr
	// Tags are the instance's tags (nil when it has none or the inventory does not
	// say): the CSR policy reads a bootstrap-token node's group and cluster from them.
	Tags map[string]string
}

// Clone returns a copy that shares nothing with i.
func (i *Instance) Clone() *Instance {
	c := *i
	c.DNSNames = slices.Clone(i.DNSNames)
	c.IPs = slices.Clone(i.IPs)
	c.Tags = maps.Clone(i.Tags)
	return &c
}

// ErrNotFound reports a node name or instance ID the inventory has no instance for.
var ErrNotFound = errors.New("instance not found")

// File reads the inventory from a JSON file keyed by node name, re-reading it when it
// changes (nodejoin's local instances, or a file an operator maintains):
//
//	{"ip-198-18-0-11.local.internal": {"id": "i-0abc", "state": "running", "role": "nodes",
//	  "privateDnsName": "ip-198-18-0-11.local.internal",
//	  "dnsNames": ["ip-198-18-0-11.local.internal"], "ips": ["198.18.0.11"]}}
//
// "accountId", "roleArn" and "tags" (an object of strings) may be given too.
type File struct {
	Path string

	mu     sync.Mutex
	raw    []byte
	byNode map[string]*Instance
	byID   map[string]*Instance
}

// fileEntry is one instance as the file writes it.
type fileEntry struct {
	ID             string            `json:"id"`
	State          string            `json:"state"`
	AccountID      string            `json:"accountId,omitempty"`
	Role           string            `json:"role,omitempty"`
	RoleARN        string            `json:"roleArn,omitempty"`
	PrivateDNSName string            `json:"privateDnsName,omitempty"`
	DNSNames       []string          `json:"dnsNames,omitempty"`
	IPs            []string          `json:"ips,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

func (f *File) load() error {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return fmt.Errorf("reading inventory: %w", err)
	}
	if bytes.Equal(data, f.raw) {
		return nil
	}
	byNode, byID, err := parseFile(data, f.Path)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	f.raw, f.byNode, f.byID = data, byNode, byID
	return nil
}

// parseFile decodes a file inventory (JSON, or YAML) strictly, with internal/strictyaml:
// unknown fields and duplicate keys are errors naming their line. Every instance has
// an ID, no two nodes name the same instance, and every address parses.
func parseFile(data []byte, source string) (byNode, byID map[string]*Instance, err error) {
	var entries map[string]*fileEntry
	if _, err := strictyaml.Decode(data, source, &entries, strictyaml.Options{}); err != nil {
		return nil, nil, err
	}
	byNode, byID = map[string]*Instance{}, map[string]*Instance{}
	nodeOf := map[string]string{}
	for _, node := range slices.Sorted(maps.Keys(entries)) {
		e := entries[node]
		if e == nil || e.ID == "" {
			return nil, nil, fmt.Errorf("node %s has no instance id", node)
		}
		if other, ok := nodeOf[e.ID]; ok {
			return nil, nil, fmt.Errorf("nodes %s and %s both name instance %s", other, node, e.ID)
		}
		nodeOf[e.ID] = node
		inst := &Instance{
			ID: e.ID, State: e.State, AccountID: e.AccountID, Role: e.Role, RoleARN: e.RoleARN,
			PrivateDNSName: strings.ToLower(e.PrivateDNSName), Tags: maps.Clone(e.Tags),
		}
		for _, n := range e.DNSNames {
			inst.DNSNames = append(inst.DNSNames, strings.ToLower(n))
		}
		for _, s := range e.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, nil, fmt.Errorf("node %s: %w", node, err)
			}
			inst.IPs = append(inst.IPs, a)
		}
		byNode[node], byID[e.ID] = inst, inst
	}
	return byNode, byID, nil
}

// Encode writes instances, keyed by node name, in File's format.
func Encode(byNode map[string]*Instance) ([]byte, error) {
	out := make(map[string]*fileEntry, len(byNode))
	for node, inst := range byNode {
		e := &fileEntry{ID: inst.ID, State: inst.State, AccountID: inst.AccountID, Role: inst.Role, RoleARN: inst.RoleARN,
			PrivateDNSName: inst.PrivateDNSName, DNSNames: inst.DNSNames, Tags: inst.Tags}
		for _, ip := range inst.IPs {
			e.IPs = append(e.IPs, ip.String())
		}
		out[node] = e
	}
	return json.Marshal(out)
}

// InstanceForNode returns the instance behind a node name, or ErrNotFound.
func (f *File) InstanceForNode(_ context.Context, node string) (*Instance, error) {
	return f.find(func() *Instance { return f.byNode[node] })
}

// Instance returns the instance with an ID, or ErrNotFound.
func (f *File) Instance(_ context.Context, id string) (*Instance, error) {
	return f.find(func() *Instance { return f.byID[id] })
}

func (f *File) find(lookup func() *Instance) (*Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.load(); err != nil {
		return nil, err
	}
	inst := lookup()
	if inst == nil {
		return nil, ErrNotFound
	}
	return inst.Clone(), nil
}
