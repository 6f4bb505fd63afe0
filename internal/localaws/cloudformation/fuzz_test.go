package cloudformation

import (
	"net/url"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
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

// Arbitrary CreateStack and ValidateTemplate requests never panic, always get one
// well-formed answer, and a refused CreateStack leaves no stack behind.
func FuzzStackWrites(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateStack&StackName=a&TemplateBody=Resources%3A%0A++R%3A%0A++++Type%3A+AWS%3A%3AIAM%3A%3ARole%0A",
		"Action=ValidateTemplate&TemplateBody=%7B%22Resources%22%3A%7B%7D%7D",
		"Action=CreateStack&StackName=b&TemplateBody=Resources%3A+%5B",
		"Action=CreateStack&StackName=c&TemplateBody=Resources%3A%0A++R%3A%0A++++Type%3A+AWS%3A%3AIAM%3A%3ARole%0A++++Properties%3A+%7BX%3A+%21Ref+R%7D%0A",
		"Action=CreateStack&StackName=1bad&TemplateBody=x",
	} {
		f.Add([]byte(seed))
	}
	fc := &fakeCloud{live: map[string]map[string]any{}, members: map[string][]string{}}
	cf := New().WithEngine(f.Context(), EngineConfig{Provisioners: map[string]resource.Provisioner{"AWS::IAM::Role": fakeType{fc, "AWS::IAM::Role"}}})
	actions := map[string]bool{"CreateStack": true, "ValidateTemplate": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || !actions[form.Get("Action")] {
			return
		}
		name := form.Get("StackName")
		_, existed := cf.Stacks().Get(name)
		w := awstest.FuzzRequest(t.Context(), cf, body)
		awstest.CheckQueryAnswer(t, w, form.Get("Action")+"Response", "ErrorResponse")
		if form.Get("Action") == "CreateStack" && w.Code != 200 && !existed && name != "" {
			if _, ok := cf.Stacks().Get(name); ok {
				t.Errorf("a refused CreateStack stored stack %q", name)
			}
		}
	})
}
