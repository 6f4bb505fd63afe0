package nodegroup

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// A group with the user's launch template against the local cloud's EC2 on its wire
// protocol: the instances launch with the user's script merged into EKS's user data and
// the template's tags, and a new $Latest version (another instance type) rolls them.
func TestIntegrationLocalCloudUserLaunchTemplate(t *testing.T) {
	const user = "eksctl-c1-nodegroup-ng1"
	ng := baseGroup(2)
	ng.UID = ""
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{}
	ng.Spec.Template.InstanceTypes = nil
	ng.Spec.Template.LaunchTemplate = &v1alpha1.LaunchTemplateRef{Name: user, Version: "$Latest"}
	data := func(it ec2types.InstanceType) *ec2types.RequestLaunchTemplateData {
		d := eksctlTemplate(eksctlUserData)
		d.SecurityGroupIds, d.InstanceType = nil, it
		return d
	}
	lc := startLocalCloud(t, ng, func(ctx context.Context, c *ec2.Client) {
		if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(user), LaunchTemplateData: data("")}); err != nil {
			t.Fatal(err)
		}
	})
	lc.waitFor("active", active)
	check := func(instanceType string) {
		t.Helper()
		lc.launcher.mu.Lock()
		defer lc.launcher.mu.Unlock()
		n := 0
		for _, s := range lc.launcher.specs {
			if s.InstanceType != instanceType {
				continue
			}
			n++
			ud := string(s.UserData)
			if !strings.Contains(ud, "pre-bootstrap") || !strings.Contains(ud, "kind: NodeConfig") || s.Tags["alpha.eksctl.io/nodegroup-type"] != "managed" ||
				s.Tags["eks:nodegroup-name"] != "ng1" {
				t.Errorf("launched %+v", s)
			}
		}
		if n < 2 {
			t.Errorf("%d instances of %s launched", n, instanceType)
		}
	}
	check("m5.large")

	if _, err := lc.ec2c.CreateLaunchTemplateVersion(t.Context(), &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: aws.String(user),
		LaunchTemplateData: data(ec2types.InstanceTypeT3Large)}); err != nil {
		t.Fatal(err)
	}
	lc.waitFor("rolled", func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.SourceLaunchTemplate != nil && ng.Status.SourceLaunchTemplate.Version == "2" && ng.Status.UpdatedSize == 2
	})
	check("t3.large")
}
