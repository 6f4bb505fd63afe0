package resource

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// template makes a launch template with n versions (each a new image) and returns its
// ID.
func (e *resEnv) template(t *testing.T, n int) string {
	t.Helper()
	c, _ := e.call("AWS::EC2::LaunchTemplate", "NodeLaunchTemplate", map[string]any{"LaunchTemplateData": ltData("ami-00000000000000001")})
	res, err := e.provisioner("AWS::EC2::LaunchTemplate").Create(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= n; i++ {
		_, err := e.cl.EC2.CreateLaunchTemplateVersion(context.Background(), &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String(res.PhysicalID),
			SourceVersion: aws.String("1"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(fmt.Sprintf("ami-%017d", i))}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return res.PhysicalID
}

// asgProps are a group's properties at launch template version.
func (e *resEnv) asgProps(lt, version string, min, max, desired string) map[string]any {
	var subnets []any
	for _, s := range e.subnets {
		subnets = append(subnets, s)
	}
	return map[string]any{
		"MinSize": min, "MaxSize": max, "DesiredCapacity": desired, "VPCZoneIdentifier": subnets,
		"LaunchTemplate": map[string]any{"LaunchTemplateId": lt, "Version": version},
		"Tags":           []any{map[string]any{"Key": "kubernetes.io/cluster/demo", "Value": "owned", "PropagateAtLaunch": "true"}},
	}
}

func TestAutoScalingGroupCreateScaleDelete(t *testing.T) {
	e := newResEnv(t)
	ctx := context.Background()
	lt := e.template(t, 2)
	p := e.provisioner("AWS::AutoScaling::AutoScalingGroup")
	props := e.asgProps(lt, "1", "1", "3", "2")
	c, ev := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^nodes-NodeGroup-[A-Z0-9]{13}$`).MatchString(res.PhysicalID) {
		t.Errorf("generated name %q, want nodes-NodeGroup- and 13 characters", res.PhysicalID)
	}
	g := e.inService(t, res.PhysicalID, 2)
	if aws.ToInt32(g.MinSize) != 1 || aws.ToInt32(g.MaxSize) != 3 || aws.ToString(g.LaunchTemplate.LaunchTemplateId) != lt {
		t.Errorf("group %+v, want sizes 1..3 from %s", g, lt)
	}
	launched, _ := e.launcher.record()
	for id, spec := range launched {
		for k, want := range map[string]string{"aws:cloudformation:stack-name": "nodes", "aws:cloudformation:logical-id": "NodeGroup",
			"team": "infra", "kubernetes.io/cluster/demo": "owned", "aws:autoscaling:groupName": res.PhysicalID} {
			if spec.Tags[k] != want {
				t.Errorf("instance %s tag %s = %q, want %q (tags %v)", id, k, spec.Tags[k], want, spec.Tags)
			}
		}
	}

	// Sizes change in place; a new template version without an UpdatePolicy leaves the
	// instances alone, as AWS does.
	c2, ev2 := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", e.asgProps(lt, "2", "1", "3", "3"))
	if _, err := p.Update(ctx, c2, res, props); err != nil {
		t.Fatal(err)
	}
	g = e.inService(t, res.PhysicalID, 3)
	if got := slices.Sorted(func(yield func(string) bool) {
		for _, v := range instanceVersions(g) {
			yield(v)
		}
	}); !slices.Equal(got, []string{"1", "1", "2"}) {
		t.Errorf("instance versions %v, want the two old ones kept and one new", got)
	}
	if _, terminated := e.launcher.record(); len(terminated) != 0 || len(ev.list())+len(ev2.list()) != 0 {
		t.Errorf("terminated %v, events %v %v: want none without an UpdatePolicy", terminated, ev.list(), ev2.list())
	}

	// Another name needs another group.
	c3, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", func() map[string]any {
		m := e.asgProps(lt, "2", "1", "3", "3")
		m["AutoScalingGroupName"] = "nodes"
		return m
	}())
	if _, err := p.Update(ctx, c3, res, c2.Properties); !errors.Is(err, ErrReplace) {
		t.Errorf("renaming: %v, want ErrReplace", err)
	}
	// So does a new template version under AutoScalingReplacingUpdate.
	c4, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", e.asgProps(lt, "1", "1", "3", "3"))
	c4.UpdatePolicy = map[string]any{"AutoScalingReplacingUpdate": map[string]any{"WillReplace": "true"}}
	if _, err := p.Update(ctx, c4, res, c2.Properties); !errors.Is(err, ErrReplace) {
		t.Errorf("WillReplace: %v, want ErrReplace", err)
	}

	if err := p.Delete(ctx, c, res); err != nil {
		t.Fatal(err)
	}
	if g := e.group(t, res.PhysicalID); g != nil {
		t.Errorf("group still described after Delete: %+v", g)
	}
	if _, terminated := e.launcher.record(); len(terminated) != 3 {
		t.Errorf("terminated %v, want the 3 instances", terminated)
	}
	if err := p.Delete(ctx, c, res); err != nil {
		t.Errorf("deleting it again: %v, want no error", err)
	}
}

func TestAutoScalingGroupRefusesBadProperties(t *testing.T) {
	e := newResEnv(t)
	lt := e.template(t, 1)
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"no MaxSize", func(m map[string]any) { delete(m, "MaxSize") }, "#: required key [MaxSize] not found"},
		{"MinSize not a number", func(m map[string]any) { m["MinSize"] = "one" }, `#/MinSize: expected type: Integer, found: "one"`},
		{"no version", func(m map[string]any) { m["LaunchTemplate"] = map[string]any{"LaunchTemplateId": lt} },
			"#/LaunchTemplate: required key [Version] not found"},
		{"id and name", func(m map[string]any) {
			m["LaunchTemplate"] = map[string]any{"LaunchTemplateId": lt, "LaunchTemplateName": "x", "Version": "1"}
		}, "#/LaunchTemplate: exactly one of LaunchTemplateId and LaunchTemplateName"},
		{"launch configuration", func(m map[string]any) { delete(m, "LaunchTemplate"); m["LaunchConfigurationName"] = "lc" },
			"#: extraneous key [LaunchConfigurationName]"},
		{"tag without PropagateAtLaunch", func(m map[string]any) { m["Tags"] = []any{map[string]any{"Key": "a", "Value": "b"}} },
			"#/Tags/0: required key [PropagateAtLaunch] not found"},
		{"Auto Scaling refuses", func(m map[string]any) { m["VPCZoneIdentifier"] = []any{"subnet-00000000000000000"} },
			"The subnet ID 'subnet-00000000000000000' does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := e.asgProps(lt, "1", "1", "3", "2")
			tc.edit(m)
			c, _ := e.call("AWS::AutoScaling::AutoScalingGroup", "NodeGroup", m)
			_, err := e.provisioner("AWS::AutoScaling::AutoScalingGroup").Create(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
