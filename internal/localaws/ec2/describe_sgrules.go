package ec2

// This file holds DescribeSecurityGroupRules: the rules of the local security groups,
// one per direction, as DescribeSecurityGroups shows them in its permissions.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// sgRule is one rule of a security group: the default group lets in all traffic from
// itself (referencedGroup) and out all traffic (cidr).
type sgRule struct {
	id, groupID           string
	egress                bool
	cidr, referencedGroup string
}

// ruleID derives a rule's ID from its group and direction.
func ruleID(groupID string, egress bool) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "sgr/%s/%t", groupID, egress))
	return "sgr-" + hex.EncodeToString(sum[:])[:17]
}

// sgRules are the local groups' rules by ID.
func sgRules() map[string]sgRule {
	g := defaultGroup.id
	rules := []sgRule{
		{id: ruleID(g, false), groupID: g, referencedGroup: g},
		{id: ruleID(g, true), groupID: g, egress: true, cidr: "0.0.0.0/0"},
	}
	out := map[string]sgRule{}
	for _, r := range rules {
		out[r.id] = r
	}
	return out
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
	page, next, aerr := setOf(sgRules(), func(r sgRule, name string) []string { return sgRuleFilters[name](r) },
		"InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '%s' does not exist").page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []sgRuleXML
	for _, rule := range page {
		x := sgRuleXML{ID: rule.id, GroupID: rule.groupID, GroupOwnerID: e.AccountID, IsEgress: rule.egress, IPProtocol: "-1",
			FromPort: -1, ToPort: -1, CIDRIPv4: rule.cidr,
			ARN: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group-rule/%s", e.Region, e.AccountID, rule.id)}
		if rule.referencedGroup != "" {
			x.ReferencedGroup = &referencedGroupXML{GroupID: rule.referencedGroup, UserID: e.AccountID}
		}
		out = append(out, x)
	}
	return newDescribeOutput(r, "securityGroupRuleSet", out, next), nil
}
