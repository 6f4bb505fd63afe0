package resource

// This file holds AWS::EC2::LaunchTemplate; compute_asg.go and compute_rolling.go hold
// AWS::AutoScaling::AutoScalingGroup.

import (
	"context"
	"reflect"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// computeTypes are the compute resource types: launch templates and Auto Scaling
// groups.
func computeTypes(cl Clients) map[string]Provisioner {
	return map[string]Provisioner{
		"AWS::EC2::LaunchTemplate":           &launchTemplateType{cl: cl},
		"AWS::AutoScaling::AutoScalingGroup": &asgType{cl: cl},
	}
}

// launchTemplateType is AWS::EC2::LaunchTemplate. Ref is the template's ID.
type launchTemplateType struct{ cl Clients }

type launchTemplateProps struct {
	name, description string
	data              *ec2types.RequestLaunchTemplateData
	tags              []ec2types.Tag
}

func readLaunchTemplate(c *Call, props map[string]any) (launchTemplateProps, error) {
	p := newPropReader(c)
	p.known(props, "#", "LaunchTemplateData", "LaunchTemplateName", "TagSpecifications", "VersionDescription")
	p.required(props, "#", "LaunchTemplateData")
	out := launchTemplateProps{name: p.str(props, "#", "LaunchTemplateName"), description: p.str(props, "#", "VersionDescription")}
	if d := p.obj(props, "#", "LaunchTemplateData"); d != nil {
		out.data = p.launchTemplateData(d, "#/LaunchTemplateData")
	}
	for i, ts := range p.objList(props, "#", "TagSpecifications") {
		at := "#/TagSpecifications/" + strconv.Itoa(i)
		p.known(ts, at, "ResourceType", "Tags")
		if rt := p.str(ts, at, "ResourceType"); rt != "launch-template" {
			p.fail(at+"/ResourceType", "%q is not a resource type a launch template's own tags take: use launch-template (the instances' tags go in LaunchTemplateData/TagSpecifications)", rt)
		}
		out.tags = append(out.tags, p.ec2Tags(ts, at, "Tags")...)
	}
	return out, p.err
}

func (t *launchTemplateType) Create(ctx context.Context, c *Call) (Result, error) {
	lp, err := readLaunchTemplate(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	name := lp.name
	if name == "" {
		// CloudFormation's generated names: the logical ID and a random suffix.
		name = c.LogicalID + "_" + physicalSuffix(12)
	}
	tags := lp.tags
	for _, k := range sortedTagKeys(c.Tags) {
		tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(c.Tags[k])})
	}
	in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: lp.data}
	if lp.description != "" {
		in.VersionDescription = aws.String(lp.description)
	}
	if len(tags) > 0 {
		in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}
	}
	out, err := t.cl.EC2.CreateLaunchTemplate(ctx, in)
	if err != nil {
		return Result{}, serviceFailure("Ec2", err)
	}
	return launchTemplateResult(out.LaunchTemplate), nil
}

func launchTemplateResult(lt *ec2types.LaunchTemplate) Result {
	return Result{PhysicalID: aws.ToString(lt.LaunchTemplateId), Attributes: map[string]string{
		"LaunchTemplateId":     aws.ToString(lt.LaunchTemplateId),
		"LaunchTemplateName":   aws.ToString(lt.LaunchTemplateName),
		"LatestVersionNumber":  strconv.FormatInt(aws.ToInt64(lt.LatestVersionNumber), 10),
		"DefaultVersionNumber": strconv.FormatInt(aws.ToInt64(lt.DefaultVersionNumber), 10),
	}}
}

// Update makes a changed LaunchTemplateData a new version, made the default as
// CloudFormation does; another name or other tags of the template need a new one.
func (t *launchTemplateType) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	lp, err := readLaunchTemplate(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	if !reflect.DeepEqual(c.Properties["LaunchTemplateName"], oldProps["LaunchTemplateName"]) ||
		!reflect.DeepEqual(c.Properties["TagSpecifications"], oldProps["TagSpecifications"]) {
		return Result{}, ErrReplace
	}
	if !reflect.DeepEqual(c.Properties["LaunchTemplateData"], oldProps["LaunchTemplateData"]) {
		in := &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String(old.PhysicalID), LaunchTemplateData: lp.data}
		if lp.description != "" {
			in.VersionDescription = aws.String(lp.description)
		}
		out, err := t.cl.EC2.CreateLaunchTemplateVersion(ctx, in)
		if err != nil {
			return Result{}, serviceFailure("Ec2", err)
		}
		v := strconv.FormatInt(aws.ToInt64(out.LaunchTemplateVersion.VersionNumber), 10)
		if _, err := t.cl.EC2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String(old.PhysicalID), DefaultVersion: aws.String(v)}); err != nil {
			return Result{}, serviceFailure("Ec2", err)
		}
	}
	out, err := t.cl.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{old.PhysicalID}})
	if err != nil {
		return Result{}, serviceFailure("Ec2", err)
	}
	if len(out.LaunchTemplates) != 1 {
		return Result{}, &handlerError{msg: "Resource handler returned message: \"The launch template " + old.PhysicalID + " no longer exists.\" (HandlerErrorCode: NotFound)"}
	}
	return launchTemplateResult(&out.LaunchTemplates[0]), nil
}

func (t *launchTemplateType) Delete(ctx context.Context, _ *Call, r Result) error {
	if r.PhysicalID == "" {
		return nil // never made
	}
	_, err := t.cl.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(r.PhysicalID)})
	if err != nil && !strings.Contains(serviceErrorCode(err), "NotFound") && serviceErrorCode(err) != "InvalidLaunchTemplateId.Malformed" {
		return serviceFailure("Ec2", err)
	}
	return nil
}
