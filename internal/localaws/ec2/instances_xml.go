package ec2

// This file holds DescribeInstances' answer.

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/iam"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

type reservationXML struct {
	ReservationID string                           `xml:"reservationId"`
	OwnerID       string                           `xml:"ownerId"`
	Groups        protocol.ItemSet[struct{}]       `xml:"groupSet"`
	Instances     protocol.ItemSet[ec2InstanceXML] `xml:"instancesSet"`
}

type ec2InstanceXML struct {
	InstanceID string `xml:"instanceId"`
	ImageID    string `xml:"imageId"`
	State      struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	PrivateDNSName string `xml:"privateDnsName"`
	DNSName        string `xml:"dnsName"`
	Reason         string `xml:"reason"`
	AMILaunchIndex int    `xml:"amiLaunchIndex"`
	InstanceType   string `xml:"instanceType"`
	LaunchTime     string `xml:"launchTime"`
	Placement      struct {
		AvailabilityZone string `xml:"availabilityZone"`
		Tenancy          string `xml:"tenancy"`
	} `xml:"placement"`
	SubnetID           string `xml:"subnetId,omitempty"`
	VPCID              string `xml:"vpcId,omitempty"`
	PrivateIPAddress   string `xml:"privateIpAddress,omitempty"`
	IPAddress          string `xml:"ipAddress,omitempty"`
	Architecture       string `xml:"architecture"`
	RootDeviceType     string `xml:"rootDeviceType"`
	IAMInstanceProfile *struct {
		ARN string `xml:"arn"`
		ID  string `xml:"id"`
	} `xml:"iamInstanceProfile,omitempty"`
	NetworkInterfaces protocol.ItemSet[ec2NetworkInterfaceXML] `xml:"networkInterfaceSet"`
	Tags              []Tag                                    `xml:"tagSet>item,omitempty"`
	StateReason       *struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	} `xml:"stateReason,omitempty"`
}

type ec2AssociationXML struct {
	PublicIP      string `xml:"publicIp"`
	PublicDNSName string `xml:"publicDnsName"`
	IPOwnerID     string `xml:"ipOwnerId"`
}

type ec2NetworkInterfaceXML struct {
	NetworkInterfaceID string                        `xml:"networkInterfaceId"`
	Description        string                        `xml:"description"`
	Groups             protocol.ItemSet[ec2GroupXML] `xml:"groupSet"`
	SubnetID           string                        `xml:"subnetId"`
	VPCID              string                        `xml:"vpcId"`
	OwnerID            string                        `xml:"ownerId"`
	Status             string                        `xml:"status"`
	MACAddress         string                        `xml:"macAddress"`
	PrivateIPAddress   string                        `xml:"privateIpAddress"`
	PrivateDNSName     string                        `xml:"privateDnsName"`
	SourceDestCheck    bool                          `xml:"sourceDestCheck"`
	Attachment         struct {
		AttachmentID        string `xml:"attachmentId"`
		DeviceIndex         int    `xml:"deviceIndex"`
		Status              string `xml:"status"`
		AttachTime          string `xml:"attachTime"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
		NetworkCardIndex    int    `xml:"networkCardIndex"`
	} `xml:"attachment"`
	Association   *ec2AssociationXML                `xml:"association,omitempty"`
	PrivateIPs    protocol.ItemSet[ec2PrivateIPXML] `xml:"privateIpAddressesSet"`
	IPv6Addresses protocol.ItemSet[ec2IPv6XML]      `xml:"ipv6AddressesSet"`
	InterfaceType string                            `xml:"interfaceType"`
}

type ec2PrivateIPXML struct {
	PrivateIPAddress string             `xml:"privateIpAddress"`
	PrivateDNSName   string             `xml:"privateDnsName"`
	Primary          bool               `xml:"primary"`
	Association      *ec2AssociationXML `xml:"association,omitempty"`
}

type ec2IPv6XML struct {
	IPv6Address   string `xml:"ipv6Address"`
	IsPrimaryIPv6 bool   `xml:"isPrimaryIpv6"`
}

func reservation(r *InstanceRecord) reservationXML {
	suffix := strings.TrimPrefix(r.ID, "i-")
	var x ec2InstanceXML
	x.InstanceID, x.ImageID, x.InstanceType = r.ID, r.ImageID, r.Type
	x.State.Code, x.State.Name = instanceStateCodes[r.State], r.State
	x.PrivateDNSName, x.DNSName = r.PrivateDNSName, r.PublicDNSName
	x.LaunchTime = r.LaunchTime.UTC().Format(timeFormat)
	x.Placement.AvailabilityZone, x.Placement.Tenancy = r.AvailabilityZone, "default"
	x.SubnetID, x.VPCID, x.PrivateIPAddress, x.IPAddress = r.SubnetID, r.VPCID, r.PrivateIPv4, r.PublicIPv4
	x.Architecture, x.RootDeviceType = "x86_64", "ebs"
	if r.Role != "" {
		x.IAMInstanceProfile = &struct {
			ARN string `xml:"arn"`
			ID  string `xml:"id"`
		}{iam.InstanceProfileARN(r.AccountID, r.Role), iam.InstanceProfileID(r.Role)}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Tags)) {
		x.Tags = append(x.Tags, Tag{k, r.Tags[k]})
	}
	if r.State == "terminated" || r.State == "stopped" {
		x.Reason = "User initiated"
		x.StateReason = &struct {
			Code    string `xml:"code"`
			Message string `xml:"message"`
		}{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
	}
	var public *ec2AssociationXML
	if r.PublicIPv4 != "" {
		public = &ec2AssociationXML{PublicIP: r.PublicIPv4, PublicDNSName: r.PublicDNSName, IPOwnerID: "amazon"}
	}
	for _, n := range r.nics {
		var nic ec2NetworkInterfaceXML
		nic.NetworkInterfaceID, nic.Description, nic.Groups = n.ID, n.Description, groupSet(n.Groups)
		nic.SubnetID, nic.VPCID, nic.OwnerID, nic.Status = n.SubnetID, n.VPCID, n.OwnerID, n.Status
		nic.MACAddress, nic.SourceDestCheck, nic.InterfaceType = n.MAC, n.SourceDestCheck, n.InterfaceType
		nic.Attachment.AttachmentID, nic.Attachment.Status = n.Attachment.ID, n.Attachment.Status
		nic.Attachment.DeviceIndex, nic.Attachment.NetworkCardIndex = n.Attachment.DeviceIndex, n.Attachment.NetworkCardIndex
		nic.Attachment.AttachTime = n.Attachment.AttachTime.UTC().Format(timeFormat)
		nic.Attachment.DeleteOnTermination = n.Attachment.DeleteOnTermination
		primaryENI := n.Attachment.DeviceIndex == 0
		if primaryENI {
			nic.Association = public
		}
		for i, a := range n.PrivateIPv4s {
			ip := ec2PrivateIPXML{PrivateIPAddress: a, Primary: i == 0}
			if addr, err := netip.ParseAddr(a); err == nil {
				ip.PrivateDNSName = PrivateDNSName(addr, r.Region)
			}
			if i == 0 && primaryENI {
				ip.PrivateDNSName, ip.Association = r.PrivateDNSName, public
			}
			if i == 0 {
				nic.PrivateIPAddress, nic.PrivateDNSName = a, ip.PrivateDNSName
			}
			nic.PrivateIPs.Items = append(nic.PrivateIPs.Items, ip)
		}
		for _, a := range n.IPv6 {
			nic.IPv6Addresses.Items = append(nic.IPv6Addresses.Items, ec2IPv6XML{IPv6Address: a})
		}
		x.NetworkInterfaces.Items = append(x.NetworkInterfaces.Items, nic)
	}
	res := reservationXML{ReservationID: "r-" + suffix, OwnerID: r.AccountID}
	res.Instances.Items = []ec2InstanceXML{x}
	return res
}

// ParseIPv4 parses an IPv4 address, refusing others.
func ParseIPv4(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err == nil && !a.Is4() {
		err = fmt.Errorf("%s is not an IPv4 address", s)
	}
	return a, err
}
