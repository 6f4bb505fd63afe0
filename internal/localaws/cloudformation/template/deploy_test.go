package template

import (
	"encoding/base64"
	"os"
	"testing"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// nodejoin's own node-group template (deploy/cloudformation/nodegroup.yaml) validates,
// and the user data it gives its nodes — with the cluster's endpoint or without, when
// nodeadm asks EKS — decodes to a NodeConfig and a cfn-signal for this stack's NodeGroup,
// which waits for one signal per desired node.
func TestDeployedNodeGroupTemplate(t *testing.T) {
	body, err := os.ReadFile("../../../../deploy/cloudformation/nodegroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmpl.Validate(func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		endpoint string
	}{{"named cluster only", ""}, {"endpoint given", "https://198.18.0.1:6443"}} {
		t.Run(tc.name, func(t *testing.T) {
			given := map[string]string{"ClusterName": "c1", "NodeGroupName": "ng-1", "VpcId": "vpc-00000000000000000",
				"Subnets": "subnet-0a,subnet-0b", "ApiServerEndpoint": tc.endpoint}
			if tc.endpoint != "" {
				given["CertificateAuthorityData"] = "Zm9v"
			}
			params, err := tmpl.BindParameters(given, func(string) (string, error) { return "ami-0123456789abcdef0", nil })
			if err != nil {
				t.Fatal(err)
			}
			env := &Env{Parameters: params, AccountID: "111122223333", Region: "us-west-2", StackName: "ng-stack",
				Resource: func(string) (string, map[string]string, bool) {
					return "x", map[string]string{"Arn": "arn:aws:iam::111122223333:instance-profile/p", "LatestVersionNumber": "1"}, true
				}}
			if env.Conditions, err = tmpl.EvalConditions(env); err != nil {
				t.Fatal(err)
			}
			props, _, _, err := tmpl.EvalResource("NodeLaunchTemplate", env)
			if err != nil {
				t.Fatal(err)
			}
			data, err := base64.StdEncoding.DecodeString(props["LaunchTemplateData"].(map[string]any)["UserData"].(string))
			if err != nil {
				t.Fatal(err)
			}
			res, err := userdata.Decode(t.Context(), data, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if res.Signal == nil || res.Signal.Stack != "ng-stack" || res.Signal.Resource != "NodeGroup" || res.Signal.Region != "us-west-2" {
				t.Fatalf("signal %+v; findings %v", res.Signal, res.Findings)
			}
			if len(res.Configs) != 1 {
				t.Fatalf("configs %+v", res.Configs)
			}
			if c := res.Configs[0].Config.Spec.Cluster; c.Name != "c1" || c.APIServerEndpoint != tc.endpoint {
				t.Errorf("cluster %+v", c)
			}
			for _, f := range res.Findings {
				if f.Level == userdata.LevelWarning {
					t.Errorf("warning: %s", f)
				}
			}
			_, cp, up, err := tmpl.EvalResource("NodeGroup", env)
			if err != nil {
				t.Fatal(err)
			}
			if rs := cp["ResourceSignal"].(map[string]any); rs["Count"] != "2" {
				t.Errorf("CreationPolicy %v", cp)
			}
			if ru := up["AutoScalingRollingUpdate"].(map[string]any); ru["WaitOnResourceSignals"] != "true" {
				t.Errorf("UpdatePolicy %v", up)
			}
		})
	}
}
