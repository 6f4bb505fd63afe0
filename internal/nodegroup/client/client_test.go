package client

import (
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func i32(v int32) *int32 { return &v }

func TestScaled(t *testing.T) {
	cur := v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 4, DesiredSize: i32(2)}
	tests := []struct {
		name    string
		s       Sizes
		want    v1alpha1.ScalingConfig
		wantErr string
	}{
		{"up within bounds", Sizes{Desired: i32(4)}, v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 4, DesiredSize: i32(4)}, ""},
		{"down to the minimum", Sizes{Desired: i32(1)}, v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 4, DesiredSize: i32(1)}, ""},
		{"above the maximum", Sizes{Desired: i32(6)}, cur, "6 nodes exceed the group's maximum 4; pass --nodes-max 6 too"},
		{"above, with a new maximum", Sizes{Desired: i32(6), Max: i32(6)}, v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 6, DesiredSize: i32(6)}, ""},
		{"below the minimum", Sizes{Desired: i32(0)}, cur, "0 nodes are below the group's minimum 1; pass --nodes-min 0 too"},
		{"to zero", Sizes{Desired: i32(0), Min: i32(0)}, v1alpha1.ScalingConfig{MinSize: 0, MaxSize: 4, DesiredSize: i32(0)}, ""},
		{"min over max", Sizes{Min: i32(5)}, cur, "the minimum 5 exceeds the maximum 4"},
		{"negative", Sizes{Desired: i32(-1)}, cur, "--nodes -1 is negative"},
		{"max zero", Sizes{Max: i32(0), Min: i32(0), Desired: i32(0)}, cur, "--nodes-max 0: a group's maximum is at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scaled(cur, tt.s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.MinSize != tt.want.MinSize || got.MaxSize != tt.want.MaxSize || *got.DesiredSize != *tt.want.DesiredSize {
				t.Errorf("scaled = %+v (desired %d), want %+v (desired %d)", got, *got.DesiredSize, tt.want, *tt.want.DesiredSize)
			}
		})
	}
}

func group(phase v1alpha1.NodeGroupPhase, desired, ready, updated, instances int32) *v1alpha1.NodeGroup {
	ng := &v1alpha1.NodeGroup{}
	ng.Name, ng.Generation = "ng", 2
	ng.Spec.Scaling = v1alpha1.ScalingConfig{MinSize: 0, MaxSize: 10, DesiredSize: i32(desired)}
	ng.Status = v1alpha1.NodeGroupStatus{ObservedGeneration: 2, Phase: phase, DesiredSize: desired, ReadySize: ready, UpdatedSize: updated,
		LaunchTemplate: &v1alpha1.LaunchTemplateStatus{Version: "2"}}
	for i := range instances {
		ng.Status.Instances = append(ng.Status.Instances, v1alpha1.InstanceStatus{InstanceID: "i-" + string('a'+i), LaunchTemplateVersion: "2"})
	}
	return ng
}

func TestReached(t *testing.T) {
	stale := group(v1alpha1.PhaseActive, 2, 2, 2, 2)
	stale.Status.ObservedGeneration = 1
	updating := group(v1alpha1.PhaseUpdating, 3, 4, 1, 4)
	updating.Status.Update = &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseUpgrade}
	failed := group(v1alpha1.PhaseDegraded, 3, 3, 1, 4)
	failed.Status.Update = &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseFailed, Message: "Reached max retries while trying to evict pods from nodes in node group ng"}
	failed.Status.Health.Issues = []v1alpha1.Issue{{Code: v1alpha1.IssuePodEvictionFailure, Message: "x", ResourceIDs: []string{"default/web-1"}}}
	createFailed := group(v1alpha1.PhaseCreateFailed, 2, 0, 0, 2)
	createFailed.Status.Health.Issues = []v1alpha1.Issue{{Code: v1alpha1.IssueNodeCreationFailure, Message: "Instances failed to join the kubernetes cluster", ResourceIDs: []string{"i-a"}}}
	tests := []struct {
		name    string
		goal    Goal
		ng      *v1alpha1.NodeGroup
		want    bool
		wantErr string
	}{
		{"created", Created, group(v1alpha1.PhaseActive, 2, 2, 2, 2), true, ""},
		{"creating", Created, group(v1alpha1.PhaseCreating, 2, 1, 2, 2), false, ""},
		{"create failed", Created, createFailed, false, "NodeCreationFailure: Instances failed to join the kubernetes cluster (i-a)"},
		{"not observed yet", Scaled, stale, false, ""},
		{"scaled up", Scaled, group(v1alpha1.PhaseActive, 4, 4, 4, 4), true, ""},
		{"scaling down: an instance left", Scaled, group(v1alpha1.PhaseActive, 1, 1, 2, 2), false, ""},
		{"updating", Upgraded, updating, false, ""},
		{"update failed", Upgraded, failed, false, "upgrade nodegroup ng --force"},
		{"upgraded", Upgraded, group(v1alpha1.PhaseActive, 3, 3, 3, 3), true, ""},
		{"deleted", Deleted, nil, true, ""},
		{"deleting", Deleted, group(v1alpha1.PhaseDeleting, 0, 1, 1, 1), false, ""},
		{"gone while scaling", Scaled, nil, false, "deleted while waiting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reached(tt.goal, 2, tt.ng)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Reached = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	manifests := `apiVersion: nodejoin.io/v1alpha1
kind: NodeGroup
metadata:
  name: a
spec:
  scaling: {minSize: 1, maxSize: 3, desiredSize: 2}
  template: {amiFamily: Bottlerocket}
---
apiVersion: nodejoin.io/v1alpha1
kind: NodeGroup
metadata:
  name: b
spec:
  scaling: {minSize: 0, maxSize: 1}
  template: {}
`
	l, err := Load([]byte(manifests), "ng.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l.Format != FormatNodeGroup || len(l.NodeGroups) != 2 || l.NodeGroups[1].Name != "b" || l.Cluster != "" {
		t.Errorf("loaded %+v", l)
	}
	if _, err := l.Group("c"); err == nil || !strings.Contains(err.Error(), "ng.yaml has no node group c (it has a, b)") {
		t.Errorf("Group(c) = %v", err)
	}

	eks := "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: demo, region: r}\nmanagedNodeGroups: [{name: x}]\n"
	l, err = Load([]byte(eks), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l.Format != FormatEksctl || l.Cluster != "demo" || len(l.NodeGroups) != 1 || len(l.Ignored) != 1 {
		t.Errorf("loaded %+v", l)
	}

	for doc, want := range map[string]string{
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: a}\nspec: {scaling: {minSize: 1, maxSize: 2}, template: {}, colour: red}\n":                                                                              `f.yaml, line 4: field spec.colour: unknown field`,
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: a}\n---\napiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: b}\nspec: {scaling: {minSize: 1, maxSize: 2}, template: {amiFamilly: x}}\n": `f.yaml, line 8: field spec.template.amiFamilly: unknown field (did you mean "amiFamily"?)`,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n":                                                                            `document 1 (line 1) is apiVersion "v1" kind "ConfigMap": want a NodeGroup`,
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\nmetadata: {name: a}\nspec: {scaling: {minSize: 3, maxSize: 2}, template: {}}\n": "node group a: spec.scaling",
		"apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: demo}\n":                                                     "has no nodeGroups or managedNodeGroups",
		"": "no NodeGroup in the file",
	} {
		if _, err := Load([]byte(doc), "f.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) = %v, want %q", doc, err, want)
		}
	}
}

func TestTemplateEqualDefaults(t *testing.T) {
	a := v1alpha1.NodeTemplate{}
	b := v1alpha1.NodeTemplate{AMIFamily: v1alpha1.AMIFamilyAmazonLinux2023, InstanceTypes: []string{"m5.large"}, CapacityType: v1alpha1.CapacityOnDemand}
	if !templateEqual(a, b) {
		t.Error("a template and its defaulted self differ")
	}
	b.Labels = map[string]string{"v": "2"}
	if templateEqual(a, b) {
		t.Error("a label change is not a change")
	}
}
