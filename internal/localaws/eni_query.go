package localaws

// This file holds the EC2 Query protocol of the network operations: their parameters
// (flat, renamed lists such as PrivateIpAddress.N and SecurityGroupId.N), filters and
// pagination, and their XML answers.

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

const ec2Xmlns = "http://ec2.amazonaws.com/doc/2016-11-15/"

// params reads a Query request's parameters, remembering which were read, so that any
// other one is refused as unknown.
type params struct {
	form url.Values
	used map[string]bool
}

func newParams(form url.Values) *params {
	return &params{form: form, used: map[string]bool{"Action": true, "Version": true}}
}

func (p *params) str(key string) (string, bool) {
	v, ok := p.form[key]
	if !ok {
		return "", false
	}
	p.used[key] = true
	return v[0], true
}

func (p *params) integer(key string) (int, bool, *apiError) {
	v, ok := p.str(key)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, invalidParameter("Value (%s) for parameter %s is invalid. Expected an integer.", v, key)
	}
	return n, true, nil
}

func (p *params) boolean(key string) (*bool, *apiError) {
	v, ok := p.str(key)
	if !ok {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, invalidParameter("Value (%s) for parameter %s is invalid.", v, key)
	}
	return &b, nil
}

// list reads prefix.N values in index order.
func (p *params) list(prefix string) []string {
	m := map[int]string{}
	for k, v := range p.form {
		if rest, ok := strings.CutPrefix(k, prefix+"."); ok {
			if n, ok := listIndex(rest); ok {
				m[n] = v[0]
				p.used[k] = true
			}
		}
	}
	return valuesInOrder(m)
}

// structs groups prefix.N.Member keys by N, in index order.
func (p *params) structs(prefix string) []map[string]string {
	m := map[int]map[string]string{}
	for k, v := range p.form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		idx, member, ok := strings.Cut(rest, ".")
		n, iok := listIndex(idx)
		if !ok || !iok {
			continue
		}
		if m[n] == nil {
			m[n] = map[string]string{}
		}
		m[n][member] = v[0]
		p.used[k] = true
	}
	return valuesInOrder(m)
}

// finish refuses parameters nobody read, and a dry run.
func (p *params) finish() *apiError {
	for _, k := range slices.Sorted(maps.Keys(p.form)) {
		if !p.used[k] {
			return &apiError{http.StatusBadRequest, "UnknownParameter", fmt.Sprintf("The parameter %s is not recognized", k)}
		}
	}
	return nil
}

// dryRun reads DryRun: set, the request is refused with DryRunOperation once checked.
func (p *params) dryRun() (bool, *apiError) {
	b, aerr := p.boolean("DryRun")
	return b != nil && *b, aerr
}

var dryRunError = &apiError{http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."}

// filters reads Filter.N.Name / Filter.N.Value.M against the known filter names
// (tag:KEY is always known).
func (p *params) filters(known func(string) bool) ([]ec2Filter, *apiError) {
	var out []ec2Filter
	for _, f := range p.structs("Filter") {
		name, ok := f["Name"]
		if !ok {
			return nil, invalidParameter("The filter 'null' is invalid")
		}
		if !known(name) && !strings.HasPrefix(name, "tag:") {
			return nil, invalidParameter("The filter '%s' is invalid", name)
		}
		vals := map[int]string{}
		for k, v := range f {
			if idx, ok := strings.CutPrefix(k, "Value."); ok {
				if n, ok := listIndex(idx); ok {
					vals[n] = v
					continue
				}
			}
			if k != "Name" {
				return nil, &apiError{http.StatusBadRequest, "UnknownParameter", fmt.Sprintf("The parameter Filter.N.%s is not recognized", k)}
			}
		}
		if len(vals) == 0 {
			return nil, invalidParameter("The filter '%s' has no values", name)
		}
		out = append(out, newEC2Filter(name, valuesInOrder(vals)))
	}
	return out, nil
}

// describeRequest is what every Describe* operation reads first.
type describeRequest struct {
	dry        bool
	ids        []string
	filters    []ec2Filter
	maxResults int
	after      string
}

// describe reads a Describe* operation's parameters: DryRun, the IDs under idParam
// (idParam.N), Filter.N (known names the filters it has), the page (MaxResults up to
// maxPage, NextToken) and the boolean flags it accepts but does not act on; any other
// parameter is refused.
func (p *params) describe(idParam string, known func(string) bool, maxPage int, flags ...string) (describeRequest, *apiError) {
	var r describeRequest
	var aerr *apiError
	if r.dry, aerr = p.dryRun(); aerr != nil {
		return r, aerr
	}
	r.ids = p.list(idParam)
	if r.filters, aerr = p.filters(known); aerr != nil {
		return r, aerr
	}
	if r.maxResults, r.after, aerr = p.page(maxPage); aerr != nil {
		return r, aerr
	}
	for _, f := range flags {
		if _, aerr := p.boolean(f); aerr != nil {
			return r, aerr
		}
	}
	return r, p.finish()
}

// page reads MaxResults (5, EC2's smallest page, to hi) and NextToken (an opaque key
// after which to go on).
func (p *params) page(hi int) (maxResults int, after string, aerr *apiError) {
	const lo = 5
	n, ok, aerr := p.integer("MaxResults")
	if aerr != nil {
		return 0, "", aerr
	}
	if ok && (n < lo || n > hi) {
		return 0, "", invalidParameter("Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", n, lo, hi)
	}
	if tok, ok := p.str("NextToken"); ok {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) == 0 {
			return 0, "", invalidParameter("Invalid value '%s' for nextToken", tok)
		}
		after = string(raw)
	}
	return n, after, nil
}

// paginate returns the keys after `after`, at most max (0: all), and the next token.
func paginate(keys []string, after string, maxResults int) ([]string, string) {
	var out []string
	for i, k := range keys {
		if after != "" && k <= after {
			continue
		}
		out = append(out, k)
		if maxResults > 0 && len(out) == maxResults && i < len(keys)-1 {
			return out, base64.RawURLEncoding.EncodeToString([]byte(k))
		}
	}
	return out, ""
}

func tagsMatch(tags map[string]string, f ec2Filter) (bool, bool) {
	if key, ok := strings.CutPrefix(f.name, "tag:"); ok {
		v, has := tags[key]
		return has && f.accepts(v), true
	}
	if f.name == "tag-key" {
		for k := range tags {
			if f.accepts(k) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

func matchAny(f ec2Filter, have []string) bool {
	return slices.ContainsFunc(have, f.accepts)
}

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

// matchesAll reports whether an object matches every filter: tag filters against its
// tags, the others against the values valuesOf gives for the filter's name.
func matchesAll(filters []ec2Filter, tags map[string]string, valuesOf func(name string) []string) bool {
	for _, f := range filters {
		if m, isTag := tagsMatch(tags, f); isTag {
			if !m {
				return false
			}
		} else if !matchAny(f, valuesOf(f.name)) {
			return false
		}
	}
	return true
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
	parts := strings.Split(region, "-")
	short := ""
	for i, p := range parts {
		if i == len(parts)-1 {
			short += p
		} else if p != "" {
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

func tagSet(tags map[string]string) itemSet[ec2TagXML] {
	var out itemSet[ec2TagXML]
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
	NetworkInterfaceID string                   `xml:"networkInterfaceId"`
	SubnetID           string                   `xml:"subnetId"`
	VPCID              string                   `xml:"vpcId"`
	AvailabilityZone   string                   `xml:"availabilityZone"`
	AvailabilityZoneID string                   `xml:"availabilityZoneId"`
	Description        string                   `xml:"description"`
	OwnerID            string                   `xml:"ownerId"`
	RequesterManaged   bool                     `xml:"requesterManaged"`
	Status             string                   `xml:"status"`
	MACAddress         string                   `xml:"macAddress"`
	PrivateIPAddress   string                   `xml:"privateIpAddress"`
	PrivateDNSName     string                   `xml:"privateDnsName"`
	SourceDestCheck    bool                     `xml:"sourceDestCheck"`
	Groups             itemSet[ec2GroupXML]     `xml:"groupSet"`
	Attachment         *eniAttachmentXML        `xml:"attachment,omitempty"`
	PrivateIPs         itemSet[ec2PrivateIPXML] `xml:"privateIpAddressesSet"`
	IPv6Addresses      itemSet[ec2IPv6XML]      `xml:"ipv6AddressesSet"`
	Tags               itemSet[ec2TagXML]       `xml:"tagSet"`
	InterfaceType      string                   `xml:"interfaceType"`
}

func groupSet(groups []string) itemSet[ec2GroupXML] {
	var out itemSet[ec2GroupXML]
	for _, g := range groups {
		name := g
		if g == DefaultSecurityGroupID {
			name = "default"
		}
		out.Items = append(out.Items, ec2GroupXML{g, name})
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
		if addr, err := parseIPv4(a); err == nil {
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
			AttachTime: a.AttachTime.UTC().Format(ec2TimeFormat), DeleteOnTermination: a.DeleteOnTermination}
	}
	return x
}

type subnetXML struct {
	SubnetID                string             `xml:"subnetId"`
	SubnetArn               string             `xml:"subnetArn"`
	State                   string             `xml:"state"`
	VPCID                   string             `xml:"vpcId"`
	OwnerID                 string             `xml:"ownerId"`
	CIDRBlock               string             `xml:"cidrBlock"`
	AvailableIPAddressCount int                `xml:"availableIpAddressCount"`
	AvailabilityZone        string             `xml:"availabilityZone"`
	AvailabilityZoneID      string             `xml:"availabilityZoneId"`
	DefaultForAz            bool               `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool               `xml:"mapPublicIpOnLaunch"`
	Tags                    itemSet[ec2TagXML] `xml:"tagSet"`
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
		NetworkPerformance        string                  `xml:"networkPerformance"`
		MaximumNetworkInterfaces  int                     `xml:"maximumNetworkInterfaces"`
		MaximumNetworkCards       int                     `xml:"maximumNetworkCards"`
		DefaultNetworkCardIndex   int                     `xml:"defaultNetworkCardIndex"`
		NetworkCards              itemSet[networkCardXML] `xml:"networkCards"`
		IPv4AddressesPerInterface int                     `xml:"ipv4AddressesPerInterface"`
		IPv6AddressesPerInterface int                     `xml:"ipv6AddressesPerInterface"`
		IPv6Supported             bool                    `xml:"ipv6Supported"`
		EnaSupport                string                  `xml:"enaSupport"`
		EfaSupported              bool                    `xml:"efaSupported"`
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

// ---- handlers: each parses, acts, and answers with the operation's document.

type ec2Op func(ctx context.Context, p *params, reqID string) (any, *apiError)

func (e *EC2) ops() map[string]ec2Op {
	return map[string]ec2Op{
		"DescribeNetworkInterfaces":       e.opDescribeNetworkInterfaces,
		"CreateNetworkInterface":          e.opCreateNetworkInterface,
		"DeleteNetworkInterface":          e.opDeleteNetworkInterface,
		"AttachNetworkInterface":          e.opAttachNetworkInterface,
		"DetachNetworkInterface":          e.opDetachNetworkInterface,
		"AssignPrivateIpAddresses":        e.opAssignPrivateIPs,
		"UnassignPrivateIpAddresses":      e.opUnassignPrivateIPs,
		"ModifyNetworkInterfaceAttribute": e.opModifyNetworkInterfaceAttribute,
		"CreateTags":                      e.opCreateTags,
		"DescribeSubnets":                 e.opDescribeSubnets,
		"DescribeInstanceTypes":           e.opDescribeInstanceTypes,
		"DescribeDhcpOptions":             e.opDescribeDhcpOptions,
	}
}

// returnResponse is the answer of operations whose output has no fields.
type returnResponse struct {
	XMLName   xml.Name
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

func returned(op, reqID string) returnResponse {
	return returnResponse{XMLName: xml.Name{Local: op + "Response"}, Xmlns: ec2Xmlns, RequestID: reqID, Return: true}
}

func (e *EC2) opDescribeNetworkInterfaces(_ context.Context, p *params, reqID string) (any, *apiError) {
	req, aerr := p.describe("NetworkInterfaceId", func(n string) bool { return eniFilters[n] != nil }, 1000, "IncludeManagedResources")
	if aerr != nil {
		return nil, aerr
	}
	dry, ids, filters, maxResults, after := req.dry, req.ids, req.filters, req.maxResults, req.after
	if maxResults != 0 && len(ids) > 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults"}
	}
	if dry {
		return nil, dryRunError
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := ids
	if len(ids) > 0 {
		for _, id := range ids {
			if _, aerr := e.eni(id); aerr != nil {
				return nil, aerr
			}
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
	} else {
		keys = slices.Sorted(maps.Keys(e.enis))
	}
	var matching []string
	for _, id := range keys {
		n := e.enis[id]
		if matchesAll(filters, n.Tags, func(name string) []string { return eniFilters[name](n) }) {
			matching = append(matching, id)
		}
	}
	page, next := paginate(matching, after, maxResults)
	out := struct {
		XMLName   xml.Name        `xml:"DescribeNetworkInterfacesResponse"`
		Xmlns     string          `xml:"xmlns,attr"`
		RequestID string          `xml:"requestId"`
		Set       itemSet[eniXML] `xml:"networkInterfaceSet"`
		NextToken string          `xml:"nextToken,omitempty"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, NextToken: next}
	for _, id := range page {
		out.Set.Items = append(out.Set.Items, eniToXML(e.enis[id], e.regionOf(e.enis[id].AvailabilityZone)))
	}
	return out, nil
}

func (e *EC2) regionOf(zone string) string {
	return strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
}

//nolint:gocyclo // one independent read per optional query parameter.
func (e *EC2) opCreateNetworkInterface(_ context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	var req createENIRequest
	req.subnetID, _ = p.str("SubnetId")
	req.description, _ = p.str("Description")
	req.interfaceType, _ = p.str("InterfaceType")
	req.groups = p.list("SecurityGroupId")
	req.primary, _ = p.str("PrivateIpAddress")
	req.token, _ = p.str("ClientToken")
	count, hasCount, aerr := p.integer("SecondaryPrivateIpAddressCount")
	if aerr != nil {
		return nil, aerr
	}
	specs := p.structs("PrivateIpAddresses")
	for _, s := range specs {
		primary, _ := strconv.ParseBool(s["Primary"])
		a := s["PrivateIpAddress"]
		switch {
		case primary && req.primary != "" && req.primary != a:
			return nil, invalidParameter("Only one primary private IP address can be specified")
		case primary:
			req.primary = a
		default:
			req.secondaries = append(req.secondaries, a)
		}
	}
	req.tags = map[string]string{}
	for _, ts := range p.structs("TagSpecification") {
		if rt := ts["ResourceType"]; rt != "network-interface" {
			return nil, invalidParameter("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		for k, v := range ts {
			rest, ok := strings.CutPrefix(k, "Tag.")
			if !ok {
				continue
			}
			idx, member, _ := strings.Cut(rest, ".")
			if member == "Key" {
				req.tags[v] = ts["Tag."+idx+".Value"]
			}
		}
	}
	for _, unsupported := range []string{"Ipv4PrefixCount", "Ipv6AddressCount", "Ipv6PrefixCount"} {
		if v, ok := p.str(unsupported); ok && v != "0" {
			return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("%s is not supported by the local cloud", unsupported)}
		}
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if req.subnetID == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter subnetId"}
	}
	if hasCount && len(req.secondaries) > 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "SecondaryPrivateIpAddressCount cannot be specified together with secondary addresses in PrivateIpAddresses"}
	}
	if count < 0 {
		return nil, invalidParameter("Value (%d) for parameter SecondaryPrivateIpAddressCount is invalid.", count)
	}
	req.count = count
	if dry {
		return nil, dryRunError
	}
	// The idempotency key: every parameter but the token.
	var key []string
	for k, v := range p.form {
		if k != "ClientToken" {
			key = append(key, k+"="+v[0])
		}
	}
	slices.Sort(key)
	req.key = strings.Join(key, "&")
	n, aerr := e.createNetworkInterface(req)
	if aerr != nil {
		return nil, aerr
	}
	return struct {
		XMLName     xml.Name `xml:"CreateNetworkInterfaceResponse"`
		Xmlns       string   `xml:"xmlns,attr"`
		RequestID   string   `xml:"requestId"`
		NIC         eniXML   `xml:"networkInterface"`
		ClientToken string   `xml:"clientToken,omitempty"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, NIC: eniToXML(&n, e.regionOf(n.AvailabilityZone)), ClientToken: req.token}, nil
}

// required reads a parameter that must be there.
func (p *params) required(key string) (string, *apiError) {
	v, ok := p.str(key)
	if !ok || v == "" {
		return "", &apiError{http.StatusBadRequest, "MissingParameter", fmt.Sprintf("The request must contain the parameter %s", key)}
	}
	return v, nil
}

func (e *EC2) opDeleteNetworkInterface(_ context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.required("NetworkInterfaceId")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, dryRunError
	}
	if aerr := e.deleteNetworkInterface(id); aerr != nil {
		return nil, aerr
	}
	return returned("DeleteNetworkInterface", reqID), nil
}

func (e *EC2) opAttachNetworkInterface(ctx context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	var req attachRequest
	if req.instanceID, aerr = p.required("InstanceId"); aerr != nil {
		return nil, aerr
	}
	if req.eniID, aerr = p.required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	if _, aerr := p.required("DeviceIndex"); aerr != nil {
		return nil, aerr
	}
	delete(p.used, "DeviceIndex")
	idx, _, aerr := p.integer("DeviceIndex")
	if aerr != nil {
		return nil, aerr
	}
	card, _, aerr := p.integer("NetworkCardIndex")
	if aerr != nil {
		return nil, aerr
	}
	if _, _, aerr := p.integer("EnaQueueCount"); aerr != nil {
		return nil, aerr
	}
	p.structs("EnaSrdSpecification") // accepted and ignored: no ENA Express here
	for k := range p.form {
		if strings.HasPrefix(k, "EnaSrdSpecification.") {
			p.used[k] = true
		}
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if idx < 0 || idx > 100 {
		return nil, invalidParameter("Invalid value '%d' for deviceIndex", idx)
	}
	if dry {
		return nil, dryRunError
	}
	req.deviceIndex, req.networkCard = idx, card
	att, aerr := e.attachNetworkInterface(ctx, req)
	if aerr != nil {
		return nil, aerr
	}
	return struct {
		XMLName          xml.Name `xml:"AttachNetworkInterfaceResponse"`
		Xmlns            string   `xml:"xmlns,attr"`
		RequestID        string   `xml:"requestId"`
		AttachmentID     string   `xml:"attachmentId"`
		NetworkCardIndex int      `xml:"networkCardIndex"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, AttachmentID: att}, nil
}

func (e *EC2) opDetachNetworkInterface(ctx context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.required("AttachmentId")
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := p.boolean("Force"); aerr != nil {
		return nil, aerr
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, dryRunError
	}
	if aerr := e.detachNetworkInterface(ctx, id); aerr != nil {
		return nil, aerr
	}
	return returned("DetachNetworkInterface", reqID), nil
}

func (e *EC2) opAssignPrivateIPs(ctx context.Context, p *params, reqID string) (any, *apiError) {
	var req assignRequest
	var aerr *apiError
	if req.eniID, aerr = p.required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	count, hasCount, aerr := p.integer("SecondaryPrivateIpAddressCount")
	if aerr != nil {
		return nil, aerr
	}
	req.addrs = p.list("PrivateIpAddress")
	allow, aerr := p.boolean("AllowReassignment")
	if aerr != nil {
		return nil, aerr
	}
	req.allowReassign = allow != nil && *allow
	for _, unsupported := range []string{"Ipv4PrefixCount"} {
		if _, ok := p.str(unsupported); ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", "IPv4 prefixes are not supported by the local cloud"}
		}
	}
	if len(p.list("Ipv4Prefix")) > 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", "IPv4 prefixes are not supported by the local cloud"}
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	switch {
	case hasCount && len(req.addrs) > 0:
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "The parameters secondaryPrivateIpAddressCount and privateIpAddress cannot be used together"}
	case !hasCount && len(req.addrs) == 0:
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "Either secondaryPrivateIpAddressCount or privateIpAddress must be specified"}
	case hasCount && count < 1:
		return nil, invalidParameter("Value (%d) for parameter secondaryPrivateIpAddressCount is invalid. Expected a positive number.", count)
	}
	req.count = count
	added, aerr := e.assignPrivateIPs(ctx, req)
	if aerr != nil {
		return nil, aerr
	}
	type assigned struct {
		PrivateIPAddress string `xml:"privateIpAddress"`
	}
	out := struct {
		XMLName   xml.Name          `xml:"AssignPrivateIpAddressesResponse"`
		Xmlns     string            `xml:"xmlns,attr"`
		RequestID string            `xml:"requestId"`
		ENIID     string            `xml:"networkInterfaceId"`
		Assigned  itemSet[assigned] `xml:"assignedPrivateIpAddressesSet"`
		Return    bool              `xml:"return"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, ENIID: req.eniID, Return: true}
	for _, a := range added {
		out.Assigned.Items = append(out.Assigned.Items, assigned{a})
	}
	return out, nil
}

func (e *EC2) opUnassignPrivateIPs(ctx context.Context, p *params, reqID string) (any, *apiError) {
	id, aerr := p.required("NetworkInterfaceId")
	if aerr != nil {
		return nil, aerr
	}
	addrs := p.list("PrivateIpAddress")
	if len(p.list("Ipv4Prefix")) > 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", "IPv4 prefixes are not supported by the local cloud"}
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if aerr := e.unassignPrivateIPs(ctx, id, addrs); aerr != nil {
		return nil, aerr
	}
	return returned("UnassignPrivateIpAddresses", reqID), nil
}

func (e *EC2) opModifyNetworkInterfaceAttribute(_ context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	req := modifyENIRequest{}
	if req.eniID, aerr = p.required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	if _, ok := p.form["Attachment.AttachmentId"]; ok {
		req.attachmentID, _ = p.str("Attachment.AttachmentId")
		if req.deleteOnTermination, aerr = p.boolean("Attachment.DeleteOnTermination"); aerr != nil {
			return nil, aerr
		}
		if req.deleteOnTermination == nil {
			return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter Attachment.DeleteOnTermination"}
		}
	}
	if req.sourceDestCheck, aerr = p.boolean("SourceDestCheck.Value"); aerr != nil {
		return nil, aerr
	}
	if d, ok := p.str("Description.Value"); ok {
		req.description = &d
	}
	if groups := p.list("SecurityGroupId"); len(groups) > 0 {
		req.groups, req.setGroups = groups, true
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, dryRunError
	}
	if aerr := e.modifyNetworkInterface(req); aerr != nil {
		return nil, aerr
	}
	return returned("ModifyNetworkInterfaceAttribute", reqID), nil
}

func (e *EC2) opCreateTags(_ context.Context, p *params, reqID string) (any, *apiError) {
	dry, aerr := p.dryRun()
	if aerr != nil {
		return nil, aerr
	}
	ids := p.list("ResourceId")
	tags := map[string]string{}
	for _, t := range p.structs("Tag") {
		k, ok := t["Key"]
		if !ok || k == "" {
			return nil, invalidParameter("Tag keys must not be empty")
		}
		tags[k] = t["Value"]
	}
	if aerr := p.finish(); aerr != nil {
		return nil, aerr
	}
	if len(ids) == 0 {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter resourceIdSet"}
	}
	if dry {
		return nil, dryRunError
	}
	if aerr := e.createTags(ids, tags); aerr != nil {
		return nil, aerr
	}
	return returned("CreateTags", reqID), nil
}

func (e *EC2) opDescribeSubnets(_ context.Context, p *params, reqID string) (any, *apiError) {
	req, aerr := p.describe("SubnetId", func(n string) bool { return subnetFilters[n] != nil }, 1000)
	if aerr != nil {
		return nil, aerr
	}
	dry, ids, filters, maxResults, after := req.dry, req.ids, req.filters, req.maxResults, req.after
	if dry {
		return nil, dryRunError
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := slices.Sorted(maps.Keys(e.subnets))
	if len(ids) > 0 {
		for _, id := range ids {
			if e.subnets[id] == nil {
				return nil, &apiError{http.StatusBadRequest, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", id)}
			}
		}
		keys = slices.Compact(slices.Sorted(slices.Values(ids)))
	}
	var matching []string
	for _, id := range keys {
		s := e.subnets[id]
		if matchesAll(filters, s.Tags, func(name string) []string { return subnetFilters[name](s, e) }) {
			matching = append(matching, id)
		}
	}
	page, next := paginate(matching, after, maxResults)
	out := struct {
		XMLName   xml.Name           `xml:"DescribeSubnetsResponse"`
		Xmlns     string             `xml:"xmlns,attr"`
		RequestID string             `xml:"requestId"`
		Set       itemSet[subnetXML] `xml:"subnetSet"`
		NextToken string             `xml:"nextToken,omitempty"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, NextToken: next}
	for _, id := range page {
		s := e.subnets[id]
		out.Set.Items = append(out.Set.Items, subnetXML{
			SubnetID: s.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", e.regionOf(s.AvailabilityZone), e.AccountID, s.ID),
			State: "available", VPCID: s.VPCID, OwnerID: e.AccountID, CIDRBlock: s.CIDR.String(),
			AvailableIPAddressCount: e.availableAddrs(s), AvailabilityZone: s.AvailabilityZone,
			AvailabilityZoneID: zoneID(s.AvailabilityZone), Tags: tagSet(s.Tags),
		})
	}
	return out, nil
}

func (e *EC2) opDescribeInstanceTypes(_ context.Context, p *params, reqID string) (any, *apiError) {
	req, aerr := p.describe("InstanceType", func(n string) bool {
		return n == "instance-type" || n == "network-info.maximum-network-interfaces" || n == "network-info.ipv4-addresses-per-interface"
	}, 100, "IncludeUnsupportedInRegion")
	if aerr != nil {
		return nil, aerr
	}
	dry, names, filters, maxResults, after := req.dry, req.ids, req.filters, req.maxResults, req.after
	if dry {
		return nil, dryRunError
	}
	var unknown []string
	for _, n := range names {
		if _, ok := instancetypes.Lookup(n); !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidInstanceType", fmt.Sprintf("The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))}
	}
	keys := slices.Compact(slices.Sorted(slices.Values(names)))
	if len(names) == 0 {
		keys = instancetypes.Names()
	}
	var matching []string
	for _, k := range keys {
		lim := typeLimits(k)
		ok := true
		for _, f := range filters {
			var have string
			switch f.name {
			case "instance-type":
				have = k
			case "network-info.maximum-network-interfaces":
				have = strconv.Itoa(lim.ENIs)
			case "network-info.ipv4-addresses-per-interface":
				have = strconv.Itoa(lim.IPsPerENI)
			default: // tag filters: instance types have no tags
				ok = false
			}
			ok = ok && matchAny(f, one(have))
		}
		if ok {
			matching = append(matching, k)
		}
	}
	if maxResults == 0 && len(names) == 0 {
		maxResults = 100
	}
	page, next := paginate(matching, after, maxResults)
	out := struct {
		XMLName   xml.Name                 `xml:"DescribeInstanceTypesResponse"`
		Xmlns     string                   `xml:"xmlns,attr"`
		RequestID string                   `xml:"requestId"`
		Set       itemSet[instanceTypeXML] `xml:"instanceTypeSet"`
		NextToken string                   `xml:"nextToken,omitempty"`
	}{Xmlns: ec2Xmlns, RequestID: reqID, NextToken: next}
	for _, k := range page {
		out.Set.Items = append(out.Set.Items, instanceTypeToXML(k))
	}
	return out, nil
}
