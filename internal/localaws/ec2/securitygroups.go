package ec2

// This file holds the security groups and their rules: the VPC's default group, and
// CreateSecurityGroup, DeleteSecurityGroup, AuthorizeSecurityGroupIngress/Egress and
// RevokeSecurityGroupIngress/Egress. Rules are stored one per peer (a CIDR, an IPv6
// range, a prefix list or a group), as DescribeSecurityGroupRules lists them;
// DescribeSecurityGroups groups them into IpPermissions (describe_vpc.go).

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// securityGroup is a security group of a VPC.
type securityGroup struct {
	id, name, description, vpcID string
	tags                         map[string]string
}

// sgRule is one rule of a security group: traffic of a protocol and port range, in or
// out, from or to one peer.
type sgRule struct {
	id, groupID string
	egress      bool
	// protocol is -1 (all), tcp, udp, icmp, icmpv6 or another protocol's number; from
	// and to are the port range (ICMP's type and code), -1 when it does not apply.
	protocol string
	from, to int
	// The peer: one of these is set.
	cidr, cidrV6, prefixList, referencedGroup string
	description                               string
	tags                                      map[string]string
	// seq orders rules as they were made, so that answers are in a stable order.
	seq int
}

// peer is the rule's peer as the rule IDs' "peer:" text shows it.
func (r *sgRule) peer() string {
	return r.cidr + r.cidrV6 + r.prefixList + r.referencedGroup
}

// same tells whether two rules allow the same traffic (descriptions aside).
func (r *sgRule) same(o *sgRule) bool {
	return r.groupID == o.groupID && r.egress == o.egress && r.protocol == o.protocol && r.from == o.from && r.to == o.to && r.peer() == o.peer()
}

// describe is a rule as AWS's InvalidPermission errors spell it.
func (r *sgRule) describe() string {
	proto := strings.ToUpper(r.protocol)
	if proto == "-1" {
		proto = "ALL"
	}
	return fmt.Sprintf("peer: %s, %s, from port: %d, to port: %d, ALLOW", r.peer(), proto, r.from, r.to)
}

// newID draws a resource ID: the prefix and 17 hexadecimal digits.
func newID(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:17]
}

// WithSecurityGroups puts a launched instance's primary network interface in security
// groups (IDs), as a launch template's SecurityGroupIds or NetworkInterfaces' Groups ask;
// Launch refuses a group that does not exist. While the instance runs, the groups
// cannot be deleted.
func WithSecurityGroups(ids ...string) LaunchOption {
	return func(r *InstanceRecord) { r.SecurityGroupIDs = slices.Clone(ids) }
}

// checkLaunchGroups refuses to launch an instance into a group that does not exist.
// Locked.
func (e *EC2) checkLaunchGroups(instanceID string, ids []string) error {
	for _, g := range ids {
		if !e.groupExists(g) {
			return fmt.Errorf("instance %s: security group %s does not exist", instanceID, g)
		}
	}
	return nil
}

// addDefaultGroup makes the VPC's default group: all traffic in from itself, all out.
func (e *EC2) addDefaultGroup() {
	g := &securityGroup{id: DefaultSecurityGroupID, name: "default", description: "default VPC security group", vpcID: DefaultVPCID, tags: map[string]string{}}
	e.groups[g.id] = g
	e.addRule(&sgRule{id: ruleID(g.id, false), groupID: g.id, protocol: "-1", from: -1, to: -1, referencedGroup: g.id})
	e.addRule(&sgRule{id: ruleID(g.id, true), groupID: g.id, egress: true, protocol: "-1", from: -1, to: -1, cidr: "0.0.0.0/0"})
}

// addRule stores a rule, drawing its ID if it has none. Locked.
func (e *EC2) addRule(r *sgRule) {
	if r.id == "" {
		r.id = newID("sgr-")
	}
	if r.tags == nil {
		r.tags = map[string]string{}
	}
	e.ruleSeq++
	r.seq = e.ruleSeq
	e.rules[r.id] = r
}

// groupRules are a group's rules in the order they were made. Locked.
func (e *EC2) groupRules(groupID string) []*sgRule {
	var out []*sgRule
	for _, r := range e.rules {
		if r.groupID == groupID {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *sgRule) int { return a.seq - b.seq })
	return out
}

// groupExists tells whether a security group exists. Locked.
func (e *EC2) groupExists(id string) bool { return e.groups[id] != nil }

// groupNamed finds a group by name, in vpcID when not "". Locked.
func (e *EC2) groupNamed(name, vpcID string) *securityGroup {
	for _, id := range slices.Sorted(maps.Keys(e.groups)) {
		if g := e.groups[id]; g.name == name && (vpcID == "" || g.vpcID == vpcID) {
			return g
		}
	}
	return nil
}

func groupNotFound(id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
}

// groupNameRE is what a VPC security group's name and description may hold.
var groupNameRE = regexp.MustCompile(`^[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*$`)

func checkGroupText(param, v string) *protocol.Error {
	switch {
	case v == "":
		return protocol.MissingParameter(param)
	case len(v) > 255:
		return protocol.InvalidParameter("Value (%s) for parameter %s is invalid. Length exceeds maximum of 255.", v, param)
	case !groupNameRE.MatchString(v):
		return protocol.InvalidParameter("Value (%s) for parameter %s is invalid. Character sets beyond a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$* are not supported.", v, param)
	}
	return nil
}

// readTagSpecs reads TagSpecification.N of one resource type.
func readTagSpecs(p *protocol.Params, resourceType string) (map[string]string, *protocol.Error) {
	tags := map[string]string{}
	for _, ts := range p.List("TagSpecification") {
		if rt, _ := ts.Str("ResourceType"); rt != resourceType {
			return nil, protocol.InvalidParameter("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		list, aerr := parseTags(ts)
		if aerr != nil {
			return nil, aerr
		}
		for _, t := range list {
			tags[t.Key] = t.Value
		}
	}
	return tags, nil
}

type createSecurityGroupResponse struct {
	XMLName   xml.Name                    `xml:"CreateSecurityGroupResponse"`
	Xmlns     string                      `xml:"xmlns,attr"`
	RequestID string                      `xml:"requestId"`
	Return    bool                        `xml:"return"`
	GroupID   string                      `xml:"groupId"`
	Tags      protocol.ItemSet[ec2TagXML] `xml:"tagSet"`
	ARN       string                      `xml:"securityGroupArn"`
}

func (e *EC2) groupARN(id string) string {
	return "arn:aws:ec2:" + e.Region + ":" + e.AccountID + ":security-group/" + id
}

func (e *EC2) createSecurityGroupAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	name, _ := p.Str("GroupName")
	desc, _ := p.Str("GroupDescription")
	vpcID, _ := p.Str("VpcId")
	tags, aerr := readTagSpecs(p, "security-group")
	if aerr != nil {
		return nil, aerr
	}
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	if aerr := checkGroupText("GroupName", name); aerr != nil {
		return nil, aerr
	}
	if aerr := checkGroupText("GroupDescription", desc); aerr != nil {
		return nil, aerr
	}
	switch {
	case strings.HasPrefix(name, "sg-"):
		return nil, protocol.InvalidParameter("Group names may not be in the format sg-* (%s)", name)
	case strings.EqualFold(name, "default"):
		return nil, protocol.InvalidParameter("Cannot use reserved security group name: %s", name)
	case vpcID == "":
		return nil, protocol.Errorf(http.StatusBadRequest, "VPCIdNotSpecified", "No default VPC for this user: give VpcId")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.vpcs()[vpcID]; !ok {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpcID)
	}
	if e.groupNamed(name, vpcID) != nil {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", name, vpcID)
	}
	if dry {
		return nil, errDryRun
	}
	g := &securityGroup{id: newID("sg-"), name: name, description: desc, vpcID: vpcID, tags: tags}
	e.groups[g.id] = g
	e.addRule(&sgRule{groupID: g.id, egress: true, protocol: "-1", from: -1, to: -1, cidr: "0.0.0.0/0"})
	return createSecurityGroupResponse{Xmlns: xmlns, RequestID: r.ID, Return: true, GroupID: g.id, Tags: tagSet(tags), ARN: e.groupARN(g.id)}, nil
}

// targetGroup reads GroupId or GroupName and finds the group. Locked.
func (e *EC2) targetGroup(id, name string) (*securityGroup, *protocol.Error) {
	switch {
	case id != "":
		if g := e.groups[id]; g != nil {
			return g, nil
		}
		return nil, groupNotFound(id)
	case name != "":
		if g := e.groupNamed(name, ""); g != nil {
			return g, nil
		}
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, DefaultVPCID)
	}
	return nil, protocol.MissingParameter("GroupId")
}

func (e *EC2) deleteSecurityGroupAction(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	dry, aerr := dryRun(p)
	if aerr != nil {
		return nil, aerr
	}
	id, _ := p.Str("GroupId")
	name, _ := p.Str("GroupName")
	if aerr := p.Finish(); aerr != nil {
		return nil, aerr
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g, aerr := e.targetGroup(id, name)
	if aerr != nil {
		return nil, aerr
	}
	if g.id == DefaultSecurityGroupID {
		return nil, protocol.Errorf(http.StatusBadRequest, "CannotDelete", "the specified group: \"%s\" name: \"default\" cannot be deleted by a user", g.id)
	}
	if by := e.groupUser(g.id); by != "" {
		return nil, protocol.Errorf(http.StatusBadRequest, "DependencyViolation", "resource %s has a dependent object (%s)", g.id, by)
	}
	if dry {
		return nil, errDryRun
	}
	for _, rule := range e.groupRules(g.id) {
		delete(e.rules, rule.id)
	}
	delete(e.groups, g.id)
	return returned(r), nil
}

// groupUser names what keeps a group from being deleted: a network interface (an
// instance's or not) in it, or another group's rule naming it; "" for nothing. Locked.
func (e *EC2) groupUser(id string) string {
	for _, eniID := range slices.Sorted(maps.Keys(e.enis)) {
		n := e.enis[eniID]
		if slices.Contains(n.Groups, id) {
			if n.Attachment != nil {
				return "network interface " + n.ID + " of instance " + n.Attachment.InstanceID
			}
			return "network interface " + n.ID
		}
	}
	for _, ruleID := range slices.Sorted(maps.Keys(e.rules)) {
		if rule := e.rules[ruleID]; rule.referencedGroup == id && rule.groupID != id {
			return "rule " + rule.id + " of security group " + rule.groupID
		}
	}
	return ""
}
