package ec2

// This file holds the Describe actions of EC2's network: DescribeNetworkInterfaces,
// DescribeSubnets and DescribeInstanceTypes, with their filters and XML answers.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

// eniFilters are DescribeNetworkInterfaces' filters.
var eniFilters = map[string]func(n *NetworkInterface) []string{
	"network-interface-id": func(n *NetworkInterface) []string { return one(n.ID) },
	"subnet-id":            func(n *NetworkInterface) []string { return one(n.SubnetID) },
	"vpc-id":               func(n *NetworkInterface) []string { return one(n.VPCID) },
	"availability-zone":    func(n *NetworkInterface) []string { return one(n.AvailabilityZone) },
	"status":               func(n *NetworkInterface) []string { return one(n.Status) },
	"description":          func(n *NetworkInterface) []string { return one(n.Description) },
	"interface-type":       func(n *NetworkInterface) []string { return one(n.InterfaceType) },
	"mac-address":          func(n *NetworkInterface) []string { return one(n.MAC) },
	"owner-id":             func(n *NetworkInterface) []string { return one(n.OwnerID) },
	"requester-managed":    func(*NetworkInterface) []string { return one("false") },
	"source-dest-check":    func(n *NetworkInterface) []string { return one(strconv.FormatBool(n.SourceDestCheck)) },
	"group-id":             func(n *NetworkInterface) []string { return n.Groups },
	"private-ip-address":   func(n *NetworkInterface) []string { return n.PrivateIPv4s },
	"addresses.private-ip-address": func(n *NetworkInterface) []string {
		return n.PrivateIPv4s
	},
	"addresses.primary": func(n *NetworkInterface) []string { return []string{"true", "false"}[:min(len(n.PrivateIPv4s), 2)] },
	"attachment.instance-id": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(n.Attachment.InstanceID)
	},
	"attachment.instance-owner-id": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(n.OwnerID)
	},
	"attachment.attachment-id": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(n.Attachment.ID)
	},
	"attachment.device-index": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(strconv.Itoa(n.Attachment.DeviceIndex))
	},
	"attachment.status": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(n.Attachment.Status)
	},
	"attachment.delete-on-termination": func(n *NetworkInterface) []string {
		if n.Attachment == nil {
			return nil
		}
		return one(strconv.FormatBool(n.Attachment.DeleteOnTermination))
	},
}

var subnetFilters = map[string]func(s *subnetState, e *EC2) []string{
	"subnet-id":                  func(s *subnetState, _ *EC2) []string { return one(s.ID) },
	"vpc-id":                     func(s *subnetState, _ *EC2) []string { return one(s.VPCID) },
	"availability-zone":          func(s *subnetState, _ *EC2) []string { return one(s.AvailabilityZone) },
	"availability-zone-id":       func(s *subnetState, _ *EC2) []string { return one(zoneID(s.AvailabilityZone)) },
	"cidr-block":                 func(s *subnetState, _ *EC2) []string { return one(s.CIDR.String()) },
	"cidr":                       func(s *subnetState, _ *EC2) []string { return one(s.CIDR.String()) },
	"cidrBlock":                  func(s *subnetState, _ *EC2) []string { return one(s.CIDR.String()) },
	"state":                      func(*subnetState, *EC2) []string { return one("available") },
	"default-for-az":             func(*subnetState, *EC2) []string { return one("false") },
	"owner-id":                   func(_ *subnetState, e *EC2) []string { return one(e.AccountID) },
	"available-ip-address-count": func(s *subnetState, e *EC2) []string { return one(strconv.Itoa(e.availableAddrs(s))) },
}

// zoneID is the zone ID of a local zone name: usw2-az1 for us-west-2a.
func zoneID(zone string) string {
	region := strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
	// AWS shortens a region to its first part, its direction and its number: usw2 for
	// us-west-2, apse1 for ap-southeast-1, euc1 for eu-central-1.
	directions := map[string]string{"north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
		"northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}
	parts := strings.Split(region, "-")
	short := ""
	for i, p := range parts {
		switch d, ok := directions[p]; {
		case i == 0 || i == len(parts)-1:
			short += p
		case ok:
			short += d
		case p != "":
			short += p[:1]
		}
	}
	letter := strings.TrimPrefix(zone, region)
	if letter == "" {
		return short + "-az1"
	}
	return fmt.Sprintf("%s-az%d", short, int(letter[0]-'a')+1)
}

// ---- XML shapes

type ec2GroupXML struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type ec2TagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagSet(tags map[string]string) protocol.ItemSet[ec2TagXML] {
	var out protocol.ItemSet[ec2TagXML]
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out.Items = append(out.Items, ec2TagXML{k, tags[k]})
	}
	return out
}

type eniAttachmentXML struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId"`
	InstanceOwnerID     string `xml:"instanceOwnerId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type eniXML struct {
	NetworkInterfaceID string                            `xml:"networkInterfaceId"`
	SubnetID           string                            `xml:"subnetId"`
	VPCID              string                            `xml:"vpcId"`
	AvailabilityZone   string                            `xml:"availabilityZone"`
	AvailabilityZoneID string                            `xml:"availabilityZoneId"`
	Description        string                            `xml:"description"`
	OwnerID            string                            `xml:"ownerId"`
	RequesterManaged   bool                              `xml:"requesterManaged"`
	Status             string                            `xml:"status"`
	MACAddress         string                            `xml:"macAddress"`
	PrivateIPAddress   string                            `xml:"privateIpAddress"`
	PrivateDNSName     string                            `xml:"privateDnsName"`
	SourceDestCheck    bool                              `xml:"sourceDestCheck"`
	Groups             protocol.ItemSet[ec2GroupXML]     `xml:"groupSet"`
	Attachment         *eniAttachmentXML                 `xml:"attachment,omitempty"`
	PrivateIPs         protocol.ItemSet[ec2PrivateIPXML] `xml:"privateIpAddressesSet"`
	IPv6Addresses      protocol.ItemSet[ec2IPv6XML]      `xml:"ipv6AddressesSet"`
	Tags               protocol.ItemSet[ec2TagXML]       `xml:"tagSet"`
	InterfaceType      string                            `xml:"interfaceType"`
}

// SecurityGroupName is a security group's name: default for the VPC's default group.
func SecurityGroupName(id string) string {
	if id == DefaultSecurityGroupID {
		return "default"
	}
	return id
}

func groupSet(groups []string) protocol.ItemSet[ec2GroupXML] {
	var out protocol.ItemSet[ec2GroupXML]
	for _, g := range groups {
		out.Items = append(out.Items, ec2GroupXML{g, SecurityGroupName(g)})
	}
	return out
}

func eniToXML(n *NetworkInterface, region string) eniXML {
	x := eniXML{
		NetworkInterfaceID: n.ID, SubnetID: n.SubnetID, VPCID: n.VPCID, AvailabilityZone: n.AvailabilityZone,
		AvailabilityZoneID: zoneID(n.AvailabilityZone), Description: n.Description, OwnerID: n.OwnerID,
		Status: n.Status, MACAddress: n.MAC, SourceDestCheck: n.SourceDestCheck, Groups: groupSet(n.Groups),
		Tags: tagSet(n.Tags), InterfaceType: n.InterfaceType,
	}
	for i, a := range n.PrivateIPv4s {
		dns := ""
		if addr, err := ParseIPv4(a); err == nil {
			dns = PrivateDNSName(addr, region)
		}
		if i == 0 {
			x.PrivateIPAddress, x.PrivateDNSName = a, dns
		}
		x.PrivateIPs.Items = append(x.PrivateIPs.Items, ec2PrivateIPXML{PrivateIPAddress: a, PrivateDNSName: dns, Primary: i == 0})
	}
	for _, a := range n.IPv6 {
		x.IPv6Addresses.Items = append(x.IPv6Addresses.Items, ec2IPv6XML{IPv6Address: a})
	}
	if a := n.Attachment; a != nil {
		x.Attachment = &eniAttachmentXML{AttachmentID: a.ID, InstanceID: a.InstanceID, InstanceOwnerID: n.OwnerID,
			DeviceIndex: a.DeviceIndex, NetworkCardIndex: a.NetworkCardIndex, Status: a.Status,
			AttachTime: a.AttachTime.UTC().Format(timeFormat), DeleteOnTermination: a.DeleteOnTermination}
	}
	return x
}

type subnetXML struct {
	SubnetID                string                      `xml:"subnetId"`
	SubnetArn               string                      `xml:"subnetArn"`
	State                   string                      `xml:"state"`
	VPCID                   string                      `xml:"vpcId"`
	OwnerID                 string                      `xml:"ownerId"`
	CIDRBlock               string                      `xml:"cidrBlock"`
	AvailableIPAddressCount int                         `xml:"availableIpAddressCount"`
	AvailabilityZone        string                      `xml:"availabilityZone"`
	AvailabilityZoneID      string                      `xml:"availabilityZoneId"`
	DefaultForAz            bool                        `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool                        `xml:"mapPublicIpOnLaunch"`
	Tags                    protocol.ItemSet[ec2TagXML] `xml:"tagSet"`
}

type networkCardXML struct {
	NetworkCardIndex         int     `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance"`
	MaximumNetworkInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps"`
}

type instanceTypeXML struct {
	InstanceType      string `xml:"instanceType"`
	CurrentGeneration bool   `xml:"currentGeneration"`
	BareMetal         bool   `xml:"bareMetal"`
	Hypervisor        string `xml:"hypervisor"`
	NetworkInfo       struct {
		NetworkPerformance        string                           `xml:"networkPerformance"`
		MaximumNetworkInterfaces  int                              `xml:"maximumNetworkInterfaces"`
		MaximumNetworkCards       int                              `xml:"maximumNetworkCards"`
		DefaultNetworkCardIndex   int                              `xml:"defaultNetworkCardIndex"`
		NetworkCards              protocol.ItemSet[networkCardXML] `xml:"networkCards"`
		IPv4AddressesPerInterface int                              `xml:"ipv4AddressesPerInterface"`
		IPv6AddressesPerInterface int                              `xml:"ipv6AddressesPerInterface"`
		IPv6Supported             bool                             `xml:"ipv6Supported"`
		EnaSupport                string                           `xml:"enaSupport"`
		EfaSupported              bool                             `xml:"efaSupported"`
	} `xml:"networkInfo"`
}

func instanceTypeToXML(name string) instanceTypeXML {
	lim := typeLimits(name)
	x := instanceTypeXML{InstanceType: name, CurrentGeneration: true, BareMetal: strings.HasSuffix(name, ".metal"), Hypervisor: "nitro"}
	if x.BareMetal {
		x.Hypervisor = ""
	}
	ni := &x.NetworkInfo
	ni.NetworkPerformance, ni.MaximumNetworkInterfaces, ni.MaximumNetworkCards = "Up to 10 Gigabit", lim.ENIs, 1
	ni.NetworkCards.Items = []networkCardXML{{NetworkPerformance: "Up to 10 Gigabit", MaximumNetworkInterfaces: lim.ENIs, BaselineBandwidthInGbps: 0.75, PeakBandwidthInGbps: 10}}
	ni.IPv4AddressesPerInterface, ni.IPv6AddressesPerInterface, ni.IPv6Supported = lim.IPsPerENI, lim.IPsPerENI, true
	ni.EnaSupport = "required"
	return x
}

func (e *EC2) regionOf(zone string) string {
	return strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
}

func (e *EC2) describeNetworkInterfaces(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "NetworkInterfaceId", func(n string) bool { return eniFilters[n] != nil || isTagFilter(n) }, 5, 1000, "IncludeManagedResources")
	if aerr != nil {
		return nil, aerr
	}
	if in.Max != 0 && len(in.ids) > 0 {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	page, next, aerr := describeSet[*NetworkInterface]{
		keys:   slices.Sorted(maps.Keys(e.enis)),
		get:    func(id string) (*NetworkInterface, bool) { n, ok := e.enis[id]; return n, ok },
		tags:   func(n *NetworkInterface) map[string]string { return n.Tags },
		values: func(n *NetworkInterface, name string) []string { return eniFilters[name](n) },
		notFound: func(ids []string) *protocol.Error {
			_, aerr := e.eni(ids[0])
			return aerr
		},
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []eniXML
	for _, n := range page {
		out = append(out, eniToXML(n, e.regionOf(n.AvailabilityZone)))
	}
	return newDescribeOutput(r, "networkInterfaceSet", out, next), nil
}

func (e *EC2) describeSubnets(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "SubnetId", func(n string) bool { return subnetFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	subnets := e.zoneSubnets()
	maps.Copy(subnets, e.subnets)
	page, next, aerr := setOf(subnets, func(s *subnetState, name string) []string { return subnetFilters[name](s, e) },
		"InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist").
		withTags(func(s *subnetState) map[string]string { return s.Tags }).page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []subnetXML
	for _, s := range page {
		out = append(out, subnetXML{
			SubnetID: s.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", e.regionOf(s.AvailabilityZone), e.AccountID, s.ID),
			State: "available", VPCID: s.VPCID, OwnerID: e.AccountID, CIDRBlock: s.CIDR.String(),
			AvailableIPAddressCount: e.availableAddrs(s), AvailabilityZone: s.AvailabilityZone,
			AvailabilityZoneID: zoneID(s.AvailabilityZone), Tags: tagSet(s.Tags),
		})
	}
	return newDescribeOutput(r, "subnetSet", out, next), nil
}

// instanceTypeFilters are DescribeInstanceTypes' filters.
var instanceTypeFilters = map[string]func(name string) []string{
	"instance-type": func(name string) []string { return one(name) },
	"network-info.maximum-network-interfaces":   func(name string) []string { return one(strconv.Itoa(typeLimits(name).ENIs)) },
	"network-info.ipv4-addresses-per-interface": func(name string) []string { return one(strconv.Itoa(typeLimits(name).IPsPerENI)) },
}

func (e *EC2) describeInstanceTypes(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "InstanceType", func(n string) bool { return instanceTypeFilters[n] != nil || isTagFilter(n) }, 5, 100, "IncludeUnsupportedInRegion")
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	if in.Max == 0 && len(in.ids) == 0 {
		in.Max = 100
	}
	page, next, aerr := describeSet[string]{
		keys: instancetypes.Names(),
		get: func(name string) (string, bool) {
			_, ok := instancetypes.Lookup(name)
			return name, ok
		},
		tags:   func(string) map[string]string { return nil },
		values: func(name, filter string) []string { return instanceTypeFilters[filter](name) },
		notFound: func(names []string) *protocol.Error {
			return protocol.Errorf(http.StatusBadRequest, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(names, ", "))
		},
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []instanceTypeXML
	for _, name := range page {
		out = append(out, instanceTypeToXML(name))
	}
	return newDescribeOutput(r, "instanceTypeSet", out, next), nil
}

// isTagFilter tells whether a filter name is a tag filter (tag:KEY or tag-key), which
// every resource with tags takes.
func isTagFilter(name string) bool { return protocol.Filter{Name: name}.IsTag() }
