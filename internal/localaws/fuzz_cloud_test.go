package localaws

import (
	"net/url"
	"testing"
)

// Arbitrary request bodies never panic the launch template actions and always get one
// well-formed EC2 answer.
func FuzzLaunchTemplateRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateLaunchTemplate&Version=2016-11-15&LaunchTemplateName=ng1&LaunchTemplateData.UserData=eA%3D%3D&LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1=sg-1",
		"Action=CreateLaunchTemplateVersion&LaunchTemplateName=ng1&SourceVersion=%24Latest&LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit=70",
		"Action=DescribeLaunchTemplateVersions&LaunchTemplateVersion.1=%24Default&LaunchTemplateVersion.02=1",
		"Action=DescribeLaunchTemplates&Filter.1.Name=tag%3Ak&Filter.1.Value.1=*&MaxResults=1&NextToken=b2Zmc2V0OjE",
		"Action=ModifyLaunchTemplate&LaunchTemplateId=lt-0123456789abcdef0&SetDefaultVersion=2",
		"Action=DeleteLaunchTemplate&LaunchTemplateName=ng1&LaunchTemplateData..=x",
	} {
		f.Add([]byte(seed))
	}
	lt := NewLaunchTemplates(testAccount)
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || !launchTemplateActions[form.Get("Action")] {
			return
		}
		checkQueryAnswer(t, fuzzRequest(t.Context(), lt, body), form.Get("Action")+"Response", "Response")
	})
}

// Arbitrary request bodies never panic Auto Scaling and always get one well-formed
// answer.
func FuzzAutoScalingRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateAutoScalingGroup&AutoScalingGroupName=g&MinSize=0&MaxSize=2&LaunchTemplate.LaunchTemplateName=ng1&AvailabilityZones.member.1=us-west-2a",
		"Action=CreateAutoScalingGroup&AutoScalingGroupName=g&MinSize=0&MaxSize=2&MixedInstancesPolicy.LaunchTemplate.Overrides.member.1.InstanceType=t3.large",
		"Action=UpdateAutoScalingGroup&AutoScalingGroupName=g&MaxSize=-1&VPCZoneIdentifier=%2C%2C",
		"Action=SetDesiredCapacity&AutoScalingGroupName=g&DesiredCapacity=99999999999999999999",
		"Action=DescribeAutoScalingGroups&Filters.member.1.Name=tag%3Ax&Filters.member.1.Values.member.1=y&MaxRecords=0",
		"Action=TerminateInstanceInAutoScalingGroup&InstanceIds.member.1=i-1&ShouldDecrementDesiredCapacity=maybe",
		"Action=DescribeScalingActivities&NextToken=%zz&IncludeDeletedGroups=true",
		"Action=DeleteAutoScalingGroup&AutoScalingGroupName=g&ForceDelete=true",
	} {
		f.Add([]byte(seed))
	}
	lt := NewLaunchTemplates(testAccount)
	if _, err := lt.Resolve("", "ng1", ""); err == nil {
		f.Fatal("no template expected")
	}
	a := NewAutoScaling(AutoScalingConfig{AccountID: testAccount, Region: "us-west-2", Templates: lt})
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return
		}
		w := fuzzRequest(t.Context(), a, body)
		checkQueryAnswer(t, w, form.Get("Action")+"Response", "ErrorResponse")
	})
}
