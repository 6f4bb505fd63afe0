package inventory

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inventory.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"n1": {"id": "i-1", "state": "running", "role": "nodes", "privateDnsName": "n1.local", "dnsNames": ["N1.local"], "ips": ["198.18.0.11"]}}`)
	inv := &File{Path: path}
	inst, err := inv.InstanceForNode(t.Context(), "n1")
	if err != nil || inst.ID != "i-1" || inst.DNSNames[0] != "n1.local" || inst.IPs[0] != netip.MustParseAddr("198.18.0.11") {
		t.Fatalf("%+v, %v", inst, err)
	}
	byID, err := inv.Instance(t.Context(), "i-1")
	if err != nil || byID.Role != "nodes" || byID.PrivateDNSName != "n1.local" || byID.State != "running" || !reflect.DeepEqual(byID, inst) {
		t.Errorf("by ID: %+v, %v", byID, err)
	}
	inst.DNSNames[0] = "mutated"
	if again, _ := inv.InstanceForNode(t.Context(), "n1"); again.DNSNames[0] != "n1.local" {
		t.Errorf("answer changed by its caller: %+v", again)
	}
	if _, err := inv.InstanceForNode(t.Context(), "n2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := inv.Instance(t.Context(), "i-9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
	write(`{"n2": {"id": "i-2", "state": "running", "ips": ["198.18.0.12"]}}`)
	if inst, err := inv.InstanceForNode(t.Context(), "n2"); err != nil || inst.ID != "i-2" {
		t.Errorf("after rewrite: %+v, %v", inst, err)
	}
	for _, bad := range []string{`{"n3": {"id": "i-3", "ipz": []}}`, `{"n3": {"state": "running"}}`, `{"n3": {"id": "i-3", "ips": ["x"]}}`} {
		write(bad)
		if _, err := inv.InstanceForNode(t.Context(), "n3"); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
