package userdata_test

import (
	"encoding/base64"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	nodeadm "github.com/nodejoin/nodejoin/internal/userdata"
)

var subRE = regexp.MustCompile(`\$\{(!?)([A-Za-z0-9:]+)\}`)

// fnSub does what CloudFormation's Fn::Sub does with the parameters' defaults.
func fnSub(t *testing.T, s string, params map[string]any) string {
	return subRE.ReplaceAllStringFunc(s, func(m string) string {
		g := subRE.FindStringSubmatch(m)
		if g[1] == "!" {
			return "${" + g[2] + "}"
		}
		switch g[2] {
		case "AWS::StackName":
			return "nodes-stack"
		case "AWS::Region":
			return "us-west-2"
		}
		p, ok := params[g[2]].(map[string]any)
		if !ok {
			t.Fatalf("Fn::Sub names %s, which is no parameter", g[2])
		}
		v, _ := p["Default"].(string)
		return v
	})
}

func TestRenderCloudFormation(t *testing.T) {
	ca := testCA(t)
	for _, tc := range []struct {
		name string
		c    userdata.Cluster
		t    userdata.Template
	}{
		{"cfn-al2", userdata.Cluster{Name: "ironman-2022", Endpoint: "https://E.gr7.eu-west-1.eks.amazonaws.com", CertificateAuthority: ca, ServiceCIDR: "10.100.0.0/16"},
			userdata.Template{Family: v1alpha1.AMIFamilyAmazonLinux2, NodeGroupName: "demo-self-ng", InstanceType: "m5.large", MaxPods: userdata.Int32Ptr(29),
				Labels: map[string]string{"role": "worker"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
				PreBootstrapCommands: []string{"echo ${HOME}"}, Scaling: &userdata.Scaling{Min: 2, Desired: 2, Max: 5}}},
		{"cfn-al2023", userdata.Cluster{Name: "c1", Endpoint: "https://E.gr7.eu-west-1.eks.amazonaws.com", CertificateAuthority: ca, ServiceCIDR: "10.96.0.0/12"},
			userdata.Template{Family: v1alpha1.AMIFamilyAmazonLinux2023, NodeGroupName: "ng1", Labels: map[string]string{"role": "worker"},
				Kubelet: map[string]any{"shutdownGracePeriod": "30s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := userdata.RenderCloudFormation(tc.c, tc.t)
			if err != nil {
				t.Fatal(err)
			}
			// The CA is generated per run: keep it out of the golden file.
			userdata.CheckGolden(t, filepath.Join("testdata", "golden", tc.name+".yaml"), []byte(strings.ReplaceAll(string(out), base64.StdEncoding.EncodeToString(ca), "CA")))
			var doc map[string]any
			if err := yaml.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			params := doc["Parameters"].(map[string]any)
			lt := doc["Resources"].(map[string]any)["NodeLaunchTemplate"].(map[string]any)
			sub := lt["Properties"].(map[string]any)["LaunchTemplateData"].(map[string]any)["UserData"].(map[string]any)["Fn::Base64"].(map[string]any)["Fn::Sub"].(string)
			ud := fnSub(t, sub, params)
			if !strings.Contains(ud, "/opt/aws/bin/cfn-signal --exit-code $") || !strings.Contains(ud, "--stack nodes-stack --resource NodeGroup --region us-west-2") {
				t.Errorf("no cfn-signal line in\n%s", ud)
			}
			res, err := nodeadm.Decode(t.Context(), []byte(ud), vpcResolver{})
			if err != nil {
				t.Fatalf("nodeadm cannot decode the launch template's user data: %v\n%s", err, ud)
			}
			if len(res.Configs) != 1 {
				t.Fatalf("%d NodeConfigs", len(res.Configs))
			}
			c := res.Configs[0].Config
			if c.Spec.Cluster.Name != tc.c.Name || c.Spec.Cluster.APIServerEndpoint != tc.c.Endpoint || string(c.Spec.Cluster.CertificateAuthority) != string(ca) || c.Spec.Cluster.CIDR != tc.c.ServiceCIDR {
				t.Errorf("cluster %+v", c.Spec.Cluster)
			}
			if errs := c.Validate(); len(errs) > 0 {
				t.Errorf("invalid: %v", errs.ToAggregate())
			}
			if !strings.Contains(strings.Join(c.Spec.Kubelet.Flags, " "), "role=worker") {
				t.Errorf("flags %q", c.Spec.Kubelet.Flags)
			}
			ng := doc["Resources"].(map[string]any)["NodeGroup"].(map[string]any)
			if ng["CreationPolicy"] == nil || !strings.Contains(string(out), "WaitOnResourceSignals: true") {
				t.Errorf("the Auto Scaling group does not wait for the signals")
			}
		})
	}
}
