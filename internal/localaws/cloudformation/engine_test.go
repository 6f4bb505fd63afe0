package cloudformation

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// fakeCloud is a cloud whose resources are entries in a map: what the engine made,
// changed and deleted, and in which order.
type fakeCloud struct {
	mu      sync.Mutex
	n       int
	live    map[string]map[string]any // physical ID → properties
	journal []string
	members map[string][]string // group → instances
}

type fakeType struct {
	cloud *fakeCloud
	typ   string
}

func (f fakeType) Create(_ context.Context, c *resource.Call) (resource.Result, error) {
	f.cloud.mu.Lock()
	defer f.cloud.mu.Unlock()
	if c.Properties["Fail"] == "true" {
		f.cloud.journal = append(f.cloud.journal, "fail "+c.LogicalID)
		return resource.Result{}, fmt.Errorf("%s refuses to be made", c.LogicalID)
	}
	f.cloud.n++
	id := fmt.Sprintf("%s-%d", strings.ToLower(c.LogicalID), f.cloud.n)
	f.cloud.live[id] = c.Properties
	f.cloud.journal = append(f.cloud.journal, "create "+c.LogicalID)
	return resource.Result{PhysicalID: id, Attributes: map[string]string{"Arn": "arn:fake:" + id}}, nil
}

func (f fakeType) Update(_ context.Context, c *resource.Call, old resource.Result, oldProps map[string]any) (resource.Result, error) {
	if c.Properties["Name"] != oldProps["Name"] {
		return resource.Result{}, resource.ErrReplace
	}
	f.cloud.mu.Lock()
	defer f.cloud.mu.Unlock()
	if c.Properties["Fail"] == "true" {
		f.cloud.journal = append(f.cloud.journal, "fail-update "+c.LogicalID)
		return resource.Result{}, fmt.Errorf("%s refuses to change", c.LogicalID)
	}
	f.cloud.live[old.PhysicalID] = c.Properties
	f.cloud.journal = append(f.cloud.journal, "update "+c.LogicalID)
	return old, nil
}

func (f fakeType) Delete(_ context.Context, c *resource.Call, r resource.Result) error {
	f.cloud.mu.Lock()
	defer f.cloud.mu.Unlock()
	delete(f.cloud.live, r.PhysicalID)
	f.cloud.journal = append(f.cloud.journal, "delete "+c.LogicalID)
	return nil
}

func (f *fakeCloud) snapshot() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.journal), len(f.live)
}

type engineFixture struct {
	cf    *CloudFormation
	cloud *fakeCloud
	sdk   *cloudformation.Client
}

func newEngineFixture(t *testing.T) *engineFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fc := &fakeCloud{live: map[string]map[string]any{}, members: map[string][]string{}}
	types := map[string]resource.Provisioner{}
	for _, typ := range []string{"AWS::IAM::Role", "AWS::EC2::SecurityGroup", "AWS::AutoScaling::AutoScalingGroup", "AWS::EC2::LaunchTemplate"} {
		types[typ] = fakeType{fc, typ}
	}
	cf := New().WithStacks(NewStacks("us-west-2", "111122223333")).WithEngine(ctx, EngineConfig{Provisioners: types, Region: "us-west-2",
		AccountID: "111122223333", Zones: []string{"us-west-2a", "us-west-2b"},
		SSM: func(_ context.Context, name string) (string, error) {
			if name == "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id" {
				return "ami-0123456789abcdef0", nil
			}
			return "", fmt.Errorf("ParameterNotFound: %s", name)
		}})
	cf.engine.groupInstances = func(_ context.Context, group string) []string {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return slices.Clone(fc.members[group])
	}
	cf.engine.consol = func(_ context.Context, id string) string {
		if id == "i-0000000000000bad0" {
			return "the kubelet could not reach the API server: dial tcp 10.0.0.1:443: connect: connection refused"
		}
		return ""
	}
	srv := httptest.NewServer(cf)
	t.Cleanup(func() {
		cancel()
		cf.engine.Wait()
		srv.Close()
	})
	sdk := cloudformation.NewFromConfig(awstest.SDKConfig(), func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	return &engineFixture{cf: cf, cloud: fc, sdk: sdk}
}

// settle waits until the stack leaves its in-progress statuses and returns it.
func (f *engineFixture) settle(t *testing.T, name string) cfntypes.Stack {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := f.sdk.DescribeStacks(t.Context(), &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		st := out.Stacks[0]
		if !strings.HasSuffix(string(st.StackStatus), "_IN_PROGRESS") {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack %s still %s", name, st.StackStatus)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *engineFixture) events(t *testing.T, name string) []string {
	t.Helper()
	out, err := f.sdk.DescribeStackEvents(t.Context(), &cloudformation.DescribeStackEventsInput{StackName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range slices.Backward(out.StackEvents) {
		line := aws.ToString(e.LogicalResourceId) + " " + string(e.ResourceStatus)
		if r := aws.ToString(e.ResourceStatusReason); r != "" {
			line += " " + r
		}
		lines = append(lines, line)
	}
	return lines
}

var iamCaps = []cfntypes.Capability{cfntypes.CapabilityCapabilityIam}

const basicTemplate = `
AWSTemplateFormatVersion: "2010-09-09"
Description: a role, a security group that names it, and an output exported
Parameters:
  Env:
    Type: String
    AllowedValues: [dev, prod]
  Secret:
    Type: String
    NoEcho: true
    Default: hunter2
  Image:
    Type: AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>
    Default: /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id
  FailGroup:
    Type: String
    Default: "false"
Conditions:
  IsProd: !Equals [!Ref Env, prod]
Resources:
  Group:
    Type: AWS::EC2::SecurityGroup
    Properties:
      Name: !Sub "${AWS::StackName}-${Env}"
      RoleArn: !GetAtt Role.Arn
      Image: !Ref Image
      Zone: !Select [1, !GetAZs ""]
      Fail: !Ref FailGroup
  Role:
    Type: AWS::IAM::Role
    Properties:
      Name: role
      Extra: !If [IsProd, big, !Ref "AWS::NoValue"]
Outputs:
  GroupId:
    Value: !Ref Group
    Export:
      Name: !Sub "${AWS::StackName}-GroupId"
`

func TestEngineCreatesInDependencyOrderAndDeletesInReverse(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	_, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("s1"), TemplateBody: aws.String(basicTemplate), Capabilities: iamCaps,
		Parameters: []cfntypes.Parameter{{ParameterKey: aws.String("Env"), ParameterValue: aws.String("dev")}}})
	if err != nil {
		t.Fatal(err)
	}
	st := f.settle(t, "s1")
	if st.StackStatus != cfntypes.StackStatusCreateComplete {
		t.Fatalf("status %s: %s\n%s", st.StackStatus, aws.ToString(st.StackStatusReason), strings.Join(f.events(t, "s1"), "\n"))
	}
	journal, live := f.cloud.snapshot()
	if !slices.Equal(journal, []string{"create Role", "create Group"}) || live != 2 {
		t.Errorf("journal %v, %d live", journal, live)
	}
	f.cloud.mu.Lock()
	props := f.cloud.live["group-2"]
	f.cloud.mu.Unlock()
	want := map[string]any{"Name": "s1-dev", "RoleArn": "arn:fake:role-1", "Image": "ami-0123456789abcdef0", "Zone": "us-west-2b", "Fail": "false"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("Group's %s = %v, want %v", k, props[k], v)
		}
	}
	for _, p := range st.Parameters {
		if aws.ToString(p.ParameterKey) == "Secret" && aws.ToString(p.ParameterValue) != "****" {
			t.Errorf("a NoEcho parameter is shown: %q", aws.ToString(p.ParameterValue))
		}
	}
	if len(st.Outputs) != 1 || aws.ToString(st.Outputs[0].OutputValue) != "group-2" || aws.ToString(st.Outputs[0].ExportName) != "s1-GroupId" {
		t.Errorf("outputs %+v", st.Outputs)
	}
	ex, err := f.sdk.ListExports(ctx, &cloudformation.ListExportsInput{})
	if err != nil || len(ex.Exports) != 1 || aws.ToString(ex.Exports[0].Value) != "group-2" {
		t.Errorf("exports %+v %v", ex, err)
	}
	wantEvents := []string{
		"s1 CREATE_IN_PROGRESS User Initiated",
		"Role CREATE_IN_PROGRESS", "Role CREATE_IN_PROGRESS Resource creation Initiated", "Role CREATE_COMPLETE",
		"Group CREATE_IN_PROGRESS", "Group CREATE_IN_PROGRESS Resource creation Initiated", "Group CREATE_COMPLETE",
		"s1 CREATE_COMPLETE",
	}
	if got := f.events(t, "s1"); !slices.Equal(got, wantEvents) {
		t.Errorf("events:\n%s", strings.Join(got, "\n"))
	}
	res, err := f.sdk.ListStackResources(ctx, &cloudformation.ListStackResourcesInput{StackName: aws.String("s1")})
	if err != nil || len(res.StackResourceSummaries) != 2 {
		t.Fatalf("resources %+v %v", res, err)
	}
	tb, err := f.sdk.GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: aws.String("s1")})
	if err != nil || aws.ToString(tb.TemplateBody) != basicTemplate {
		t.Errorf("GetTemplate: %v", err)
	}

	if _, err := f.sdk.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String("s1")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := f.cf.stacks.Get("s1"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stack was not deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	journal, live = f.cloud.snapshot()
	if !slices.Equal(journal[2:], []string{"delete Group", "delete Role"}) || live != 0 {
		t.Errorf("journal %v, %d live", journal, live)
	}
	ls, err := f.sdk.ListStacks(ctx, &cloudformation.ListStacksInput{})
	if err != nil || len(ls.StackSummaries) != 1 || ls.StackSummaries[0].StackStatus != cfntypes.StackStatusDeleteComplete {
		t.Errorf("ListStacks after delete: %+v %v", ls, err)
	}
	ex, _ = f.sdk.ListExports(ctx, &cloudformation.ListExportsInput{})
	if len(ex.Exports) != 0 {
		t.Errorf("a deleted stack's export is still listed: %+v", ex.Exports)
	}
}

func TestEngineRollsBackAFailedCreation(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	params := []cfntypes.Parameter{{ParameterKey: aws.String("Env"), ParameterValue: aws.String("prod")},
		{ParameterKey: aws.String("FailGroup"), ParameterValue: aws.String("true")}}
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("s2"), TemplateBody: aws.String(basicTemplate), Capabilities: iamCaps, Parameters: params}); err != nil {
		t.Fatal(err)
	}
	st := f.settle(t, "s2")
	if st.StackStatus != cfntypes.StackStatusRollbackComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	if _, live := f.cloud.snapshot(); live != 0 {
		t.Errorf("%d resources left after the rollback", live)
	}
	events := strings.Join(f.events(t, "s2"), "\n")
	for _, want := range []string{
		`Group CREATE_FAILED Resource handler returned message: "Group refuses to be made"`,
		"s2 ROLLBACK_IN_PROGRESS The following resource(s) failed to create: [Group]. Rollback requested by user.",
		"Role DELETE_COMPLETE", "s2 ROLLBACK_COMPLETE",
	} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in\n%s", want, events)
		}
	}
	// With rollback disabled the stack stays, failed, with what was made.
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("s3"), TemplateBody: aws.String(basicTemplate), Capabilities: iamCaps,
		Parameters: params, DisableRollback: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "s3"); st.StackStatus != cfntypes.StackStatusCreateFailed {
		t.Fatalf("status %s", st.StackStatus)
	}
	if _, live := f.cloud.snapshot(); live != 1 {
		t.Errorf("%d resources live, want the role", live)
	}
}

func TestEngineRefusesBadTemplatesBeforeMakingAnything(t *testing.T) {
	f := newEngineFixture(t)
	cycle := "Resources:\n  A:\n    Type: AWS::IAM::Role\n    Properties: {X: !Ref B}\n  B:\n    Type: AWS::IAM::Role\n    Properties: {X: !GetAtt A.Arn}\n"
	for name, tc := range map[string]struct {
		body   string
		params []cfntypes.Parameter
		want   string
	}{
		"syntax":            {"Resources: [", nil, ""},
		"unknown type":      {"Resources:\n  A:\n    Type: AWS::Lambda::Function\n", nil, "AWS::Lambda::Function"},
		"cycle":             {cycle, nil, "Circular dependency between resources"},
		"missing ref":       {"Resources:\n  A:\n    Type: AWS::IAM::Role\n    Properties: {X: !Ref Nope}\n", nil, "Nope"},
		"missing parameter": {basicTemplate, nil, "Env"},
		"no capability":     {updateTemplate, nil, "Requires capabilities : [CAPABILITY_IAM]"},
		"not allowed":       {basicTemplate, []cfntypes.Parameter{{ParameterKey: aws.String("Env"), ParameterValue: aws.String("qa")}}, "AllowedValues"},
	} {
		t.Run(name, func(t *testing.T) {
			caps := iamCaps
			if name == "no capability" {
				caps = nil
			}
			_, err := f.sdk.CreateStack(t.Context(), &cloudformation.CreateStackInput{StackName: aws.String("bad"), TemplateBody: aws.String(tc.body), Parameters: tc.params, Capabilities: caps})
			code, status := awstest.APICode(t, err)
			want := "ValidationError"
			if name == "no capability" {
				want = "InsufficientCapabilitiesException"
			}
			if code != want || status != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v", err)
			}
			// ValidateTemplate refuses what is wrong in the template itself.
			if _, verr := f.sdk.ValidateTemplate(t.Context(), &cloudformation.ValidateTemplateInput{TemplateBody: aws.String(tc.body)}); (tc.body != basicTemplate && tc.body != updateTemplate) != (verr != nil) {
				t.Errorf("ValidateTemplate: %v", verr)
			}
		})
	}
	if _, ok := f.cf.stacks.Get("bad"); ok {
		t.Error("a refused stack was stored")
	}
	if journal, _ := f.cloud.snapshot(); len(journal) != 0 {
		t.Errorf("something was made: %v", journal)
	}
}

const signalTemplate = `
Resources:
  Group:
    Type: AWS::AutoScaling::AutoScalingGroup
    CreationPolicy:
      ResourceSignal: {Count: 2, Timeout: PT3S}
    Properties:
      Name: g
`

func (f *engineFixture) signal(ctx context.Context, stack, logical, id string, status cfntypes.ResourceSignalStatus) error {
	_, err := f.sdk.SignalResource(ctx, &cloudformation.SignalResourceInput{StackName: aws.String(stack), LogicalResourceId: aws.String(logical),
		UniqueId: aws.String(id), Status: status})
	return err
}

// waitResource waits until the stack's resource exists with a physical ID.
func (f *engineFixture) waitResource(t *testing.T, stack, logical string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := f.cf.stacks.Get(stack); ok {
			for _, r := range st.Resources {
				if r.LogicalID == logical && r.PhysicalID != "" {
					return r.PhysicalID
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s/%s never made", stack, logical)
	return ""
}

func TestEngineWaitsForSignalsFromTheGroupsInstances(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	if err := f.signal(ctx, "nope", "Group", "i-1", cfntypes.ResourceSignalStatusSuccess); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("signal for no stack: %v", err)
	}
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("sig"), TemplateBody: aws.String(signalTemplate)}); err != nil {
		t.Fatal(err)
	}
	group := f.waitResource(t, "sig", "Group")
	f.cloud.mu.Lock()
	f.cloud.members[group] = []string{"i-00000000000000001", "i-00000000000000002"}
	f.cloud.mu.Unlock()
	if err := f.signal(ctx, "sig", "Other", "i-00000000000000001", cfntypes.ResourceSignalStatusSuccess); err == nil {
		t.Error("a signal for a resource the stack lacks was taken")
	}
	if err := f.signal(ctx, "sig", "Group", "i-0000000000000000f", cfntypes.ResourceSignalStatusSuccess); err == nil || !strings.Contains(err.Error(), "is not an instance of resource Group") {
		t.Errorf("a signal from outside the group: %v", err)
	}
	for _, id := range []string{"i-00000000000000001", "i-00000000000000002"} {
		if err := f.signal(ctx, "sig", "Group", id, cfntypes.ResourceSignalStatusSuccess); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.settle(t, "sig"); st.StackStatus != cfntypes.StackStatusCreateComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	events := strings.Join(f.events(t, "sig"), "\n")
	if !strings.Contains(events, "Group CREATE_IN_PROGRESS Received SUCCESS signal with UniqueId i-00000000000000002") {
		t.Errorf("events:\n%s", events)
	}
	// Once complete the group takes no more signals.
	if err := f.signal(ctx, "sig", "Group", "i-00000000000000001", cfntypes.ResourceSignalStatusSuccess); err == nil || !strings.Contains(err.Error(), "cannot be signaled") {
		t.Errorf("a signal after completion: %v", err)
	}
	refused := f.cf.RefusedSignals()
	for _, reason := range []string{"no-such-stack", "no-such-resource", "not-an-instance-of-the-resource", "not-waiting"} {
		if refused[reason] != 1 {
			t.Errorf("refused %v", refused)
		}
	}
}

func TestEngineFailsAStackWithTheNodesOwnReason(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("bad-node"), TemplateBody: aws.String(signalTemplate)}); err != nil {
		t.Fatal(err)
	}
	group := f.waitResource(t, "bad-node", "Group")
	f.cloud.mu.Lock()
	f.cloud.members[group] = []string{"i-0000000000000bad0"}
	f.cloud.mu.Unlock()
	if err := f.signal(ctx, "bad-node", "Group", "i-0000000000000bad0", cfntypes.ResourceSignalStatusFailure); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "bad-node"); st.StackStatus != cfntypes.StackStatusRollbackComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	events := strings.Join(f.events(t, "bad-node"), "\n")
	want := "Group CREATE_FAILED Received FAILURE signal with UniqueId i-0000000000000bad0: the kubelet could not reach the API server"
	if !strings.Contains(events, want) {
		t.Errorf("no %q in\n%s", want, events)
	}
	// A group none of whose instances signals fails when the timeout passes, saying
	// what the silent instance's console says.
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("silent"), TemplateBody: aws.String(signalTemplate)}); err != nil {
		t.Fatal(err)
	}
	group = f.waitResource(t, "silent", "Group")
	f.cloud.mu.Lock()
	f.cloud.members[group] = []string{"i-0000000000000bad0"}
	f.cloud.mu.Unlock()
	if st := f.settle(t, "silent"); st.StackStatus != cfntypes.StackStatusRollbackComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	events = strings.Join(f.events(t, "silent"), "\n")
	if !strings.Contains(events, "Failed to receive 2 resource signal(s) within the specified duration (received 0); i-0000000000000bad0: the kubelet") {
		t.Errorf("events:\n%s", events)
	}
}

const updateTemplate = `
Parameters:
  RoleName: {Type: String, Default: role}
  Size: {Type: String, Default: "1"}
  FailSize: {Type: String, Default: "false"}
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties: {Name: !Ref RoleName}
  Group:
    Type: AWS::AutoScaling::AutoScalingGroup
    Properties: {Name: g, Role: !GetAtt Role.Arn, Size: !Ref Size, Fail: !Ref FailSize}
`

func TestEngineUpdatesReplacesAndRollsBack(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("u"), TemplateBody: aws.String(updateTemplate), Capabilities: iamCaps}); err != nil {
		t.Fatal(err)
	}
	f.settle(t, "u")
	update := func(params ...string) error {
		var ps []cfntypes.Parameter
		for i := 0; i < len(params); i += 2 {
			ps = append(ps, cfntypes.Parameter{ParameterKey: aws.String(params[i]), ParameterValue: aws.String(params[i+1])})
		}
		_, err := f.sdk.UpdateStack(ctx, &cloudformation.UpdateStackInput{StackName: aws.String("u"), UsePreviousTemplate: aws.Bool(true), Parameters: ps, Capabilities: iamCaps})
		return err
	}
	if err := update(); err == nil || !strings.Contains(err.Error(), "No updates are to be performed.") {
		t.Errorf("an empty update: %v", err)
	}
	// In place.
	if err := update("Size", "3"); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "u"); st.StackStatus != cfntypes.StackStatusUpdateComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	// A new role name replaces the role, and the group that names its ARN changes.
	if err := update("Size", "3", "RoleName", "other"); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "u"); st.StackStatus != cfntypes.StackStatusUpdateComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	journal, live := f.cloud.snapshot()
	want := []string{"create Role", "create Group", "update Group", "create Role", "update Group", "delete Role"}
	if !slices.Equal(journal, want) || live != 2 {
		t.Errorf("journal %v (want %v), %d live", journal, want, live)
	}
	// A failed update rolls back to the previous properties.
	if err := update("Size", "5", "RoleName", "other", "FailSize", "true"); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "u"); st.StackStatus != cfntypes.StackStatusUpdateRollbackComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	f.cloud.mu.Lock()
	var size any
	for id, p := range f.cloud.live {
		if strings.HasPrefix(id, "group-") {
			size = p["Size"]
		}
	}
	f.cloud.mu.Unlock()
	if size != "3" {
		t.Errorf("after the rollback the group's size is %v, want 3", size)
	}
	events := strings.Join(f.events(t, "u"), "\n")
	if !strings.Contains(events, "u UPDATE_ROLLBACK_IN_PROGRESS The following resource(s) failed to update: [Group].") {
		t.Errorf("events:\n%s", events)
	}
}

// A change set says what an update would change, and runs it when executed; one that
// changes nothing fails with CloudFormation's reason, as eksctl expects.
func TestEngineChangeSets(t *testing.T) {
	f := newEngineFixture(t)
	ctx := t.Context()
	if _, err := f.sdk.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("cs"), TemplateBody: aws.String(updateTemplate), Capabilities: iamCaps}); err != nil {
		t.Fatal(err)
	}
	f.settle(t, "cs")
	create := func(name string, params ...cfntypes.Parameter) (arn string) {
		t.Helper()
		out, err := f.sdk.CreateChangeSet(ctx, &cloudformation.CreateChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String(name),
			UsePreviousTemplate: aws.Bool(true), Parameters: params, Capabilities: iamCaps})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Id)
	}
	create("nothing")
	d, err := f.sdk.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String("nothing")})
	if err != nil || d.Status != cfntypes.ChangeSetStatusFailed || aws.ToString(d.StatusReason) != noChanges {
		t.Errorf("a change set of nothing: %+v %v", d, err)
	}
	bigger := create("bigger", cfntypes.Parameter{ParameterKey: aws.String("Size"), ParameterValue: aws.String("4")})
	d, err = f.sdk.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String("bigger")})
	if err != nil || d.Status != cfntypes.ChangeSetStatusCreateComplete || d.ExecutionStatus != cfntypes.ExecutionStatusAvailable ||
		len(d.Changes) != 1 || aws.ToString(d.Changes[0].ResourceChange.LogicalResourceId) != "Group" || d.Changes[0].ResourceChange.Action != cfntypes.ChangeActionModify {
		t.Fatalf("change set: %+v %v", d, err)
	}
	if journal, _ := f.cloud.snapshot(); len(journal) != 2 {
		t.Errorf("creating a change set changed something: %v", journal)
	}
	if _, err := f.sdk.ExecuteChangeSet(ctx, &cloudformation.ExecuteChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String("bigger")}); err != nil {
		t.Fatal(err)
	}
	if st := f.settle(t, "cs"); st.StackStatus != cfntypes.StackStatusUpdateComplete {
		t.Fatalf("status %s", st.StackStatus)
	}
	if journal, _ := f.cloud.snapshot(); !slices.Equal(journal, []string{"create Role", "create Group", "update Group"}) {
		t.Errorf("journal %v", journal)
	}
	// As in AWS, executing a change set takes the stack's change sets off its list: the
	// others no longer apply, and the executed one is described by its ARN only.
	list, err := f.sdk.ListChangeSets(ctx, &cloudformation.ListChangeSetsInput{StackName: aws.String("cs")})
	if err != nil || len(list.Summaries) != 0 {
		t.Fatalf("ListChangeSets after an execution: %+v %v", list, err)
	}
	d, err = f.sdk.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{ChangeSetName: aws.String(bigger)})
	if err != nil || d.ExecutionStatus != cfntypes.ExecutionStatusExecuteComplete {
		t.Errorf("the executed change set by its ARN: %+v %v", d, err)
	}
	// eksctl's upgrade makes two change sets of one name within a second, executing the first.
	if again := create("bigger", cfntypes.Parameter{ParameterKey: aws.String("Size"), ParameterValue: aws.String("5")}); again == bigger {
		t.Errorf("the reused name kept the executed change set's ARN %s", again)
	}
	if _, err := f.sdk.DeleteChangeSet(ctx, &cloudformation.DeleteChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String("bigger")}); err != nil {
		t.Error(err)
	}
	if _, err := f.sdk.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String("cs"), ChangeSetName: aws.String("nothing")}); err == nil {
		t.Error("a deleted change set is still described")
	}
}
