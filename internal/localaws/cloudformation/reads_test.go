package cloudformation

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

func newClient(t *testing.T, cf *CloudFormation) *cloudformation.Client {
	t.Helper()
	srv := httptest.NewServer(cf)
	t.Cleanup(srv.Close)
	return cloudformation.NewFromConfig(awstest.SDKConfig(), func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// With no stacks, the reads answer as CloudFormation does for node groups eksctl did
// not create: empty lists, and ValidationError "does not exist" for a named stack.
func TestStackReadsWithoutStacks(t *testing.T) {
	c := newClient(t, New())
	ctx := t.Context()
	list, err := c.ListStacks(ctx, &cloudformation.ListStacksInput{StackStatusFilter: []cfntypes.StackStatus{cfntypes.StackStatusCreateComplete}})
	if err != nil || len(list.StackSummaries) != 0 {
		t.Fatalf("ListStacks = %+v, %v", list, err)
	}
	all, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{})
	if err != nil || len(all.Stacks) != 0 {
		t.Fatalf("DescribeStacks = %+v, %v", all, err)
	}
	const name = "eksctl-demo-nodegroup-ng1"
	_, err = c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	wantValidation(t, err, "Stack with id "+name+" does not exist")
	_, err = c.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(name)})
	wantValidation(t, err, "Stack with id "+name+" does not exist")
	_, err = c.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(name)})
	wantValidation(t, err, "Stack with id "+name+" does not exist")
	_, err = c.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{})
	wantValidation(t, err, "StackName or PhysicalResourceId")
	// The SDK itself requires DescribeStackEvents' StackName; the raw request is refused.
	if status, body := awstest.Post(t, New(), "Action=DescribeStackEvents&Version=2010-05-15", true); status != http.StatusBadRequest ||
		!strings.Contains(body, "<Code>ValidationError</Code>") || !strings.Contains(body, "stackName") {
		t.Errorf("no StackName: %d %s", status, body)
	}
	_, err = c.ListStacks(ctx, &cloudformation.ListStacksInput{StackStatusFilter: []cfntypes.StackStatus{"SOMEWHERE"}})
	wantValidation(t, err, "'stackStatusFilter'")
	_, err = c.ListStacks(ctx, &cloudformation.ListStacksInput{NextToken: aws.String("!!")})
	wantValidation(t, err, "NextToken")
	status, body := awstest.Post(t, New(), "Action=DescribeStacks&Version=2010-05-15&Colour=red", true)
	if status != http.StatusBadRequest || !strings.Contains(body, "Colour") {
		t.Errorf("unknown parameter: %d %s", status, body)
	}
}

func wantValidation(t *testing.T, err error, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want ValidationError %q", text)
	}
	if code, status := awstest.APICode(t, err); code != "ValidationError" || status != http.StatusBadRequest || !strings.Contains(err.Error(), text) {
		t.Errorf("error %v, want ValidationError %q", err, text)
	}
}

// The reads show what the store holds: live stacks by name, deleted ones by ID and in
// ListStacks, resources and events (newest first).
func TestStackReadsOfTheStore(t *testing.T) {
	cf := New().WithStacks(NewStacks("us-west-2", awstest.Account))
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	ng := cf.Stacks().Put(Stack{Name: "eksctl-demo-nodegroup-ng1", Description: "nodes", Status: "CREATE_COMPLETE", Created: t0,
		Parameters: map[string]string{"b": "2", "a": "1"}, Tags: map[string]string{"alpha.eksctl.io/cluster-name": "demo"},
		Outputs: []Output{{Key: "FeatureLocalSecurityGroup", Value: "true"}},
		Resources: []Resource{
			{LogicalID: "NodeGroup", PhysicalID: "eksctl-demo-nodegroup-ng1-NodeGroup-1", Type: "AWS::AutoScaling::AutoScalingGroup", Status: "CREATE_COMPLETE", Updated: t0},
			{LogicalID: "NodeGroupLaunchTemplate", PhysicalID: "lt-1", Type: "AWS::EC2::LaunchTemplate", Status: "CREATE_COMPLETE", Updated: t0},
		},
		Events: []Event{
			{ID: "e1", LogicalID: "eksctl-demo-nodegroup-ng1", Type: "AWS::CloudFormation::Stack", Status: "CREATE_IN_PROGRESS", Time: t0},
			{ID: "e2", LogicalID: "eksctl-demo-nodegroup-ng1", Type: "AWS::CloudFormation::Stack", Status: "CREATE_COMPLETE", Time: t0.Add(time.Minute)},
		}})
	gone := cf.Stacks().Put(Stack{Name: "old", Status: "DELETE_COMPLETE", Created: t0, Deleted: t0.Add(time.Hour)})
	if !strings.HasPrefix(ng.ID, "arn:aws:cloudformation:us-west-2:"+awstest.Account+":stack/eksctl-demo-nodegroup-ng1/") {
		t.Errorf("stack ID %s", ng.ID)
	}
	c := newClient(t, cf)
	ctx := t.Context()
	list, err := c.ListStacks(ctx, &cloudformation.ListStacksInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.StackSummaries {
		names = append(names, aws.ToString(s.StackName)+" "+string(s.StackStatus))
	}
	if !slices.Equal(names, []string{"eksctl-demo-nodegroup-ng1 CREATE_COMPLETE", "old DELETE_COMPLETE"}) {
		t.Errorf("ListStacks = %q", names)
	}
	list, _ = c.ListStacks(ctx, &cloudformation.ListStacksInput{StackStatusFilter: []cfntypes.StackStatus{cfntypes.StackStatusDeleteComplete}})
	if len(list.StackSummaries) != 1 || list.StackSummaries[0].DeletionTime == nil {
		t.Errorf("ListStacks of DELETE_COMPLETE = %+v", list.StackSummaries)
	}
	all, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{})
	if err != nil || len(all.Stacks) != 1 {
		t.Fatalf("DescribeStacks = %+v, %v", all, err)
	}
	s := all.Stacks[0]
	if aws.ToString(s.StackId) != ng.ID || s.StackStatus != cfntypes.StackStatusCreateComplete || !s.CreationTime.Equal(t0) ||
		len(s.Parameters) != 2 || aws.ToString(s.Parameters[0].ParameterKey) != "a" || len(s.Outputs) != 1 || len(s.Tags) != 1 {
		t.Errorf("stack %+v", s)
	}
	byID, err := c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(gone.ID)})
	if err != nil || len(byID.Stacks) != 1 || byID.Stacks[0].StackStatus != cfntypes.StackStatusDeleteComplete {
		t.Errorf("a deleted stack by ID: %+v %v", byID, err)
	}
	_, err = c.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("old")})
	wantValidation(t, err, "Stack with id old does not exist")
	res, err := c.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String("eksctl-demo-nodegroup-ng1"),
		LogicalResourceId: aws.String("NodeGroup")})
	if err != nil || len(res.StackResources) != 1 || aws.ToString(res.StackResources[0].PhysicalResourceId) != "eksctl-demo-nodegroup-ng1-NodeGroup-1" {
		t.Errorf("DescribeStackResources = %+v %v", res, err)
	}
	res, err = c.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{PhysicalResourceId: aws.String("lt-1")})
	if err != nil || len(res.StackResources) != 2 || aws.ToString(res.StackResources[0].StackName) != "eksctl-demo-nodegroup-ng1" {
		t.Errorf("DescribeStackResources by physical ID = %+v %v", res, err)
	}
	events, err := c.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(ng.ID)})
	if err != nil || len(events.StackEvents) != 2 || aws.ToString(events.StackEvents[0].EventId) != "e2" {
		t.Errorf("DescribeStackEvents = %+v %v", events, err)
	}
}
