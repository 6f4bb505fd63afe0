package ec2

import (
	"net/url"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
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
	lt := NewLaunchTemplates(awstest.Account)
	e := New(awstest.Account).WithLaunchTemplates(lt)
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := url.ParseQuery(string(body))
		if err != nil || lt.actions()[form.Get("Action")] == nil {
			return
		}
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), e, body), form.Get("Action")+"Response", "Response")
	})
}
