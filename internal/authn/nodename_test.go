package authn

import (
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// TestNodeNameOfACustomDomainInstance is the webhook's half of issue 14's third defect
// (internal/nodeadm/bootstrap's TestNodeNameIsEC2PrivateDNSName is nodeadm's): an instance in a VPC
// whose DHCP options set a custom domain has IMDS local-hostname
// ip-10-0-0-1.corp.example.com, but EC2 names it ip-10-0-0-1.ec2.internal. The
// webhook's username comes from EC2 (the inventory), which is the name nodeadm now gives
// the kubelet, so NodeRestriction admits the Node.
func TestNodeNameOfACustomDomainInstance(t *testing.T) {
	const id, ec2Name = "i-0123456789abcdef0", "ip-10-0-0-1.ec2.internal"
	mappings := EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{entry("workers", "arn:aws:iam::111122223333:role/workers")}, nil)
	instances := instanceMap{id: &inventory.Instance{ID: id, State: "running", AccountID: "111122223333", Role: "workers",
		PrivateDNSName: ec2Name, DNSNames: []string{ec2Name}}}
	u, err := Map(t.Context(), caller("workers", id), mappings, instances)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "system:node:"+ec2Name {
		t.Errorf("username %s, want system:node:%s", u.Username, ec2Name)
	}
}
