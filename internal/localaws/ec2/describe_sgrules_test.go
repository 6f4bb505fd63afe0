package ec2

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// The default group's rules, as eksctl reads them for a self-managed node group: all
// in from the group itself, all out.
func TestDescribeSecurityGroupRulesWithTheAWSClient(t *testing.T) {
	client := newEC2Client(t, localVPC(t))
	in, out := ruleID(DefaultSecurityGroupID, false), ruleID(DefaultSecurityGroupID, true)
	all, err := client.DescribeSecurityGroupRules(t.Context(), &ec2.DescribeSecurityGroupRulesInput{
		Filters: []ec2types.Filter{filter("group-id", DefaultSecurityGroupID)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.SecurityGroupRules) != 2 {
		t.Fatalf("rules %+v", all.SecurityGroupRules)
	}
	for _, r := range all.SecurityGroupRules {
		if aws.ToString(r.GroupId) != DefaultSecurityGroupID || aws.ToString(r.GroupOwnerId) != awstest.Account ||
			aws.ToString(r.IpProtocol) != "-1" || aws.ToInt32(r.FromPort) != -1 || aws.ToString(r.SecurityGroupRuleArn) == "" {
			t.Errorf("rule %+v", r)
		}
		switch aws.ToString(r.SecurityGroupRuleId) {
		case in:
			if aws.ToBool(r.IsEgress) || r.ReferencedGroupInfo == nil || aws.ToString(r.ReferencedGroupInfo.GroupId) != DefaultSecurityGroupID {
				t.Errorf("ingress rule %+v", r)
			}
		case out:
			if !aws.ToBool(r.IsEgress) || aws.ToString(r.CidrIpv4) != "0.0.0.0/0" || r.ReferencedGroupInfo != nil {
				t.Errorf("egress rule %+v", r)
			}
		default:
			t.Errorf("rule ID %s", aws.ToString(r.SecurityGroupRuleId))
		}
	}
	tests := []struct {
		name string
		in   ec2.DescribeSecurityGroupRulesInput
		want []string
	}{
		{"by ID", ec2.DescribeSecurityGroupRulesInput{SecurityGroupRuleIds: []string{out}}, []string{out}},
		{"another group", ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{filter("group-id", "sg-0000000000000000f")}}, nil},
		{"rule ID filter", ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{filter("security-group-rule-id", in)}}, []string{in}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.DescribeSecurityGroupRules(t.Context(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got.SecurityGroupRules {
				ids = append(ids, aws.ToString(r.SecurityGroupRuleId))
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("got %q, want %q", ids, tt.want)
			}
		})
	}
	_, err = client.DescribeSecurityGroupRules(t.Context(), &ec2.DescribeSecurityGroupRulesInput{SecurityGroupRuleIds: []string{"sgr-0000000000000000f"}})
	wantAPIError(t, err, "InvalidSecurityGroupRuleId.NotFound", "sgr-0000000000000000f")
	_, err = client.DescribeSecurityGroupRules(t.Context(), &ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{filter("colour", "red")}})
	wantAPIError(t, err, "InvalidParameterValue", "colour")
}
