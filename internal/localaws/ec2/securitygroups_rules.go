package ec2

// This file holds the rule actions of security groups (Authorize/Revoke
// SecurityGroupIngress/Egress: IpPermissions with IpRanges, Ipv6Ranges, PrefixListIds
// and Groups, or the legacy top-level CidrIp and SourceSecurityGroupName), and the tags
// of groups and rules (CreateTags, DeleteTags).

import (
	"encoding/xml"
	"maps"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// ruleRequest is one rule asked for: the rule, and the referenced group's name when the
// request names it so (resolved in the group's VPC).
type ruleRequest struct {
	rule      sgRule
	groupName string
}

// normalProtocol is a protocol as EC2 stores it: -1, tcp, udp, icmp, icmpv6 or a number.
func normalProtocol(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "-1", "all":
		return "-1", true
	case "tcp", "6":
		return "tcp", true
	case "udp", "17":
		return "udp", true
	case "icmp", "1":
		return "icmp", true
	case "icmpv6", "58":
		return "icmpv6", true
	}
	n, err := strconv.Atoi(s)
	return s, err == nil && n >= 0 && n <= 255 && strconv.Itoa(n) == s
}

// portRange reads FromPort and ToPort for a protocol: required for TCP and UDP, ICMP's
// type and code (-1 for any), and -1 for the others.
func portRange(p *protocol.Params, proto string) (int, int, *protocol.Error) {
	from, aerr := p.Int("FromPort")
	if aerr != nil {
		return 0, 0, aerr
	}
	to, aerr := p.Int("ToPort")
	if aerr != nil {
		return 0, 0, aerr
	}
	switch proto {
	case "tcp", "udp":
		if from == nil || to == nil {
			return 0, 0, protocol.InvalidParameter("Invalid value 'Must specify both from and to ports with TCP/UDP.' for portRange (%s)", p.Path())
		}
		if *from < 0 || *to > 65535 || *from > *to {
			return 0, 0, protocol.InvalidParameter("Invalid value '%d-%d' for portRange (%s): ports are 0 to 65535, from not above to", *from, *to, p.Path())
		}
		return int(*from), int(*to), nil
	case "icmp", "icmpv6":
		f, t := int64(-1), int64(-1)
		if from != nil {
			f = *from
		}
		if to != nil {
			t = *to
		}
		if f < -1 || f > 255 || t < -1 || t > 255 {
			return 0, 0, protocol.InvalidParameter("Invalid value '%d,%d' for ICMP type and code (%s): each is -1 to 255", f, t, p.Path())
		}
		return int(f), int(t), nil
	}
	return -1, -1, nil
}

func checkCIDR(v string, v6 bool, param string) (string, *protocol.Error) {
	pfx, err := netip.ParsePrefix(v)
	if err != nil || pfx.Addr().Is4() == v6 || pfx.Addr().Is4In6() {
		return "", protocol.InvalidParameter("Value (%s) for parameter %s is invalid. This is not a valid CIDR block.", v, param)
	}
	return pfx.Masked().String(), nil
}

// readPeers reads a permission's peers into one rule each.
func readPeers(perm *protocol.Params, base sgRule) ([]ruleRequest, *protocol.Error) {
	var out []ruleRequest
	for _, r := range perm.List("IpRanges") {
		c, _ := r.Str("CidrIp")
		cidr, aerr := checkCIDR(c, false, r.Path()+".CidrIp")
		if aerr != nil {
			return nil, aerr
		}
		rule := base
		rule.cidr = cidr
		rule.description, _ = r.Str("Description")
		out = append(out, ruleRequest{rule: rule})
	}
	for _, r := range perm.List("Ipv6Ranges") {
		c, _ := r.Str("CidrIpv6")
		cidr, aerr := checkCIDR(c, true, r.Path()+".CidrIpv6")
		if aerr != nil {
			return nil, aerr
		}
		rule := base
		rule.cidrV6 = cidr
		rule.description, _ = r.Str("Description")
		out = append(out, ruleRequest{rule: rule})
	}
	for _, r := range perm.List("PrefixListIds") {
		id, _ := r.Str("PrefixListId")
		if !strings.HasPrefix(id, "pl-") {
			return nil, protocol.InvalidParameter("Value (%s) for parameter %s.PrefixListId is invalid: a prefix list ID is pl-…", id, r.Path())
		}
		rule := base
		rule.prefixList = id
		rule.description, _ = r.Str("Description")
		out = append(out, ruleRequest{rule: rule})
	}
	for _, r := range perm.List("Groups") {
		rule := base
		rule.referencedGroup, _ = r.Str("GroupId")
		name, _ := r.Str("GroupName")
		rule.description, _ = r.Str("Description")
		r.Ignore("UserId")
		r.Ignore("VpcId")
		if rule.referencedGroup == "" && name == "" {
			return nil, protocol.InvalidParameter("%s names no group: give GroupId", r.Path())
		}
		out = append(out, ruleRequest{rule: rule, groupName: name})
	}
	if len(out) == 0 {
		return nil, protocol.InvalidParameter("%s names no peer: give IpRanges, Ipv6Ranges, PrefixListIds or Groups", perm.Path())
	}
	return out, nil
}

// readPermissions reads the rules a request asks for: IpPermissions.N, or the legacy
// top-level IpProtocol, FromPort, ToPort, CidrIp and SourceSecurityGroupName.
func readPermissions(p *protocol.Params) ([]ruleRequest, *protocol.Error) {
	var out []ruleRequest
	for _, perm := range p.List("IpPermissions") {
		raw, _ := perm.Str("IpProtocol")
		proto, ok := normalProtocol(raw)
		if !ok {
			return nil, protocol.InvalidParameter("Invalid value '%s' for %s.IpProtocol: use tcp, udp, icmp, icmpv6, -1 or a protocol number", raw, perm.Path())
		}
		from, to, aerr := portRange(perm, proto)
		if aerr != nil {
			return nil, aerr
		}
		peers, aerr := readPeers(perm, sgRule{protocol: proto, from: from, to: to})
		if aerr != nil {
			return nil, aerr
		}
		out = append(out, peers...)
	}
	cidr, hasCIDR := p.Str("CidrIp")
	source, hasSource := p.Str("SourceSecurityGroupName")
	p.Ignore("SourceSecurityGroupOwnerId")
	raw, hasProto := p.Str("IpProtocol")
	if !hasCIDR && !hasSource {
		if hasProto {
			return nil, protocol.InvalidParameter("IpProtocol is given without CidrIp or SourceSecurityGroupName: give IpPermissions")
		}
		return out, nil
	}
	if !hasProto {
		raw = "-1"
	}
	proto, ok := normalProtocol(raw)
	if !ok {
		return nil, protocol.InvalidParameter("Invalid value '%s' for IpProtocol: use tcp, udp, icmp, icmpv6, -1 or a protocol number", raw)
	}
	from, to, aerr := portRange(p, proto)
	if aerr != nil {
		return nil, aerr
	}
	base := sgRule{protocol: proto, from: from, to: to}
	if hasCIDR {
		c, aerr := checkCIDR(cidr, false, "CidrIp")
		if aerr != nil {
			return nil, aerr
		}
		rule := base
		rule.cidr = c
		out = append(out, ruleRequest{rule: rule})
	}
	if hasSource {
		out = append(out, ruleRequest{rule: base, groupName: source})
	}
	return out, nil
}

type ruleChangeResponse struct {
	XMLName   xml.Name
	Xmlns     string                       `xml:"xmlns,attr"`
	RequestID string                       `xml:"requestId"`
	Return    bool                         `xml:"return"`
	Rules     *protocol.ItemSet[sgRuleXML] `xml:"securityGroupRuleSet,omitempty"`
}

// ruleAction is the handler of Authorize (authorize) or Revoke SecurityGroupIngress or
// SecurityGroupEgress (egress).
func (e *EC2) ruleAction(egress, authorize bool) protocol.Handler {
	return func(r *protocol.Request) (any, *protocol.Error) {
		p := r.Params
		dry, aerr := dryRun(p)
		if aerr != nil {
			return nil, aerr
		}
		groupID, _ := p.Str("GroupId")
		var groupName string
		if !egress {
			groupName, _ = p.Str("GroupName")
		}
		reqs, aerr := readPermissions(p)
		if aerr != nil {
			return nil, aerr
		}
		var ids []string
		tags := map[string]string{}
		if authorize {
			if tags, aerr = readTagSpecs(p, "security-group-rule"); aerr != nil {
				return nil, aerr
			}
		} else {
			ids = p.StrList("SecurityGroupRuleId")
		}
		if aerr := p.Finish(); aerr != nil {
			return nil, aerr
		}
		if len(reqs) == 0 && len(ids) == 0 {
			return nil, protocol.MissingParameter("IpPermissions")
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		g, aerr := e.targetGroup(groupID, groupName)
		if aerr != nil {
			return nil, aerr
		}
		rules, aerr := e.resolveRules(g, egress, reqs)
		if aerr != nil {
			return nil, aerr
		}
		if authorize {
			return e.authorize(r, rules, tags, dry)
		}
		return e.revoke(r, g, egress, rules, ids, dry)
	}
}

// resolveRules makes the requested rules rules of g: referenced groups found. Locked.
func (e *EC2) resolveRules(g *securityGroup, egress bool, reqs []ruleRequest) ([]*sgRule, *protocol.Error) {
	var out []*sgRule
	for _, q := range reqs {
		rule := q.rule
		rule.groupID, rule.egress = g.id, egress
		if q.groupName != "" && rule.referencedGroup == "" {
			ref := e.groupNamed(q.groupName, g.vpcID)
			if ref == nil {
				return nil, protocol.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist in VPC '%s'", q.groupName, g.vpcID)
			}
			rule.referencedGroup = ref.id
		}
		if rule.referencedGroup != "" && !e.groupExists(rule.referencedGroup) {
			return nil, groupNotFound(rule.referencedGroup)
		}
		out = append(out, &rule)
	}
	return out, nil
}

// authorize adds rules that are not there yet. Locked.
func (e *EC2) authorize(r *protocol.Request, rules []*sgRule, tags map[string]string, dry bool) (any, *protocol.Error) {
	for k, rule := range rules {
		for _, have := range e.groupRules(rule.groupID) {
			if have.same(rule) {
				return nil, protocol.Errorf(http.StatusBadRequest, "InvalidPermission.Duplicate", "the specified rule \"%s\" already exists", rule.describe())
			}
		}
		for _, earlier := range rules[:k] {
			if earlier.same(rule) {
				return nil, protocol.Errorf(http.StatusBadRequest, "InvalidPermission.Duplicate", "the specified rule \"%s\" is given twice", rule.describe())
			}
		}
	}
	if dry {
		return nil, errDryRun
	}
	out := ruleChangeResponse{XMLName: xml.Name{Local: r.Action + "Response"}, Xmlns: xmlns, RequestID: r.ID, Return: true, Rules: &protocol.ItemSet[sgRuleXML]{}}
	for _, rule := range rules {
		rule.tags = maps.Clone(tags)
		e.addRule(rule)
		out.Rules.Items = append(out.Rules.Items, e.ruleXML(rule))
	}
	return out, nil
}

// revoke removes rules, named by content or by ID; each must be there. Locked.
func (e *EC2) revoke(r *protocol.Request, g *securityGroup, egress bool, rules []*sgRule, ids []string, dry bool) (any, *protocol.Error) {
	var gone []string
	for _, rule := range rules {
		found := ""
		for _, have := range e.groupRules(g.id) {
			if have.same(rule) {
				found = have.id
			}
		}
		if found == "" {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidPermission.NotFound", "The specified rule does not exist in this security group: \"%s\"", rule.describe())
		}
		gone = append(gone, found)
	}
	for _, id := range ids {
		if have := e.rules[id]; have == nil || have.groupID != g.id || have.egress != egress {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '%s' does not exist in security group '%s'", id, g.id)
		}
		gone = append(gone, id)
	}
	if dry {
		return nil, errDryRun
	}
	for _, id := range gone {
		delete(e.rules, id)
	}
	return returned(r), nil
}

// groupTags are the tags of a security group (sg-) or rule (sgr-); nil when the ID names
// neither. Locked.
func (e *EC2) groupTags(id string) (map[string]string, *protocol.Error) {
	switch {
	case strings.HasPrefix(id, "sgr-"):
		if rule := e.rules[id]; rule != nil {
			return rule.tags, nil
		}
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '%s' does not exist", id)
	case strings.HasPrefix(id, "sg-"):
		if g := e.groups[id]; g != nil {
			return g.tags, nil
		}
		return nil, groupNotFound(id)
	}
	return nil, nil
}

// deleteTagsAction removes tags (Tag.N.Key, with Value: only when it has that value;
// no Tag: all) from network interfaces, subnets, security groups and rules.
func (e *EC2) deleteTagsAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	ids := p.StrList("ResourceId")
	type keyValue struct {
		key   string
		value *string
	}
	var drop []keyValue
	for _, t := range p.List("Tag") {
		k, _ := t.Str("Key")
		drop = append(drop, keyValue{k, t.StrPtr("Value")})
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if len(ids) == 0 {
		return nil, protocol.MissingParameter("resourceIdSet")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var sets []map[string]string
	for _, id := range ids {
		tags, aerr := e.taggable(id)
		if aerr != nil {
			return nil, aerr
		}
		sets = append(sets, tags)
	}
	if dry {
		return nil, errDryRun
	}
	for _, tags := range sets {
		if len(drop) == 0 {
			clear(tags)
		}
		for _, kv := range drop {
			if v, ok := tags[kv.key]; ok && (kv.value == nil || *kv.value == v) {
				delete(tags, kv.key)
			}
		}
	}
	return returned(r), nil
}

// taggable returns the tags of a resource CreateTags and DeleteTags change. Locked.
func (e *EC2) taggable(id string) (map[string]string, *protocol.Error) {
	if tags, aerr := e.groupTags(id); tags != nil || aerr != nil {
		return tags, aerr
	}
	switch {
	case strings.HasPrefix(id, "eni-"):
		n, aerr := e.eni(id)
		if aerr != nil {
			return nil, aerr
		}
		return n.Tags, nil
	case strings.HasPrefix(id, "subnet-"):
		s := e.subnets[id]
		if s == nil {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
		if s.Tags == nil {
			s.Tags = map[string]string{}
		}
		return s.Tags, nil
	}
	return nil, protocol.Errorf(http.StatusBadRequest, "InvalidID", "The ID '%s' is not valid", id)
}
