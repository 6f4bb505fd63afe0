package v1alpha1

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"
)

func validGroup() *NodeGroup {
	return &NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ng-1"},
		Spec: NodeGroupSpec{
			Scaling:  ScalingConfig{MinSize: 1, MaxSize: 4, DesiredSize: ptr.To[int32](2)},
			Template: NodeTemplate{InstanceTypes: []string{"m5.large"}},
		},
	}
}

func TestNodeGroupDefault(t *testing.T) {
	ng := &NodeGroup{Spec: NodeGroupSpec{Scaling: ScalingConfig{MinSize: 3, MaxSize: 5}}}
	ng.Default()
	s := ng.Spec
	if *s.Scaling.DesiredSize != 3 || s.Template.AMIFamily != AMIFamilyAmazonLinux2023 || s.Template.CapacityType != CapacityOnDemand || s.Template.UserDataStyle != UserDataStyleManaged ||
		len(s.Template.InstanceTypes) != 1 || s.Template.InstanceTypes[0] != "m5.large" || *s.UpdateConfig.MaxUnavailable != 1 ||
		s.UpdateStrategy != UpdateStrategyDefault || s.Timeouts.JoinTimeout.Duration != 15*time.Minute ||
		s.Timeouts.DrainTimeout.Duration != 15*time.Minute || s.Timeouts.PostDrainWait.Duration != time.Minute ||
		s.Timeouts.DeleteDrainTimeout.Duration != 5*time.Minute {
		t.Errorf("defaulted spec = %+v", s)
	}
	// Set fields stay.
	ng = validGroup()
	ng.Spec.UpdateConfig = &UpdateConfig{MaxUnavailablePercentage: ptr.To[int32](50)}
	ng.Default()
	if *ng.Spec.Scaling.DesiredSize != 2 || ng.Spec.UpdateConfig.MaxUnavailable != nil {
		t.Errorf("Default changed set fields: %+v", ng.Spec)
	}
}

// The CRD's defaults are the Go defaults (desiredSize aside, which no CRD default can
// express).
func TestNodeGroupCRDDefaultsMatch(t *testing.T) {
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(NodeGroupCRD, &crd); err != nil {
		t.Fatal(err)
	}
	prop := func(path ...string) map[string]any {
		m := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, p := range path {
			m = m["properties"].(map[string]any)[p].(map[string]any)
		}
		return m
	}
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"spec", "template", "amiFamily"}, string(DefaultAMIFamily)},
		{[]string{"spec", "template", "capacityType"}, string(DefaultCapacityType)},
		{[]string{"spec", "template", "userDataStyle"}, string(DefaultUserDataStyle)},
		{[]string{"spec", "updateStrategy"}, string(DefaultUpdateStrategy)},
		{[]string{"spec", "timeouts", "joinTimeout"}, "15m"},
		{[]string{"spec", "timeouts", "drainTimeout"}, "15m"},
		{[]string{"spec", "timeouts", "postDrainWait"}, "60s"},
		{[]string{"spec", "timeouts", "deleteDrainTimeout"}, "5m"},
	} {
		got := prop(c.path...)["default"]
		if got != c.want {
			t.Errorf("CRD default of %s = %v, want %v", strings.Join(c.path, "."), got, c.want)
		}
		if s, ok := got.(string); ok && strings.HasSuffix(c.path[len(c.path)-1], "Timeout") || c.path[len(c.path)-1] == "postDrainWait" {
			d, err := time.ParseDuration(s)
			if err != nil {
				t.Fatal(err)
			}
			ng := &NodeGroup{}
			ng.Default()
			want := map[string]time.Duration{"joinTimeout": ng.Spec.Timeouts.JoinTimeout.Duration, "drainTimeout": ng.Spec.Timeouts.DrainTimeout.Duration,
				"postDrainWait": ng.Spec.Timeouts.PostDrainWait.Duration, "deleteDrainTimeout": ng.Spec.Timeouts.DeleteDrainTimeout.Duration}[c.path[2]]
			if d != want {
				t.Errorf("CRD default of %s = %s, Go default %s", strings.Join(c.path, "."), d, want)
			}
		}
	}
	// The CRD's enum of user data styles is Validate's.
	if enum := fmt.Sprint(prop("spec", "template", "userDataStyle")["enum"]); enum != fmt.Sprint(UserDataStyles) {
		t.Errorf("CRD enum of userDataStyle = %s, want %s", enum, UserDataStyles)
	}
	// instanceTypes has no CRD default: a launch template's instance type stands in
	// for it, so Default sets it only for a group without a launch template.
	if it, ok := prop("spec", "template", "instanceTypes")["default"]; ok {
		t.Errorf("CRD default of instanceTypes = %v, want none", it)
	}
	for _, lt := range []*LaunchTemplateRef{nil, {Name: "mine"}} {
		ng := &NodeGroup{Spec: NodeGroupSpec{Template: NodeTemplate{LaunchTemplate: lt}}}
		ng.Default()
		if want := lt == nil; (len(ng.Spec.Template.InstanceTypes) == 1) != want {
			t.Errorf("Default() with launch template %v: instanceTypes %v", lt, ng.Spec.Template.InstanceTypes)
		}
	}
	if uc := prop("spec", "updateConfig")["default"].(map[string]any); len(uc) != 1 || uc["maxUnavailable"] != float64(DefaultMaxUnavailable) {
		t.Errorf("CRD default of updateConfig = %v", uc)
	}
}

func TestNodeGroupValidate(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*NodeGroup)
		want   []string // "field: substring" of each error, in order
	}{
		{"valid", func(*NodeGroup) {}, nil},
		{"valid unset desired", func(ng *NodeGroup) { ng.Spec.Scaling.DesiredSize = nil }, nil},
		{"desired above max", func(ng *NodeGroup) { ng.Spec.Scaling.DesiredSize = ptr.To[int32](5) },
			[]string{"spec.scaling.desiredSize: Invalid value: 5: must be between minSize (1) and maxSize (4)"}},
		{"min above max", func(ng *NodeGroup) { ng.Spec.Scaling.MinSize = 5; ng.Spec.Scaling.DesiredSize = nil },
			[]string{"spec.scaling.minSize: Invalid value: 5: must not exceed maxSize (4)", "spec.scaling.desiredSize: Invalid value: 5: must be between"}},
		{"max zero", func(ng *NodeGroup) {
			ng.Spec.Scaling = ScalingConfig{}
		}, []string{"spec.scaling.maxSize: Invalid value: 0: must be at least 1", "spec.updateConfig.maxUnavailable: Invalid value: 1: must not exceed scaling.maxSize (0)"}},
		{"both update configs", func(ng *NodeGroup) {
			ng.Spec.UpdateConfig = &UpdateConfig{MaxUnavailable: ptr.To[int32](1), MaxUnavailablePercentage: ptr.To[int32](10)}
		}, []string{"spec.updateConfig: Invalid value: \"\": set exactly one"}},
		{"neither update config", func(ng *NodeGroup) { ng.Spec.UpdateConfig = &UpdateConfig{} },
			[]string{"spec.updateConfig: Invalid value: \"\": set exactly one"}},
		{"maxUnavailable above maxSize", func(ng *NodeGroup) { ng.Spec.UpdateConfig = &UpdateConfig{MaxUnavailable: ptr.To[int32](5)} },
			[]string{"spec.updateConfig.maxUnavailable: Invalid value: 5: must not exceed scaling.maxSize (4)"}},
		{"percentage 0", func(ng *NodeGroup) { ng.Spec.UpdateConfig = &UpdateConfig{MaxUnavailablePercentage: ptr.To[int32](0)} },
			[]string{"spec.updateConfig.maxUnavailablePercentage: Invalid value: 0: must be between 1 and 100"}},
		{"bad strategy", func(ng *NodeGroup) { ng.Spec.UpdateStrategy = "FAST" },
			[]string{`spec.updateStrategy: Unsupported value: "FAST"`}},
		{"bad family", func(ng *NodeGroup) { ng.Spec.Template.AMIFamily = "Ubuntu2204" },
			[]string{`spec.template.amiFamily: Unsupported value: "Ubuntu2204"`}},
		{"bad user data style", func(ng *NodeGroup) { ng.Spec.Template.UserDataStyle = "eksctl" },
			[]string{`spec.template.userDataStyle: Unsupported value: "eksctl": supported values: "Managed", "Eksctl"`}},
		{"eksctl user data style", func(ng *NodeGroup) { ng.Spec.Template.UserDataStyle = UserDataStyleEksctl }, nil},
		{"bad instance type", func(ng *NodeGroup) { ng.Spec.Template.InstanceTypes = []string{"m5.large", "large", "m5.large"} },
			[]string{"spec.template.instanceTypes[1]: Invalid value", "spec.template.instanceTypes[2]: Duplicate value"}},
		{"bad ami", func(ng *NodeGroup) { ng.Spec.Template.AMIID = "ami-XYZ" }, []string{"spec.template.amiID: Invalid value"}},
		{"reserved labels", func(ng *NodeGroup) {
			ng.Spec.Template.Labels = map[string]string{"eks.amazonaws.com/nodegroup": "x", "kubernetes.io/role": "a",
				"node.kubernetes.io/pool": "ok", "team": "a", "bad key!": "v"}
		}, []string{"spec.template.labels[bad key!]: Invalid value", "spec.template.labels[eks.amazonaws.com/nodegroup]: Forbidden",
			"spec.template.labels[kubernetes.io/role]: Forbidden"}},
		{"bad taint", func(ng *NodeGroup) {
			ng.Spec.Template.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "x", Effect: "Sometimes"}}
		}, []string{`spec.template.taints[1].effect: Unsupported value: "Sometimes"`}},
		{"kubelet not an object", func(ng *NodeGroup) { ng.Spec.Template.Kubelet = &runtime.RawExtension{Raw: []byte(`[1]`)} },
			[]string{"spec.template.kubelet: Invalid value"}},
		{"kubelet object", func(ng *NodeGroup) {
			ng.Spec.Template.Kubelet = &runtime.RawExtension{Raw: []byte(`{"maxPods":20,"featureGates":{"X":true}}`)}
		}, nil},
		{"bottlerocket pre-bootstrap", func(ng *NodeGroup) {
			ng.Spec.Template.AMIFamily = AMIFamilyBottlerocket
			ng.Spec.Template.PreBootstrapCommands = []string{"echo hi"}
		}, []string{"spec.template.preBootstrapCommands: Forbidden"}},
		{"bad subnet and sg", func(ng *NodeGroup) {
			ng.Spec.Subnets = []string{"subnet-0123456789abcdef0", "sub-1"}
			ng.Spec.Template.SecurityGroupIDs = []string{"sg-1"}
		}, []string{"spec.template.securityGroupIDs[0]: Invalid value", "spec.subnets[1]: Invalid value"}},
		{"zero join timeout", func(ng *NodeGroup) { ng.Spec.Timeouts.JoinTimeout = &metav1.Duration{} },
			[]string{"spec.timeouts.joinTimeout: Invalid value: \"0s\": must be positive"}},
		{"zero post-drain wait is fine", func(ng *NodeGroup) { ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{} }, nil},
		{"bad name", func(ng *NodeGroup) { ng.Name = "NG_1" }, []string{"metadata.name: Invalid value"}},
		{"launch template by id", func(ng *NodeGroup) {
			ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{ID: "lt-0123456789abcdef0", Version: "3"}
		}, nil},
		{"launch template by name, $Latest", func(ng *NodeGroup) {
			ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{Name: "eksctl-dev-nodegroup-ng-1", Version: "$Latest"}
		}, nil},
		{"launch template default version", func(ng *NodeGroup) { ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{Name: "mine"} }, nil},
		{"launch template id and name", func(ng *NodeGroup) {
			ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{ID: "lt-0123456789abcdef0", Name: "mine"}
		}, []string{"spec.template.launchTemplate: Invalid value: \"id=\\\"lt-0123456789abcdef0\\\" name=\\\"mine\\\"\": set exactly one of id and name"}},
		{"launch template neither", func(ng *NodeGroup) { ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{Version: "1"} },
			[]string{"spec.template.launchTemplate: Invalid value"}},
		{"launch template bad id and version", func(ng *NodeGroup) {
			ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{ID: "lt-XYZ", Version: "latest"}
		}, []string{"spec.template.launchTemplate.id: Invalid value: \"lt-XYZ\"", "spec.template.launchTemplate.version: Invalid value: \"latest\": want a version number, $Latest or $Default"}},
		{"launch template version 0", func(ng *NodeGroup) { ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{Name: "mine", Version: "0"} },
			[]string{"spec.template.launchTemplate.version: Invalid value"}},
		{"launch template with user data, security groups, eksctl style", func(ng *NodeGroup) {
			ng.Spec.Template.LaunchTemplate = &LaunchTemplateRef{Name: "mine"}
			ng.Spec.Template.UserData = "#!/bin/bash"
			ng.Spec.Template.SecurityGroupIDs = []string{"sg-0123456789abcdef0"}
			ng.Spec.Template.UserDataStyle = UserDataStyleEksctl
		}, []string{"spec.template.userData: Forbidden: a group with a launch template takes its user data from the launch template",
			"spec.template.securityGroupIDs: Forbidden", "spec.template.userDataStyle: Forbidden"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ng := validGroup()
			c.mutate(ng)
			errs := ng.Validate()
			if len(errs) != len(c.want) {
				t.Fatalf("Validate() = %v, want %d errors %q", errs, len(c.want), c.want)
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), c.want[i]) {
					t.Errorf("error %d = %q, want it to start with %q", i, e.Error(), c.want[i])
				}
			}
		})
	}
}

func TestMaxUnavailableNodes(t *testing.T) {
	for _, c := range []struct {
		u       *UpdateConfig
		desired int32
		want    int32
	}{
		{nil, 10, 1},
		{&UpdateConfig{MaxUnavailable: ptr.To[int32](3)}, 10, 3},
		{&UpdateConfig{MaxUnavailablePercentage: ptr.To[int32](33)}, 10, 3},
		{&UpdateConfig{MaxUnavailablePercentage: ptr.To[int32](10)}, 5, 1},
		{&UpdateConfig{MaxUnavailablePercentage: ptr.To[int32](100)}, 500, 100},
	} {
		if got := c.u.MaxUnavailableNodes(c.desired); got != c.want {
			t.Errorf("MaxUnavailableNodes(%d) of %+v = %d, want %d", c.desired, c.u, got, c.want)
		}
	}
}

func TestParseAMIFamily(t *testing.T) {
	for in, want := range map[string]AMIFamily{"al2": AMIFamilyAmazonLinux2, "AL2023": AMIFamilyAmazonLinux2023, "bottlerocket": AMIFamilyBottlerocket, "WindowsServer2022FullContainer": AMIFamilyWindows, "windows": AMIFamilyWindows} {
		if got, err := ParseAMIFamily(in); err != nil || got != want {
			t.Errorf("ParseAMIFamily(%q) = %q, %v", in, got, err)
		}
	}
	_, err := ParseAMIFamily("Ubuntu2204")
	if !errors.Is(err, ErrUnknownAMIFamily) || !strings.Contains(err.Error(), `AMI family "Ubuntu2204": want one of AmazonLinux2023, AmazonLinux2, Bottlerocket, Windows`) {
		t.Errorf("error %v", err)
	}
}
