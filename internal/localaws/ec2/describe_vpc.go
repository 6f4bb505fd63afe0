package ec2

// This file holds the Describe actions of the local VPC: DescribeAvailabilityZones,
// DescribeVpcs and DescribeSecurityGroups (the groups and their rules are
// securitygroups.go's).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// zoneLetters are the zones of the region the local cloud uses.
var zoneLetters = []string{"a", "b", "c"}

// zoneFilters are DescribeAvailabilityZones' filters; each zone is available.
var zoneFilters = map[string]func(zone, region string) []string{
	"zone-name":     func(zone, _ string) []string { return one(zone) },
	"zone-id":       func(zone, _ string) []string { return one(zoneID(zone)) },
	"state":         func(string, string) []string { return one("available") },
	"region-name":   func(_, region string) []string { return one(region) },
	"group-name":    func(_, region string) []string { return one(region) },
	"zone-type":     func(string, string) []string { return one("availability-zone") },
	"opt-in-status": func(string, string) []string { return one("opt-in-not-required") },
}

type zoneXML struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	ZoneType           string `xml:"zoneType"`
}

func (e *EC2) describeAvailabilityZones(r *protocol.Request) (any, *protocol.Error) {
	region := e.Region
	byID := map[string]string{}
	var zones []string
	for _, l := range zoneLetters {
		zones = append(zones, region+l)
		byID[zoneID(region+l)] = region + l
	}
	zoneIDs := r.Params.StrList("ZoneId")
	in, aerr := readDescribe(r.Params, "ZoneName", func(n string) bool { return zoneFilters[n] != nil }, 0, 0, "AllAvailabilityZones")
	if aerr != nil {
		return nil, aerr
	}
	for _, id := range zoneIDs {
		name, ok := byID[id]
		if !ok {
			return nil, protocol.InvalidParameter("Invalid availability zone: [%s]", id)
		}
		if !slices.Contains(in.ids, name) {
			in.ids = append(in.ids, name)
		}
	}
	if in.dry {
		return nil, errDryRun
	}
	page, _, aerr := describeSet[string]{
		keys:   zones,
		get:    func(z string) (string, bool) { return z, slices.Contains(zones, z) },
		values: func(z, name string) []string { return zoneFilters[name](z, region) },
		notFound: func(names []string) *protocol.Error {
			return protocol.InvalidParameter("Invalid availability zone: [%s]", names[0])
		},
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []zoneXML
	for _, z := range page {
		out = append(out, zoneXML{ZoneName: z, ZoneID: zoneID(z), ZoneState: "available", RegionName: region, GroupName: region,
			NetworkBorderGroup: region, OptInStatus: "opt-in-not-required", ZoneType: "availability-zone"})
	}
	return newDescribeOutput(r, "availabilityZoneInfo", out, ""), nil
}

// vpcState is a VPC as DescribeVpcs shows it: the range that holds its subnets and
// instances, and its DHCP options.
type vpcState struct {
	id, dhcpOptionsID string
	cidr              netip.Prefix
	// secondary is ZoneRange for the local VPC, which holds the zone subnets.
	secondary netip.Prefix
}

// blocks are the VPC's ranges, the primary first.
func (v vpcState) blocks() []netip.Prefix {
	if v.secondary.IsValid() {
		return []netip.Prefix{v.cidr, v.secondary}
	}
	return []netip.Prefix{v.cidr}
}

// cover is the smallest prefix that holds every one of ps (at least one).
func cover(ps []netip.Prefix) netip.Prefix {
	c := ps[0].Masked()
	for _, p := range ps[1:] {
		p = p.Masked()
		for c.Bits() > 0 && (!c.Contains(p.Addr()) || p.Bits() < c.Bits()) {
			c, _ = c.Addr().Prefix(c.Bits() - 1)
		}
	}
	return c
}

// vpcs are the VPCs the inventory's subnets and instances are in. Locked.
func (e *EC2) vpcs() map[string]vpcState {
	out := map[string]vpcState{}
	for id, ps := range e.vpcRanges() {
		v := vpcState{id: id, cidr: cover(ps), dhcpOptionsID: "default"}
		if d := e.dhcpDomains[id]; d != "" {
			v.dhcpOptionsID = dhcpOptionsID(id, d)
		}
		if id == DefaultVPCID {
			v.secondary = ZoneRange
		}
		out[id] = v
	}
	return out
}

// vpcRanges are the ranges of the registered subnets and the instances, by VPC. Locked.
func (e *EC2) vpcRanges() map[string][]netip.Prefix {
	ranges := map[string][]netip.Prefix{}
	for _, s := range e.subnets {
		ranges[s.VPCID] = append(ranges[s.VPCID], s.CIDR)
	}
	for _, r := range e.instances {
		if r.VPCID == "" {
			continue
		}
		for _, c := range r.VPCIPv4CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
				ranges[r.VPCID] = append(ranges[r.VPCID], p)
			}
		}
		if a, err := netip.ParseAddr(r.PrivateIPv4); err == nil {
			ranges[r.VPCID] = append(ranges[r.VPCID], netip.PrefixFrom(a, 32))
		}
	}
	return ranges
}

// vpcFilters are DescribeVpcs' filters.
var vpcFilters = map[string]func(v vpcState, owner string) []string{
	"vpc-id":                                func(v vpcState, _ string) []string { return one(v.id) },
	"cidr":                                  func(v vpcState, _ string) []string { return one(v.cidr.String()) },
	"cidr-block-association.cidr-block":     func(v vpcState, _ string) []string { return prefixStrings(v.blocks()) },
	"cidr-block-association.state":          func(vpcState, string) []string { return one("associated") },
	"cidr-block-association.association-id": func(v vpcState, _ string) []string { return associationIDs(v) },
	"state":                                 func(vpcState, string) []string { return one("available") },
	"is-default":                            func(vpcState, string) []string { return one("false") },
	"owner-id":                              func(_ vpcState, owner string) []string { return one(owner) },
	"dhcp-options-id":                       func(v vpcState, _ string) []string { return one(v.dhcpOptionsID) },
}

func vpcCIDRAssociationID(vpcID string, block netip.Prefix) string {
	sum := sha256.Sum256([]byte(vpcID + "\x00" + block.String()))
	return "vpc-cidr-assoc-" + hex.EncodeToString(sum[:])[:17]
}

func associationIDs(v vpcState) []string {
	var out []string
	for _, b := range v.blocks() {
		out = append(out, vpcCIDRAssociationID(v.id, b))
	}
	return out
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

type vpcCIDRAssociationXML struct {
	AssociationID  string `xml:"associationId"`
	CIDRBlock      string `xml:"cidrBlock"`
	CIDRBlockState struct {
		State string `xml:"state"`
	} `xml:"cidrBlockState"`
}

type vpcXML struct {
	VPCID           string                                  `xml:"vpcId"`
	OwnerID         string                                  `xml:"ownerId"`
	State           string                                  `xml:"state"`
	CIDRBlock       string                                  `xml:"cidrBlock"`
	Associations    protocol.ItemSet[vpcCIDRAssociationXML] `xml:"cidrBlockAssociationSet"`
	DhcpOptionsID   string                                  `xml:"dhcpOptionsId"`
	InstanceTenancy string                                  `xml:"instanceTenancy"`
	IsDefault       bool                                    `xml:"isDefault"`
}

func (e *EC2) describeVpcs(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "VpcId", func(n string) bool { return vpcFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	vpcs := e.vpcs()
	e.mu.Unlock()
	page, next, aerr := setOf(vpcs, func(v vpcState, name string) []string { return vpcFilters[name](v, e.AccountID) },
		"InvalidVpcID.NotFound", "The vpc ID '%s' does not exist").page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []vpcXML
	for _, v := range page {
		var as []vpcCIDRAssociationXML
		for _, b := range v.blocks() {
			a := vpcCIDRAssociationXML{AssociationID: vpcCIDRAssociationID(v.id, b), CIDRBlock: b.String()}
			a.CIDRBlockState.State = "associated"
			as = append(as, a)
		}
		out = append(out, vpcXML{VPCID: v.id, OwnerID: e.AccountID, State: "available", CIDRBlock: v.cidr.String(),
			Associations:  protocol.ItemSet[vpcCIDRAssociationXML]{Items: as},
			DhcpOptionsID: v.dhcpOptionsID, InstanceTenancy: "default"})
	}
	return newDescribeOutput(r, "vpcSet", out, next), nil
}

// sgView is a security group with its rules, as DescribeSecurityGroups shows it.
type sgView struct {
	securityGroup
	rules []sgRule
}

// permissionValues are the values of a group's ip-permission.* (egress: egress.ip-permission.*)
// filters.
func (g sgView) permissionValues(egress bool, field string) []string {
	var out []string
	for _, r := range g.rules {
		if r.egress != egress {
			continue
		}
		v := map[string]string{"cidr": r.cidr, "ipv6-cidr": r.cidrV6, "prefix-list-id": r.prefixList, "group-id": r.referencedGroup,
			"protocol": r.protocol, "from-port": strconv.Itoa(r.from), "to-port": strconv.Itoa(r.to)}[field]
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

var sgFilters = map[string]func(g sgView, owner string) []string{
	"group-id":    func(g sgView, _ string) []string { return one(g.id) },
	"group-name":  func(g sgView, _ string) []string { return one(g.name) },
	"vpc-id":      func(g sgView, _ string) []string { return one(g.vpcID) },
	"description": func(g sgView, _ string) []string { return one(g.description) },
	"owner-id":    func(_ sgView, owner string) []string { return one(owner) },
}

func init() {
	for _, field := range []string{"cidr", "ipv6-cidr", "prefix-list-id", "group-id", "protocol", "from-port", "to-port"} {
		sgFilters["ip-permission."+field] = func(g sgView, _ string) []string { return g.permissionValues(false, field) }
		sgFilters["egress.ip-permission."+field] = func(g sgView, _ string) []string { return g.permissionValues(true, field) }
	}
}

type sgPairXML struct {
	UserID      string `xml:"userId"`
	GroupID     string `xml:"groupId"`
	Description string `xml:"description,omitempty"`
}

type ipRangeXML struct {
	CIDRIP      string `xml:"cidrIp"`
	Description string `xml:"description,omitempty"`
}

type ipv6RangeXML struct {
	CIDRIPv6    string `xml:"cidrIpv6"`
	Description string `xml:"description,omitempty"`
}

type prefixListXML struct {
	PrefixListID string `xml:"prefixListId"`
	Description  string `xml:"description,omitempty"`
}

type ipPermissionXML struct {
	IPProtocol    string                          `xml:"ipProtocol"`
	FromPort      *int                            `xml:"fromPort,omitempty"`
	ToPort        *int                            `xml:"toPort,omitempty"`
	Groups        protocol.ItemSet[sgPairXML]     `xml:"groups"`
	IPRanges      protocol.ItemSet[ipRangeXML]    `xml:"ipRanges"`
	IPv6Ranges    protocol.ItemSet[ipv6RangeXML]  `xml:"ipv6Ranges"`
	PrefixListIDs protocol.ItemSet[prefixListXML] `xml:"prefixListIds"`
}

type securityGroupXML struct {
	OwnerID     string                            `xml:"ownerId"`
	GroupID     string                            `xml:"groupId"`
	GroupName   string                            `xml:"groupName"`
	Description string                            `xml:"groupDescription"`
	VPCID       string                            `xml:"vpcId"`
	ARN         string                            `xml:"securityGroupArn"`
	Ingress     protocol.ItemSet[ipPermissionXML] `xml:"ipPermissions"`
	Egress      protocol.ItemSet[ipPermissionXML] `xml:"ipPermissionsEgress"`
	Tags        protocol.ItemSet[ec2TagXML]       `xml:"tagSet"`
}

// permissions groups a direction's rules by protocol and port range, in the order the
// rules were made, as EC2 answers IpPermissions.
func permissions(rules []sgRule, egress bool, owner string) []ipPermissionXML {
	var out []ipPermissionXML
	index := map[string]int{}
	for _, r := range rules {
		if r.egress != egress {
			continue
		}
		key := fmt.Sprintf("%s/%d/%d", r.protocol, r.from, r.to)
		k, ok := index[key]
		if !ok {
			p := ipPermissionXML{IPProtocol: r.protocol}
			if r.protocol != "-1" {
				from, to := r.from, r.to
				p.FromPort, p.ToPort = &from, &to
			}
			k, index[key] = len(out), len(out)
			out = append(out, p)
		}
		p := &out[k]
		switch {
		case r.cidr != "":
			p.IPRanges.Items = append(p.IPRanges.Items, ipRangeXML{r.cidr, r.description})
		case r.cidrV6 != "":
			p.IPv6Ranges.Items = append(p.IPv6Ranges.Items, ipv6RangeXML{r.cidrV6, r.description})
		case r.prefixList != "":
			p.PrefixListIDs.Items = append(p.PrefixListIDs.Items, prefixListXML{r.prefixList, r.description})
		case r.referencedGroup != "":
			p.Groups.Items = append(p.Groups.Items, sgPairXML{owner, r.referencedGroup, r.description})
		}
	}
	return out
}

// sgViews are the security groups with their rules. Locked.
func (e *EC2) sgViews() map[string]sgView {
	out := map[string]sgView{}
	for id, g := range e.groups {
		v := sgView{securityGroup: *g}
		v.tags = maps.Clone(g.tags)
		for _, r := range e.groupRules(id) {
			v.rules = append(v.rules, *r)
		}
		out[id] = v
	}
	return out
}

func (e *EC2) describeSecurityGroups(r *protocol.Request) (any, *protocol.Error) {
	names := r.Params.StrList("GroupName")
	in, aerr := readDescribe(r.Params, "GroupId", func(n string) bool { return sgFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	e.mu.Lock()
	groups := e.sgViews()
	for _, n := range names {
		g := e.groupNamed(n, "")
		if g == nil {
			e.mu.Unlock()
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, DefaultVPCID)
		}
		if !slices.Contains(in.ids, g.id) {
			in.ids = append(in.ids, g.id)
		}
	}
	e.mu.Unlock()
	if in.dry {
		return nil, errDryRun
	}
	page, next, aerr := setOf(groups, func(g sgView, name string) []string { return sgFilters[name](g, e.AccountID) },
		"InvalidGroup.NotFound", "The security group '%s' does not exist").withTags(func(g sgView) map[string]string { return g.tags }).page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []securityGroupXML
	for _, g := range page {
		x := securityGroupXML{OwnerID: e.AccountID, GroupID: g.id, GroupName: g.name, Description: g.description, VPCID: g.vpcID,
			ARN: e.groupARN(g.id), Tags: tagSet(g.tags)}
		x.Ingress.Items = permissions(g.rules, false, e.AccountID)
		x.Egress.Items = permissions(g.rules, true, e.AccountID)
		out = append(out, x)
	}
	return newDescribeOutput(r, "securityGroupInfo", out, next), nil
}
