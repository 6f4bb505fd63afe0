package ec2

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// DescribeInstanceAttribute answers userData as base64, as the AWS CLI prints it under
// UserData.Value, and instanceType.
func TestDescribeInstanceAttributeWithTheAWSClient(t *testing.T) {
	e := New(awstest.Account)
	withData := ec2Instance(1, "nodes")
	withData.UserData = []byte("#!/bin/bash\n/etc/eks/bootstrap.sh demo\n")
	withData.Type = "c5.xlarge"
	for _, inst := range []Instance{withData, ec2Instance(2, "")} {
		if err := e.Launch(inst); err != nil {
			t.Fatal(err)
		}
	}
	client := newEC2Client(t, e)
	id1, id2 := withData.ID, ec2Instance(2, "").ID

	out, err := client.DescribeInstanceAttribute(t.Context(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id1), Attribute: ec2types.InstanceAttributeNameUserData})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.InstanceId) != id1 || out.UserData == nil {
		t.Fatalf("out = %+v", out)
	}
	if got, want := aws.ToString(out.UserData.Value), base64.StdEncoding.EncodeToString(withData.UserData); got != want {
		t.Errorf("userData = %q, want %q", got, want)
	}
	if out.InstanceType != nil {
		t.Errorf("instanceType answered unasked: %+v", out.InstanceType)
	}

	out, err = client.DescribeInstanceAttribute(t.Context(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id2), Attribute: ec2types.InstanceAttributeNameUserData})
	if err != nil {
		t.Fatal(err)
	}
	if out.UserData == nil || out.UserData.Value != nil {
		t.Errorf("userData of an instance without = %+v, want an empty value", out.UserData)
	}

	out, err = client.DescribeInstanceAttribute(t.Context(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id1), Attribute: ec2types.InstanceAttributeNameInstanceType})
	if err != nil {
		t.Fatal(err)
	}
	if out.InstanceType == nil || aws.ToString(out.InstanceType.Value) != "c5.xlarge" || out.UserData != nil {
		t.Errorf("instanceType = %+v, userData = %+v", out.InstanceType, out.UserData)
	}

	out, err = client.DescribeInstanceAttribute(t.Context(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id1), Attribute: ec2types.InstanceAttributeNameDisableApiTermination})
	if err != nil {
		t.Fatal(err)
	}
	if out.DisableApiTermination == nil || aws.ToBool(out.DisableApiTermination.Value) {
		t.Errorf("disableApiTermination = %+v", out.DisableApiTermination)
	}

	errs := []struct {
		name, id, attr, code, msg string
	}{
		{"unknown instance", "i-0000000000000000f", "userData", "InvalidInstanceID.NotFound", "i-0000000000000000f"},
		{"malformed instance", "i-xyz", "userData", "InvalidInstanceID.Malformed", "i-xyz"},
		{"unsupported attribute", id1, "kernel", "InvalidParameterValue", "kernel"},
		{"unknown attribute", id1, "colour", "InvalidParameterValue", "colour"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.DescribeInstanceAttribute(t.Context(), &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(tt.id), Attribute: ec2types.InstanceAttributeName(tt.attr)})
			if err == nil {
				t.Fatal("no error")
			}
			if code, _ := awstest.APICode(t, err); code != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %s (%v), want %s naming %q", code, err, tt.code, tt.msg)
			}
		})
	}
}
