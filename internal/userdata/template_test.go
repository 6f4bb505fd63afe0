package userdata

import (
	"context"
	"os"
	"regexp"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// TestNodeGroupTemplateSignals checks that deploy/cloudformation/nodegroup.yaml's user
// data, with its Fn::Sub placeholders resolved here as CloudFormation would, gives a
// NodeConfig and a cfn-signal for the stack's NodeGroup.
func TestNodeGroupTemplateSignals(t *testing.T) {
	data, err := os.ReadFile("../../deploy/cloudformation/nodegroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ud := lookup(t, doc.Content[0], "Resources", "NodeLaunchTemplate", "Properties", "LaunchTemplateData", "UserData", "Fn::Base64")
	if ud.Tag != "!Sub" || ud.Kind != yaml.ScalarNode {
		t.Fatalf("UserData's Fn::Base64 is %s %q, want a !Sub string", ud.Tag, ud.Value)
	}
	values := map[string]string{
		"ClusterName": "c1", "ApiServerEndpoint": "https://api.example", "CertificateAuthorityData": "Zm9v",
		"ServiceCidr": "10.100.0.0/16", "AWS::StackName": "ng-stack", "AWS::Region": "us-west-2",
	}
	subbed := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(ud.Value, func(m string) string {
		v, ok := values[m[2:len(m)-1]]
		if !ok {
			t.Errorf("placeholder %s not resolved by the test", m)
		}
		return v
	})
	res, err := Decode(context.Background(), []byte(subbed), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal == nil || res.Signal.Stack != "ng-stack" || res.Signal.Resource != "NodeGroup" || res.Signal.Region != "us-west-2" {
		t.Fatalf("signal %+v; findings %v", res.Signal, res.Findings)
	}
	if len(res.Configs) != 1 || res.Configs[0].Config.Spec.Cluster.Name != "c1" {
		t.Fatalf("configs %+v", res.Configs)
	}
	for _, f := range res.Findings {
		if f.Level == LevelWarning {
			t.Errorf("warning: %s", f)
		}
	}
	// The group waits for the signals.
	policy := lookup(t, doc.Content[0], "Resources", "NodeGroup", "CreationPolicy", "ResourceSignal", "Count")
	if policy.Tag != "!Ref" || policy.Value != "NodeAutoScalingGroupDesiredCapacity" {
		t.Errorf("CreationPolicy.ResourceSignal.Count is %s %s", policy.Tag, policy.Value)
	}
	if w := lookup(t, doc.Content[0], "Resources", "NodeGroup", "UpdatePolicy", "AutoScalingRollingUpdate", "WaitOnResourceSignals"); w.Value != "true" {
		t.Errorf("WaitOnResourceSignals is %s", w.Value)
	}
}

func lookup(t *testing.T, n *yaml.Node, keys ...string) *yaml.Node {
	t.Helper()
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			t.Fatalf("no %s in the template", k)
		}
		n = next
	}
	return n
}
