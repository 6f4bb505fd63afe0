package autoscaling

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// Of the reserved aws: tag keys, a group takes CloudFormation's three (the local
// CloudFormation makes a stack's groups through this API) and no other.
func TestAutoScalingReservedTags(t *testing.T) {
	e := newASGEnv(t, nil)
	e.template(t, "ng1", "x")
	create := func(name string, tags map[string]string) error {
		in := &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: aws.String(name), MinSize: aws.Int32(0), MaxSize: aws.Int32(1),
			LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1")}, VPCZoneIdentifier: aws.String(e.subnetIDs())}
		for k, v := range tags {
			in.Tags = append(in.Tags, astypes.Tag{Key: aws.String(k), Value: aws.String(v), PropagateAtLaunch: aws.Bool(true)})
		}
		_, err := e.asg.CreateAutoScalingGroup(context.Background(), in)
		return err
	}
	if err := create("stack", map[string]string{"aws:cloudformation:stack-name": "nodes", "aws:cloudformation:logical-id": "NodeGroup",
		"aws:cloudformation:stack-id": "arn:aws:cloudformation:us-west-2:111122223333:stack/nodes/1"}); err != nil {
		t.Fatalf("CloudFormation's tags: %v", err)
	}
	if got := len(e.group(t, "stack").Tags); got != 3 {
		t.Errorf("%d tags, want CloudFormation's 3", got)
	}
	for _, key := range []string{"aws:autoscaling:groupName", "aws:cloudformation:other"} {
		err := create("other", map[string]string{key: "v"})
		if err == nil {
			t.Fatalf("tag %s taken", key)
		}
		if code, _ := awstest.APICode(t, err); code != "ValidationError" || !strings.Contains(err.Error(), "reserved for internal use") {
			t.Errorf("tag %s: %v", key, err)
		}
	}
}
