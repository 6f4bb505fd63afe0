package ec2

// This file holds the zone subnets: one subnet of the local VPC in each zone, which
// Auto Scaling groups name in VPCZoneIdentifier and eksctl requires (at least two, in
// two zones) of a VPC it did not create. Instances take their addresses from the node
// range's subnet whatever zone they are placed in; the zone subnets give placement.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
)

// ZoneRange is the VPC's secondary range, which holds the zone subnets: the shared
// address space EKS clusters commonly add to a VPC, so it clashes with no node range.
var ZoneRange = netip.MustParsePrefix("100.64.0.0/16")

// ZoneSubnets are the local VPC's zone subnets in a region: one in each of its zones
// a, b and c, with IDs derived from the zone and a /18 of ZoneRange each. Auto
// Scaling's default subnets are these.
func ZoneSubnets(region string) []Subnet {
	var out []Subnet
	third := byte(0) // the third octet: each zone's /18 starts 64 after the last's
	for _, z := range zoneLetters {
		sum := sha256.Sum256([]byte("subnet/" + region + z))
		base := ZoneRange.Addr().As4()
		base[2] = third
		third += 64
		out = append(out, Subnet{ID: "subnet-" + hex.EncodeToString(sum[:])[:17], VPCID: DefaultVPCID, AvailabilityZone: region + z,
			CIDR: netip.PrefixFrom(netip.AddrFrom4(base), 18), Tags: map[string]string{"kubernetes.io/role/internal-elb": "1"}})
	}
	return out
}

// zoneSubnets are the zone subnets DescribeSubnets lists beside the registered ones:
// those of the local VPC once it exists (a subnet or an instance is in it), unless a
// registered subnet has the ID. Locked.
func (e *EC2) zoneSubnets() map[string]*subnetState {
	out := map[string]*subnetState{}
	if _, ok := e.vpcRanges()[DefaultVPCID]; !ok {
		return out
	}
	for _, s := range ZoneSubnets(e.Region) {
		if _, taken := e.subnets[s.ID]; !taken {
			out[s.ID] = &subnetState{Subnet: s}
		}
	}
	return out
}
