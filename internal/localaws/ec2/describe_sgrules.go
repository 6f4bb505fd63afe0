package ec2

// This file holds DescribeSecurityGroupRules: the rules of the security groups, one per
// peer, as DescribeSecurityGroups shows them grouped in its permissions.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// ruleID derives the ID of a rule of the default group from its direction.
func ruleID(groupID string, egress bool) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "sgr/%s/%t", groupID, egress))
	return "sgr-" + hex.EncodeToString(sum[:])[:17]
}

var sgRuleFilters = map[string]func(r sgRule) []string{
	"group-id":               func(r sgRule) []string { return one(r.groupID) },
	"security-group-rule-id": func(r sgRule) []string { return one(r.id) },
}

type referencedGroupXML struct {
	GroupID string `xml:"groupId"`
	UserID  string `xml:"userId"`
}

type sgRuleXML struct {
	ID              string                      `xml:"securityGroupRuleId"`
	GroupID         string                      `xml:"groupId"`
	GroupOwnerID    string                      `xml:"groupOwnerId"`
	IsEgress        bool                        `xml:"isEgress"`
	IPProtocol      string                      `xml:"ipProtocol"`
	FromPort        int                         `xml:"fromPort"`
	ToPort          int                         `xml:"toPort"`
	CIDRIPv4        string                      `xml:"cidrIpv4,omitempty"`
	CIDRIPv6        string                      `xml:"cidrIpv6,omitempty"`
	PrefixListID    string                      `xml:"prefixListId,omitempty"`
	Description     string                      `xml:"description,omitempty"`
	ReferencedGroup *referencedGroupXML         `xml:"referencedGroupInfo,omitempty"`
	ARN             string                      `xml:"securityGroupRuleArn"`
	Tags            protocol.ItemSet[ec2TagXML] `xml:"tagSet"`
}

func (e *EC2) describeSecurityGroupRules(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "SecurityGroupRuleId", func(n string) bool { return sgRuleFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	rules := map[string]sgRule{}
	for id, rule := range e.rules {
		rules[id] = *rule
	}
	e.mu.Unlock()
	page, next, aerr := setOf(rules, func(r sgRule, name string) []string { return sgRuleFilters[name](r) },
		"InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '%s' does not exist").
		withTags(func(r sgRule) map[string]string { return r.tags }).page(in)
	if aerr != nil {
		return nil, aerr
	}
	slices.SortStableFunc(page, func(a, b sgRule) int { return a.seq - b.seq })
	var out []sgRuleXML
	for _, rule := range page {
		out = append(out, e.ruleXML(&rule))
	}
	return newDescribeOutput(r, "securityGroupRuleSet", out, next), nil
}

// ruleXML describes a rule.
func (e *EC2) ruleXML(rule *sgRule) sgRuleXML {
	x := sgRuleXML{ID: rule.id, GroupID: rule.groupID, GroupOwnerID: e.AccountID, IsEgress: rule.egress, IPProtocol: rule.protocol,
		FromPort: rule.from, ToPort: rule.to, CIDRIPv4: rule.cidr, CIDRIPv6: rule.cidrV6, PrefixListID: rule.prefixList,
		Description: rule.description, Tags: tagSet(rule.tags),
		ARN: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group-rule/%s", e.Region, e.AccountID, rule.id)}
	if rule.referencedGroup != "" {
		x.ReferencedGroup = &referencedGroupXML{GroupID: rule.referencedGroup, UserID: e.AccountID}
	}
	return x
}
