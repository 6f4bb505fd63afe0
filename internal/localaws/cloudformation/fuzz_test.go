package cloudformation

import (
	"net/url"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// Arbitrary requests to the stack reads never panic and always get one well-formed
// CloudFormation answer.
func FuzzStackReads(f *testing.F) {
	for _, seed := range []string{
		"Action=ListStacks&Version=2010-05-15&StackStatusFilter.member.1=CREATE_COMPLETE&NextToken=b2Zmc2V0OjE",
		"Action=DescribeStacks&StackName=eksctl-demo-nodegroup-ng1",
		"Action=DescribeStackResources&PhysicalResourceId=lt-1&LogicalResourceId=NodeGroup",
		"Action=DescribeStackEvents&StackName=s&NextToken=!!",
		"Action=DescribeStacks&StackStatusFilter.member.01=x",
	} {
		f.Add([]byte(seed))
	}
	cf := New()
	cf.Stacks().Put(Stack{Name: "s", Status: "CREATE_COMPLETE", Created: time.Unix(0, 0),
		Resources: []Resource{{LogicalID: "NodeGroup", PhysicalID: "lt-1", Type: "AWS::EC2::LaunchTemplate", Status: "CREATE_COMPLETE"}},
		Events:    []Event{{ID: "e1", LogicalID: "s", Type: "AWS::CloudFormation::Stack", Status: "CREATE_COMPLETE"}}})
	actions := map[string]bool{"ListStacks": true, "DescribeStacks": true, "DescribeStackResources": true, "DescribeStackEvents": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || !actions[form.Get("Action")] {
			return
		}
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), cf, body), form.Get("Action")+"Response", "ErrorResponse")
	})
}
