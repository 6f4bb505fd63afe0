package ec2

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// Other VPCs keep their own options; restoring the default drops the domain.
func TestSetDHCPDomainName(t *testing.T) {
	e := New(awstest.Account)
	if err := e.SetDHCPDomainName("vpc-1", "corp.example"); err != nil {
		t.Fatal(err)
	}
	if got := e.DHCPDomainName("vpc-1"); got != "corp.example" {
		t.Errorf("vpc-1 domain = %q", got)
	}
	if got := e.DHCPDomainName("vpc-2"); got != "" {
		t.Errorf("vpc-2 domain = %q, want the default options", got)
	}
	if err := e.SetDHCPDomainName("vpc-1", ""); err != nil {
		t.Fatal(err)
	}
	if got := e.DHCPDomainName("vpc-1"); got != "" {
		t.Errorf("vpc-1 domain after reset = %q", got)
	}
	if err := e.SetDHCPDomainName("vpc-1", "Corp_Example."); err == nil {
		t.Error("an invalid domain was accepted")
	}
}

func TestValidateDHCPDomainName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"corp.example", true},
		{"foo", true},
		{"eu-west-1.compute.internal", true},
		{"a-b.c-d.example", true},
		{"", false},
		{"corp.example.", false},
		{"Corp.Example", false},
		{"corp_example.com", false},
		{"corp.example other.example", false},
		{"-corp.example", false},
		{"corp..example", false},
	}
	for _, tt := range tests {
		err := ValidateDHCPDomainName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateDHCPDomainName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// DescribeDhcpOptions, through the real SDK, shows each VPC's custom options set; IDs,
// filters and errors behave as EC2's.
func TestDescribeDhcpOptionsWithTheAWSClient(t *testing.T) {
	ctx := t.Context()
	e := New(awstest.Account)
	c := newEC2Client(t, e)
	out, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DhcpOptions) != 0 {
		t.Fatalf("options sets without a custom domain = %+v", out.DhcpOptions)
	}
	if err := e.SetDHCPDomainName("vpc-1", "corp.example"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetDHCPDomainName("vpc-2", "other.example"); err != nil {
		t.Fatal(err)
	}
	out, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{Filters: []ec2types.Filter{
		{Name: aws.String("key"), Values: []string{"domain-name"}}, {Name: aws.String("value"), Values: []string{"corp.*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DhcpOptions) != 1 {
		t.Fatalf("options sets = %+v, want vpc-1's", out.DhcpOptions)
	}
	o := out.DhcpOptions[0]
	id := aws.ToString(o.DhcpOptionsId)
	if !strings.HasPrefix(id, "dopt-") || len(id) != 22 || aws.ToString(o.OwnerId) != awstest.Account {
		t.Errorf("options set %s owned by %s", id, aws.ToString(o.OwnerId))
	}
	got := map[string]string{}
	for _, cfg := range o.DhcpConfigurations {
		for _, v := range cfg.Values {
			got[aws.ToString(cfg.Key)] += aws.ToString(v.Value)
		}
	}
	if got["domain-name"] != "corp.example" || got["domain-name-servers"] != "AmazonProvidedDNS" || len(got) != 2 {
		t.Errorf("configurations = %v", got)
	}
	byID, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{id}})
	if err != nil || len(byID.DhcpOptions) != 1 || aws.ToString(byID.DhcpOptions[0].DhcpOptionsId) != id {
		t.Errorf("by ID %s: %+v, %v", id, byID, err)
	}
	all, err := c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{})
	if err != nil || len(all.DhcpOptions) != 2 {
		t.Errorf("all options sets: %+v, %v", all, err)
	}
	_, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{DhcpOptionsIds: []string{"dopt-00000000000000000"}})
	if code, status := awstest.APICode(t, err); code != "InvalidDhcpOptionID.NotFound" || status != 400 {
		t.Errorf("unknown ID: %s %d", code, status)
	}
	_, err = c.DescribeDhcpOptions(ctx, &ec2.DescribeDhcpOptionsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-1"}}}})
	if code, _ := awstest.APICode(t, err); code != "InvalidParameterValue" {
		t.Errorf("unknown filter: %s", code)
	}
}
