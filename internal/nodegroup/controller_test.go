package nodegroup

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestInvalidSpecTouchesNoCloud(t *testing.T) {
	ng := baseGroup(2)
	ng.Spec.UpdateConfig = &v1alpha1.UpdateConfig{MaxUnavailable: ptr.To[int32](1), MaxUnavailablePercentage: ptr.To[int32](10)}
	h := newHarness(t, ng)
	h.tick()
	h.tick()
	got := h.get()
	c := meta(got, "Ready")
	if c == nil || c.Reason != "InvalidSpec" || !strings.Contains(c.Message, "spec.updateConfig") || got.Status.Phase != v1alpha1.PhaseCreateFailed {
		t.Errorf("condition %+v phase %s", c, got.Status.Phase)
	}
	if len(h.cloud.templates) != 0 || len(h.cloud.groups) != 0 {
		t.Error("an invalid group reached the cloud")
	}
}

func meta(ng *v1alpha1.NodeGroup, typ string) *metav1.Condition {
	for i := range ng.Status.Conditions {
		if ng.Status.Conditions[i].Type == typ {
			return &ng.Status.Conditions[i]
		}
	}
	return nil
}

// olderRelease is an older EKS-optimized AL2023 release than the harness's default image.
const olderRelease = "ami-0aaaaaaaaaaaaaaa1"

// An amiID that is an EKS-optimized release of the group's family (what the EKS API's
// releaseVersion sets) is no custom AMI: the group boots it with generated user data.
func TestReleaseImageBootsWithGeneratedUserData(t *testing.T) {
	ng := baseGroup(1)
	ng.Spec.Template.AMIID = olderRelease
	h := newHarness(t, ng)
	h.until("active", 40, active)
	for name, tp := range h.cloud.templates {
		data := tp.versions[len(tp.versions)-1].data
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
		if aws.ToString(data.ImageId) != olderRelease || !strings.Contains(string(ud), "kind: NodeConfig") {
			t.Errorf("launch template %s: image %s, user data:\n%s", name, aws.ToString(data.ImageId), ud)
		}
	}
	// Another family's release is a custom AMI for this group.
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.AMIFamily = v1alpha1.AMIFamilyAmazonLinux2 })
	h.until("reported", 40, func(ng *v1alpha1.NodeGroup) bool {
		return hasIssue(ng.Status.Health.Issues, v1alpha1.IssueEc2LaunchTemplateInvalidConfig)
	})
}

func TestUnrenderableUserDataIsReported(t *testing.T) {
	ng := baseGroup(1)
	// A custom AMI takes the user's user data as it is; without any there is nothing
	// to boot with.
	ng.Spec.Template.AMIID = "ami-0fedcba9876543210"
	h := newHarness(t, ng)
	h.tick()
	h.tick()
	got := h.get()
	if got.Status.Phase != v1alpha1.PhaseCreateFailed || !hasIssue(got.Status.Health.Issues, v1alpha1.IssueEc2LaunchTemplateInvalidConfig) ||
		!strings.Contains(got.Status.Health.Issues[0].Message, "custom AMI") {
		t.Errorf("phase %s issues %+v", got.Status.Phase, got.Status.Health.Issues)
	}
	if len(h.cloud.templates) != 0 || len(h.cloud.groups) != 0 {
		t.Error("a group without user data reached the cloud")
	}
	// Giving it user data lets it be created.
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.UserData = "#!/bin/bash\n/etc/eks/bootstrap.sh c1\n" })
	h.until("active", 40, active)
}
