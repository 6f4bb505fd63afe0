package ec2

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// taggedFleet launches two tagged instances and one without tags.
func taggedFleet(t *testing.T) *EC2 {
	t.Helper()
	e := New(awstest.Account)
	launches := []struct {
		inst Instance
		tags map[string]string
	}{
		{ec2Instance(1, "nodes"), map[string]string{"Name": "ng-1-node", "eks:nodegroup-name": "ng-1", "kubernetes.io/cluster/demo": "owned"}},
		{ec2Instance(2, "nodes"), map[string]string{"Name": "ng-2-node", "eks:nodegroup-name": "ng-2"}},
		{ec2Instance(3, ""), nil},
	}
	for _, l := range launches {
		if err := e.Launch(l.inst, WithTags(l.tags)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// DescribeInstances takes tag:KEY and tag-key filters, with EC2's wildcards.
func TestEC2TagFilters(t *testing.T) {
	client := newEC2Client(t, taggedFleet(t))
	id1, id2 := ec2Instance(1, "").ID, ec2Instance(2, "").ID
	f := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}
	tests := []struct {
		name    string
		filters []ec2types.Filter
		want    []string
	}{
		{"tag value", []ec2types.Filter{f("tag:eks:nodegroup-name", "ng-2")}, []string{id2}},
		{"tag values are ORed", []ec2types.Filter{f("tag:eks:nodegroup-name", "ng-1", "ng-2")}, []string{id1, id2}},
		{"tag value glob", []ec2types.Filter{f("tag:Name", "ng-?-*")}, []string{id1, id2}},
		{"tag value escaped glob", []ec2types.Filter{f("tag:Name", `ng-\?-*`)}, nil},
		{"tag of no instance", []ec2types.Filter{f("tag:Name", "other")}, nil},
		{"tag key absent", []ec2types.Filter{f("tag:team", "*")}, nil},
		{"tag-key", []ec2types.Filter{f("tag-key", "kubernetes.io/cluster/demo")}, []string{id1}},
		{"tag-key glob", []ec2types.Filter{f("tag-key", "eks:*")}, []string{id1, id2}},
		{"tag and state ANDed", []ec2types.Filter{f("tag:Name", "ng-*"), f("instance-id", id2)}, []string{id2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := describedIDs(out); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
