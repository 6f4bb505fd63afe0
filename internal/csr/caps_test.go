package csr

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

func allowAll(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
	return true, nil
}

// Item 7 of issue 25: a serving CSR with more SANs than the cap is denied, even when
// every SAN is the instance's own (before, 20,000 SANs were approved).
func TestServingSANCap(t *testing.T) {
	const node = "ip-198-18-0-60.us-west-2.compute.internal"
	inst := &inventory.Instance{ID: "i-0many", State: "running", DNSNames: []string{node}}
	var ips []string
	for i := range 30 {
		a := fmt.Sprintf("198.18.1.%d", i+1)
		inst.IPs = append(inst.IPs, netip.MustParseAddr(a))
		ips = append(ips, a)
	}
	user := "system:node:" + node
	tests := []struct {
		name   string
		max    int
		ips    int
		reason string
		msg    string
	}{
		{"20 SANs", 0, 19, ReasonApproved, MessageServing},
		{"21 SANs", 0, 20, ReasonTooManySANs, "the request has 21 DNS and IP subjectAltNames, more than the maximum of 20"},
		{"a cap of 5, 6 SANs", 5, 5, ReasonTooManySANs, "the request has 6 DNS and IP subjectAltNames, more than the maximum of 5"},
		{"a cap of 30, 30 SANs", 30, 29, ReasonApproved, MessageServing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Inventory: staticInventory{node: inst}, Review: allowAll, MaxSANs: tt.max}
			c := servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{node}, ips: ips[:tt.ips]})
			d, err := p.Decide(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != tt.reason || !strings.Contains(d.Message, tt.msg) || d.Approve != (tt.reason == ReasonApproved) {
				t.Errorf("decision = %+v, want %s %q", d, tt.reason, tt.msg)
			}
		})
	}
}

// Item 7 of issue 25: 200 serving CSRs from one node were all approved and signed;
// now only the per-node cap is approved within the window, the rest denied with the
// reason. Deciding an approved CSR again does not count it twice, and another node
// has a cap of its own.
func TestServingCSRsPerNodeCap(t *testing.T) {
	user := "system:node:" + nodeA
	good := reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}}
	for _, limit := range []int{0, 3} {
		want := limit
		if want == 0 {
			want = DefaultMaxServingPerNode
		}
		p := &Policy{Inventory: instances, Review: allowAll, MaxServingPerNode: limit}
		c := servingCSR(t, user, []string{"system:nodes"}, good)
		approved, denied := 0, 0
		for i := range 200 {
			c.Name = fmt.Sprintf("csr-%03d", i)
			d, err := p.Decide(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d.Approve:
				approved++
			case d.Reason == ReasonTooManyCSRs && strings.Contains(d.Message, fmt.Sprintf("node %s already had %d serving CSRs approved within 1h0m0s, the maximum", nodeA, want)):
				denied++
			default:
				t.Fatalf("%s: unexpected decision %+v", c.Name, d)
			}
		}
		if approved != want || denied != 200-want {
			t.Errorf("cap %d: approved %d, denied %d; want %d and %d", want, approved, denied, want, 200-want)
		}
		c.Name = "csr-000"
		if d, err := p.Decide(t.Context(), c); err != nil || !d.Approve {
			t.Errorf("deciding an approved CSR again: %+v, %v; want approved", d, err)
		}
		other := "system:node:ip-198-18-0-12.us-west-2.compute.internal"
		oc := servingCSR(t, other, []string{"system:nodes"}, reqSpec{cn: other, orgs: []string{"system:nodes"}, ips: []string{"198.18.0.12"}})
		if d, err := p.Decide(t.Context(), oc); err != nil || !d.Approve {
			t.Errorf("another node's serving CSR: %+v, %v; want approved", d, err)
		}
	}
}
