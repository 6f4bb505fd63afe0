package inventory

import (
	"reflect"
	"testing"
)

// FuzzFileInventory: a file inventory that parses re-encodes to one that parses to the
// same instances; every node's instance is the one its ID finds, and no two nodes share
// an instance.
func FuzzFileInventory(f *testing.F) {
	for _, seed := range []string{
		`{"ip-198-18-0-11.local.internal": {"id": "i-0aaaaaaaaaaaaaaaa", "state": "running", "accountId": "000000000000", "role": "nodes", "roleArn": "arn:aws:iam::000000000000:role/nodes", "privateDnsName": "ip-198-18-0-11.local.internal", "dnsNames": ["ip-198-18-0-11.local.internal"], "ips": ["198.18.0.11"]}}`,
		`{"a": {"id": "i-1", "state": "stopped", "ips": ["2001:db8::1", "::ffff:198.18.0.1"], "dnsNames": ["A.Example"]}, "b": {"id": "i-2", "state": "running"}}`,
		`{"a": {"id": "i-1"}, "b": {"id": "i-1"}}`,
		`{"a": {"id": "i-1", "unknown": 1}}`,
		`{"a": null}`, `{} {}`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		byNode, byID, err := parseFile(data, "fuzz")
		if err != nil {
			return
		}
		if len(byNode) != len(byID) {
			t.Fatalf("%d nodes but %d instances", len(byNode), len(byID))
		}
		for node, inst := range byNode {
			if byID[inst.ID] != inst {
				t.Fatalf("node %s: instance %s is not the one its ID finds", node, inst.ID)
			}
		}
		again, err := Encode(byNode)
		if err != nil {
			t.Fatal(err)
		}
		byNode2, _, err := parseFile(again, "again")
		if err != nil {
			t.Fatalf("re-encoded inventory %s: %v", again, err)
		}
		if !reflect.DeepEqual(byNode, byNode2) {
			t.Fatalf("round trip changed the inventory:\n%+v\n%+v", byNode, byNode2)
		}
	})
}

// Two node names claiming one instance would make the instance found by ID depend on
// map order; the file is refused instead.
func TestFileRefusesTwoNodesOfOneInstance(t *testing.T) {
	_, _, err := parseFile([]byte(`{"a": {"id": "i-1"}, "b": {"id": "i-1"}}`), "t")
	if err == nil || err.Error() != "nodes a and b both name instance i-1" {
		t.Fatalf("parseFile = %v, want the two nodes named", err)
	}
}
