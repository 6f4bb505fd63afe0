package csr

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestFileInventory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inventory.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"n1": {"id": "i-1", "state": "running", "dnsNames": ["N1.local"], "ips": ["198.18.0.11"]}}`)
	inv := &FileInventory{Path: path}
	inst, err := inv.InstanceForNode(t.Context(), "n1")
	if err != nil || inst.ID != "i-1" || inst.DNSNames[0] != "n1.local" || inst.IPs[0] != netip.MustParseAddr("198.18.0.11") {
		t.Fatalf("%+v, %v", inst, err)
	}
	if _, err := inv.InstanceForNode(t.Context(), "n2"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	write(`{"n2": {"id": "i-2", "state": "running", "ips": ["198.18.0.12"]}}`)
	if inst, err := inv.InstanceForNode(t.Context(), "n2"); err != nil || inst.ID != "i-2" {
		t.Errorf("after rewrite: %+v, %v", inst, err)
	}
	write(`{"n3": {"id": "i-3", "ipz": []}}`)
	if _, err := inv.InstanceForNode(t.Context(), "n3"); err == nil {
		t.Error("unknown field accepted")
	}
}
