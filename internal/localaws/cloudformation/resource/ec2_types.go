package resource

// This file holds the EC2 security group resource types: AWS::EC2::SecurityGroup (with
// its inline rules) and the stand-alone rules AWS::EC2::SecurityGroupIngress and
// AWS::EC2::SecurityGroupEgress.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ec2Types are the EC2 security group resource types.
func ec2Types(cl Clients) map[string]Provisioner {
	return map[string]Provisioner{
		"AWS::EC2::SecurityGroup":        ec2SecurityGroup{cl.EC2},
		"AWS::EC2::SecurityGroupIngress": ec2GroupRule{c: cl.EC2},
		"AWS::EC2::SecurityGroupEgress":  ec2GroupRule{c: cl.EC2, egress: true},
	}
}

// How long deleting a security group waits for what still uses it (the network
// interfaces of instances being terminated) to go, and how often it tries; tests
// shorten them.
var (
	sgDeleteWait  = 5 * time.Minute
	sgDeleteEvery = 2 * time.Second
)

// The properties of a rule: inline in a group (without GroupId and GroupName) or a
// resource of its own.
var (
	ingressRuleProps = []string{"IpProtocol", "FromPort", "ToPort", "CidrIp", "CidrIpv6", "SourcePrefixListId", "SourceSecurityGroupId",
		"SourceSecurityGroupName", "SourceSecurityGroupOwnerId", "Description"}
	egressRuleProps = []string{"IpProtocol", "FromPort", "ToPort", "CidrIp", "CidrIpv6", "DestinationPrefixListId", "DestinationSecurityGroupId", "Description"}
)

// sgRuleSpec is a rule of a template: the permission to authorize or revoke, and a key
// that tells rules apart.
type sgRuleSpec struct {
	perm ec2types.IpPermission
	key  string
}

// protocolNames are the protocol numbers EC2 stores by name.
var protocolNames = map[string]string{"6": "tcp", "17": "udp", "1": "icmp", "58": "icmpv6", "all": "-1"}

// ruleSpec reads one rule's properties (at path, for errors).
func ruleSpec(m svcProps, egress bool, path string) (sgRuleSpec, error) {
	proto := strings.ToLower(m.str("IpProtocol"))
	if n, ok := protocolNames[proto]; ok {
		proto = n
	}
	if proto == "" {
		return sgRuleSpec{}, svcInvalid("Properties validation failed: #/%s: required key [IpProtocol] not found", path)
	}
	perm := ec2types.IpPermission{IpProtocol: aws.String(proto)}
	if proto != "-1" {
		var err error
		if perm.FromPort, err = m.int32("FromPort"); err != nil {
			return sgRuleSpec{}, err
		}
		if perm.ToPort, err = m.int32("ToPort"); err != nil {
			return sgRuleSpec{}, err
		}
	}
	desc := aws.String(m.str("Description"))
	if !m.has("Description") {
		desc = nil
	}
	peers := 0
	if v := m.str("CidrIp"); v != "" {
		perm.IpRanges, peers = []ec2types.IpRange{{CidrIp: aws.String(v), Description: desc}}, peers+1
	}
	if v := m.str("CidrIpv6"); v != "" {
		perm.Ipv6Ranges, peers = []ec2types.Ipv6Range{{CidrIpv6: aws.String(v), Description: desc}}, peers+1
	}
	prefixList, group, groupName := "SourcePrefixListId", "SourceSecurityGroupId", "SourceSecurityGroupName"
	if egress {
		prefixList, group, groupName = "DestinationPrefixListId", "DestinationSecurityGroupId", ""
	}
	if v := m.str(prefixList); v != "" {
		perm.PrefixListIds, peers = []ec2types.PrefixListId{{PrefixListId: aws.String(v), Description: desc}}, peers+1
	}
	if v, name := m.str(group), m.str(groupName); v != "" || groupName != "" && name != "" {
		pair := ec2types.UserIdGroupPair{Description: desc}
		if v != "" {
			pair.GroupId = aws.String(v)
		} else {
			pair.GroupName = aws.String(name)
		}
		perm.UserIdGroupPairs, peers = []ec2types.UserIdGroupPair{pair}, peers+1
	}
	if peers != 1 {
		return sgRuleSpec{}, svcInvalid("Properties validation failed: #/%s: a rule names exactly one of CidrIp, CidrIpv6, %s or %s (found %d)", path, prefixList, group, peers)
	}
	key := fmt.Sprintf("%s|%d|%d|%s|%s|%s|%s|%s|%s", proto, aws.ToInt32(perm.FromPort), aws.ToInt32(perm.ToPort), m.str("CidrIp"), m.str("CidrIpv6"),
		m.str(prefixList), m.str(group), m.str(groupName), m.str("Description"))
	return sgRuleSpec{perm: perm, key: key}, nil
}

// defaultEgress is the rule a new group has, and keeps while its template gives no
// SecurityGroupEgress: all traffic out.
var defaultEgress, _ = ruleSpec(svcProps{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}, true, "")

// groupRules reads a group's inline rules of one direction; the egress rules default to
// defaultEgress.
func groupRules(p svcProps, egress bool) ([]sgRuleSpec, error) {
	prop, known := "SecurityGroupIngress", ingressRuleProps
	if egress {
		prop, known = "SecurityGroupEgress", egressRuleProps
	}
	var out []sgRuleSpec
	for k, v := range p.list(prop) {
		m, _ := v.(map[string]any)
		path := fmt.Sprintf("%s/%d", prop, k)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(known, name) {
				return nil, svcInvalid("Encountered unsupported property %s (#/%s)", name, path)
			}
		}
		spec, err := ruleSpec(m, egress, path)
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	if egress && len(out) == 0 {
		out = []sgRuleSpec{defaultEgress}
	}
	return out, nil
}

// ---- AWS::EC2::SecurityGroup

type ec2SecurityGroup struct{ c *ec2.Client }

var securityGroupProps = []string{"GroupName", "VpcId", "SecurityGroupIngress", "SecurityGroupEgress", "Tags"}

// ec2Tags are the tags of an EC2 resource: the stack's, CloudFormation's own and the
// resource's.
func ec2Tags(c *Call, p svcProps) map[string]string {
	out := maps.Clone(c.Tags)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, p.tags())
	return out
}

func ec2TagList(tags map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func (t ec2SecurityGroup) Create(ctx context.Context, c *Call) (Result, error) {
	p := svcProps(c.Properties)
	if err := p.check(c, []string{"GroupDescription"}, securityGroupProps...); err != nil {
		return Result{}, err
	}
	ingress, err := groupRules(p, false)
	if err != nil {
		return Result{}, err
	}
	egress, err := groupRules(p, true)
	if err != nil {
		return Result{}, err
	}
	name := p.str("GroupName")
	if name == "" {
		name = svcName(c, 255)
	}
	in := &ec2.CreateSecurityGroupInput{GroupName: aws.String(name), Description: aws.String(p.str("GroupDescription"))}
	if p.has("VpcId") {
		in.VpcId = aws.String(p.str("VpcId"))
	}
	if tags := ec2Tags(c, p); len(tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: ec2TagList(tags)}}
	}
	out, err := t.c.CreateSecurityGroup(ctx, in)
	if err != nil {
		return Result{}, svcFail("Ec2", err)
	}
	id := aws.ToString(out.GroupId)
	r := Result{PhysicalID: id, Attributes: map[string]string{"GroupId": id, "VpcId": p.str("VpcId")}}
	if err := t.applyRules(ctx, id, false, nil, ingress); err != nil {
		_ = t.Delete(ctx, c, r)
		return Result{}, err
	}
	if err := t.applyRules(ctx, id, true, []sgRuleSpec{defaultEgress}, egress); err != nil {
		_ = t.Delete(ctx, c, r)
		return Result{}, err
	}
	return r, nil
}

// applyRules brings a group's rules of one direction from old to now: those no longer
// given are revoked, then the new ones authorized.
func (t ec2SecurityGroup) applyRules(ctx context.Context, id string, egress bool, old, now []sgRuleSpec) error {
	var revoke, authorize []ec2types.IpPermission
	for _, o := range old {
		if !slices.ContainsFunc(now, func(n sgRuleSpec) bool { return n.key == o.key }) {
			revoke = append(revoke, o.perm)
		}
	}
	for _, n := range now {
		if !slices.ContainsFunc(old, func(o sgRuleSpec) bool { return n.key == o.key }) {
			authorize = append(authorize, n.perm)
		}
	}
	var err error
	switch {
	case len(revoke) > 0 && egress:
		_, err = t.c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(id), IpPermissions: revoke})
	case len(revoke) > 0:
		_, err = t.c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: revoke})
	}
	if !svcGone(err, "InvalidPermission.NotFound") {
		return svcFail("Ec2", err)
	}
	switch {
	case len(authorize) > 0 && egress:
		_, err = t.c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(id), IpPermissions: authorize})
	case len(authorize) > 0:
		_, err = t.c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: authorize})
	}
	return svcFail("Ec2", err)
}

// Update changes rules and tags in place; a new name, description or VPC makes a new
// group.
func (t ec2SecurityGroup) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	p, was := svcProps(c.Properties), svcProps(oldProps)
	if err := p.check(c, []string{"GroupDescription"}, securityGroupProps...); err != nil {
		return Result{}, err
	}
	for _, k := range []string{"GroupName", "GroupDescription", "VpcId"} {
		if p.str(k) != was.str(k) {
			return Result{}, ErrReplace
		}
	}
	id := old.PhysicalID
	for _, egress := range []bool{false, true} {
		now, err := groupRules(p, egress)
		if err != nil {
			return Result{}, err
		}
		before, _ := groupRules(was, egress)
		if err := t.applyRules(ctx, id, egress, before, now); err != nil {
			return Result{}, err
		}
	}
	tags, oldTags := ec2Tags(c, p), ec2Tags(c, was)
	var gone []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(oldTags)) {
		if _, ok := tags[k]; !ok {
			gone = append(gone, ec2types.Tag{Key: aws.String(k)})
		}
	}
	if len(gone) > 0 {
		if _, err := t.c.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: gone}); err != nil {
			return Result{}, svcFail("Ec2", err)
		}
	}
	if !maps.Equal(tags, oldTags) && len(tags) > 0 {
		if _, err := t.c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(tags)}); err != nil {
			return Result{}, svcFail("Ec2", err)
		}
	}
	return Result{PhysicalID: id, Attributes: map[string]string{"GroupId": id, "VpcId": p.str("VpcId")}}, nil
}

// Delete deletes the group, waiting (up to sgDeleteWait, or ctx) while something still
// uses it, as CloudFormation waits for the interfaces of terminating instances to go.
func (t ec2SecurityGroup) Delete(ctx context.Context, _ *Call, r Result) error {
	deadline := time.Now().Add(sgDeleteWait)
	for {
		_, err := t.c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(r.PhysicalID)})
		if svcGone(err, "InvalidGroup.NotFound") {
			return nil
		}
		if svcCode(err) != "DependencyViolation" || time.Now().After(deadline) {
			return svcFail("Ec2", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for security group %s to be unused: %w)", svcFail("Ec2", err), r.PhysicalID, ctx.Err())
		case <-time.After(sgDeleteEvery):
		}
	}
}

// ---- AWS::EC2::SecurityGroupIngress and AWS::EC2::SecurityGroupEgress

type ec2GroupRule struct {
	c      *ec2.Client
	egress bool
}

func (t ec2GroupRule) spec(c *Call) (sgRuleSpec, error) {
	p := svcProps(c.Properties)
	known := append([]string{"GroupName"}, ingressRuleProps...)
	if t.egress {
		known = egressRuleProps
	}
	if err := p.check(c, nil, append(known, "GroupId")...); err != nil {
		return sgRuleSpec{}, err
	}
	if p.str("GroupId") == "" && (t.egress || p.str("GroupName") == "") {
		return sgRuleSpec{}, svcInvalid("Properties validation failed for resource %s with message: #: required key [GroupId] not found", c.LogicalID)
	}
	return ruleSpec(p, t.egress, c.LogicalID)
}

func (t ec2GroupRule) Create(ctx context.Context, c *Call) (Result, error) {
	spec, err := t.spec(c)
	if err != nil {
		return Result{}, err
	}
	p := svcProps(c.Properties)
	var rules []ec2types.SecurityGroupRule
	if t.egress {
		out, err := t.c.AuthorizeSecurityGroupEgress(ctx, &ec2.AuthorizeSecurityGroupEgressInput{GroupId: aws.String(p.str("GroupId")), IpPermissions: []ec2types.IpPermission{spec.perm}})
		if err != nil {
			return Result{}, svcFail("Ec2", err)
		}
		rules = out.SecurityGroupRules
	} else {
		in := &ec2.AuthorizeSecurityGroupIngressInput{IpPermissions: []ec2types.IpPermission{spec.perm}}
		if id := p.str("GroupId"); id != "" {
			in.GroupId = aws.String(id)
		} else {
			in.GroupName = aws.String(p.str("GroupName"))
		}
		out, err := t.c.AuthorizeSecurityGroupIngress(ctx, in)
		if err != nil {
			return Result{}, svcFail("Ec2", err)
		}
		rules = out.SecurityGroupRules
	}
	if len(rules) != 1 {
		return Result{}, fmt.Errorf("EC2 answered %d rules for one rule of %s", len(rules), c.LogicalID)
	}
	id := aws.ToString(rules[0].SecurityGroupRuleId)
	return Result{PhysicalID: id, Attributes: map[string]string{"Id": id, "GroupId": aws.ToString(rules[0].GroupId)}}, nil
}

// Update makes a new rule for any change: a rule is its content.
func (t ec2GroupRule) Update(_ context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	if _, err := t.spec(c); err != nil {
		return Result{}, err
	}
	if !maps.EqualFunc(c.Properties, oldProps, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		return Result{}, ErrReplace
	}
	return old, nil
}

// Delete revokes the rule by its ID; a rule or group already gone is no error.
func (t ec2GroupRule) Delete(ctx context.Context, c *Call, r Result) error {
	group := r.Attributes["GroupId"]
	if group == "" {
		group = svcProps(c.Properties).str("GroupId")
	}
	var err error
	if t.egress {
		_, err = t.c.RevokeSecurityGroupEgress(ctx, &ec2.RevokeSecurityGroupEgressInput{GroupId: aws.String(group), SecurityGroupRuleIds: []string{r.PhysicalID}})
	} else {
		_, err = t.c.RevokeSecurityGroupIngress(ctx, &ec2.RevokeSecurityGroupIngressInput{GroupId: aws.String(group), SecurityGroupRuleIds: []string{r.PhysicalID}})
	}
	if svcGone(err, "InvalidGroup.NotFound", "InvalidSecurityGroupRuleId.NotFound", "InvalidPermission.NotFound") {
		return nil
	}
	return svcFail("Ec2", err)
}
