package ec2

// This file holds the actions on network interfaces and their addresses: each reads its
// parameters, acts on the model (network.go) and answers.

import (
	"encoding/xml"
	"net/http"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// intParam reads an integer parameter: its value, and whether it was given.
func intParam(p *protocol.Params, name string) (int, bool, *protocol.Error) {
	v, aerr := p.Int(name)
	if aerr != nil || v == nil {
		return 0, false, aerr
	}
	return int(*v), true, nil
}

//nolint:gocyclo // one independent read per optional query parameter.
func (e *EC2) createNetworkInterfaceAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	var req createENIRequest
	req.subnetID, _ = p.Str("SubnetId")
	req.description, _ = p.Str("Description")
	req.interfaceType, _ = p.Str("InterfaceType")
	req.groups = p.StrList("SecurityGroupId")
	req.primary, _ = p.Str("PrivateIpAddress")
	req.token, _ = p.Str("ClientToken")
	count, hasCount, aerr := intParam(p, "SecondaryPrivateIpAddressCount")
	if aerr != nil {
		return nil, aerr
	}
	for _, s := range p.List("PrivateIpAddresses") {
		primary, aerr := s.Bool("Primary")
		if aerr != nil {
			return nil, aerr
		}
		a, _ := s.Str("PrivateIpAddress")
		switch {
		case primary != nil && *primary && req.primary != "" && req.primary != a:
			return nil, protocol.InvalidParameter("Only one primary private IP address can be specified")
		case primary != nil && *primary:
			req.primary = a
		default:
			req.secondaries = append(req.secondaries, a)
		}
	}
	req.tags = map[string]string{}
	for _, ts := range p.List("TagSpecification") {
		if rt, _ := ts.Str("ResourceType"); rt != "network-interface" {
			return nil, protocol.InvalidParameter("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		tags, aerr := parseTags(ts)
		if aerr != nil {
			return nil, aerr
		}
		for _, t := range tags {
			req.tags[t.Key] = t.Value
		}
	}
	for _, unsupported := range []string{"Ipv4PrefixCount", "Ipv6AddressCount", "Ipv6PrefixCount"} {
		if v, ok := p.Str(unsupported); ok && v != "0" {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidParameterValue", "%s is not supported by the local cloud", unsupported)
		}
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if req.subnetID == "" {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter subnetId"}
	}
	if hasCount && len(req.secondaries) > 0 {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterCombination", Message: "SecondaryPrivateIpAddressCount cannot be specified together with secondary addresses in PrivateIpAddresses"}
	}
	if count < 0 {
		return nil, protocol.InvalidParameter("Value (%d) for parameter SecondaryPrivateIpAddressCount is invalid.", count)
	}
	req.count = count
	if dry {
		return nil, errDryRun
	}
	req.key = fingerprint(r.Form)
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
	}{Xmlns: xmlns, RequestID: r.ID, NIC: eniToXML(&n, e.regionOf(n.AvailabilityZone)), ClientToken: req.token}, nil
}

func (e *EC2) deleteNetworkInterfaceAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.Required("NetworkInterfaceId")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun
	}
	if aerr := e.deleteNetworkInterface(id); aerr != nil {
		return nil, aerr
	}
	return returned(r), nil
}

func (e *EC2) attachNetworkInterfaceAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	var req attachRequest
	if req.instanceID, aerr = p.Required("InstanceId"); aerr != nil {
		return nil, aerr
	}
	if req.eniID, aerr = p.Required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	idx, hasIdx, aerr := intParam(p, "DeviceIndex")
	if aerr != nil {
		return nil, aerr
	}
	if !hasIdx {
		return nil, protocol.MissingParameter("DeviceIndex")
	}
	card, _, aerr := intParam(p, "NetworkCardIndex")
	if aerr != nil {
		return nil, aerr
	}
	if _, _, aerr := intParam(p, "EnaQueueCount"); aerr != nil {
		return nil, aerr
	}
	p.Ignore("EnaSrdSpecification") // no ENA Express here
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if idx < 0 || idx > 100 {
		return nil, protocol.InvalidParameter("Invalid value '%d' for deviceIndex", idx)
	}
	if dry {
		return nil, errDryRun
	}
	req.deviceIndex, req.networkCard = idx, card
	att, aerr := e.attachNetworkInterface(r.Context, req)
	if aerr != nil {
		return nil, aerr
	}
	return struct {
		XMLName          xml.Name `xml:"AttachNetworkInterfaceResponse"`
		Xmlns            string   `xml:"xmlns,attr"`
		RequestID        string   `xml:"requestId"`
		AttachmentID     string   `xml:"attachmentId"`
		NetworkCardIndex int      `xml:"networkCardIndex"`
	}{Xmlns: xmlns, RequestID: r.ID, AttachmentID: att}, nil
}

func (e *EC2) detachNetworkInterfaceAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	id, aerr := p.Required("AttachmentId")
	if aerr != nil {
		return nil, aerr
	}
	if _, aerr := p.Bool("Force"); aerr != nil {
		return nil, aerr
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun
	}
	if aerr := e.detachNetworkInterface(r.Context, id); aerr != nil {
		return nil, aerr
	}
	return returned(r), nil
}

func (e *EC2) assignPrivateIPsAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	var req assignRequest
	var aerr *protocol.Error
	if req.eniID, aerr = p.Required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	count, hasCount, aerr := intParam(p, "SecondaryPrivateIpAddressCount")
	if aerr != nil {
		return nil, aerr
	}
	req.addrs = p.StrList("PrivateIpAddress")
	allow, aerr := p.Bool("AllowReassignment")
	if aerr != nil {
		return nil, aerr
	}
	req.allowReassign = allow != nil && *allow
	for _, unsupported := range []string{"Ipv4PrefixCount"} {
		if _, ok := p.Str(unsupported); ok {
			return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "IPv4 prefixes are not supported by the local cloud"}
		}
	}
	if len(p.StrList("Ipv4Prefix")) > 0 {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "IPv4 prefixes are not supported by the local cloud"}
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	switch {
	case hasCount && len(req.addrs) > 0:
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterCombination", Message: "The parameters secondaryPrivateIpAddressCount and privateIpAddress cannot be used together"}
	case !hasCount && len(req.addrs) == 0:
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "Either secondaryPrivateIpAddressCount or privateIpAddress must be specified"}
	case hasCount && count < 1:
		return nil, protocol.InvalidParameter("Value (%d) for parameter secondaryPrivateIpAddressCount is invalid. Expected a positive number.", count)
	}
	req.count = count
	added, aerr := e.assignPrivateIPs(r.Context, req)
	if aerr != nil {
		return nil, aerr
	}
	type assigned struct {
		PrivateIPAddress string `xml:"privateIpAddress"`
	}
	out := struct {
		XMLName   xml.Name                   `xml:"AssignPrivateIpAddressesResponse"`
		Xmlns     string                     `xml:"xmlns,attr"`
		RequestID string                     `xml:"requestId"`
		ENIID     string                     `xml:"networkInterfaceId"`
		Assigned  protocol.ItemSet[assigned] `xml:"assignedPrivateIpAddressesSet"`
		Return    bool                       `xml:"return"`
	}{Xmlns: xmlns, RequestID: r.ID, ENIID: req.eniID, Return: true}
	for _, a := range added {
		out.Assigned.Items = append(out.Assigned.Items, assigned{a})
	}
	return out, nil
}

func (e *EC2) unassignPrivateIPsAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	id, aerr := p.Required("NetworkInterfaceId")
	if aerr != nil {
		return nil, aerr
	}
	addrs := p.StrList("PrivateIpAddress")
	if len(p.StrList("Ipv4Prefix")) > 0 {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterValue", Message: "IPv4 prefixes are not supported by the local cloud"}
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if aerr := e.unassignPrivateIPs(r.Context, id, addrs); aerr != nil {
		return nil, aerr
	}
	return returned(r), nil
}

func (e *EC2) modifyNetworkInterfaceAttributeAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	req := modifyENIRequest{}
	if req.eniID, aerr = p.Required("NetworkInterfaceId"); aerr != nil {
		return nil, aerr
	}
	if id, ok := p.Child("Attachment").Str("AttachmentId"); ok {
		req.attachmentID = id
		if req.deleteOnTermination, aerr = p.Child("Attachment").Bool("DeleteOnTermination"); aerr != nil {
			return nil, aerr
		}
		if req.deleteOnTermination == nil {
			return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter Attachment.DeleteOnTermination"}
		}
	}
	if req.sourceDestCheck, aerr = p.Child("SourceDestCheck").Bool("Value"); aerr != nil {
		return nil, aerr
	}
	if d, ok := p.Child("Description").Str("Value"); ok {
		req.description = &d
	}
	if groups := p.StrList("SecurityGroupId"); len(groups) > 0 {
		req.groups, req.setGroups = groups, true
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun
	}
	if aerr := e.modifyNetworkInterface(req); aerr != nil {
		return nil, aerr
	}
	return returned(r), nil
}

func (e *EC2) createTagsAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	ids := p.StrList("ResourceId")
	tags := map[string]string{}
	for _, t := range p.List("Tag") {
		k, ok := t.Str("Key")
		if !ok || k == "" {
			return nil, protocol.InvalidParameter("Tag keys must not be empty")
		}
		tags[k], _ = t.Str("Value")
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if len(ids) == 0 {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter resourceIdSet"}
	}
	if dry {
		return nil, errDryRun
	}
	if aerr := e.createTags(ids, tags); aerr != nil {
		return nil, aerr
	}
	return returned(r), nil
}
