package ec2

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// Instance is what instance metadata says about one instance, and what EC2 launches.
type Instance struct {
	ID               string
	Type             string
	AvailabilityZone string
	Region           string
	AccountID        string
	ImageID          string
	PrivateIPv4      string
	PrivateDNSName   string
	MAC              string
	SubnetID         string
	VPCID            string
	VPCIPv4CIDRs     []string
	IPv6             []string
	// Role is the instance profile's role; empty when the instance has none.
	Role     string
	UserData []byte
}

// The subnet and VPC of instances that name none.
const (
	DefaultSubnetID = "subnet-00000000000000000"
	DefaultVPCID    = "vpc-00000000000000000"
)

// InstanceDefaults fills what inst leaves out: an instance ID, the region from the
// availability zone, a MAC and a private DNS name derived from the address, as EC2
// names them.
func InstanceDefaults(inst *Instance) error {
	if inst.ID == "" {
		b := make([]byte, 9)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		inst.ID = "i-" + hex.EncodeToString(b)[:17]
	}
	if inst.AvailabilityZone == "" {
		inst.AvailabilityZone = "us-west-2a"
	}
	if inst.Region == "" {
		inst.Region = strings.TrimRight(inst.AvailabilityZone, "abcdefghijklmnopqrstuvwxyz")
	}
	if inst.AccountID == "" {
		inst.AccountID = "000000000000"
	}
	if inst.ImageID == "" {
		inst.ImageID = "ami-00000000000000000"
	}
	addr, err := netip.ParseAddr(inst.PrivateIPv4)
	if err != nil || !addr.Is4() {
		return fmt.Errorf("instance %s: private IPv4 %q is not an IPv4 address", inst.ID, inst.PrivateIPv4)
	}
	if inst.MAC == "" {
		a := addr.As4()
		inst.MAC = fmt.Sprintf("0e:00:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3])
	}
	if inst.PrivateDNSName == "" {
		inst.PrivateDNSName = PrivateDNSName(addr, inst.Region)
	}
	if inst.SubnetID == "" {
		inst.SubnetID = DefaultSubnetID
	}
	if inst.VPCID == "" {
		inst.VPCID = DefaultVPCID
	}
	return nil
}

// PrivateDNSName is EC2's private DNS name for an address: ip-A-B-C-D.ec2.internal in
// us-east-1, ip-A-B-C-D.REGION.compute.internal elsewhere.
func PrivateDNSName(addr netip.Addr, region string) string {
	host := "ip-" + strings.ReplaceAll(addr.String(), ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}
