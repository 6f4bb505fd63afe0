package client

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksctl"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/printer/printertest"
)

var created = metav1.NewTime(time.Date(2026, 11, 24, 9, 54, 36, 211000000, time.UTC))

// testGroup is the seed 000 group as nodejoin runs it, during a rolling update.
func testGroup() *v1alpha1.NodeGroup {
	return &v1alpha1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: "ng1-public-ssh", UID: "62c19db5-f965-bdb7-373a-147e04d9f124", CreationTimestamp: created, Generation: 3,
			Labels: map[string]string{eksctl.LabelClusterName: "ironman-2022", eksctl.LabelNodeGroupName: "ng1-public-ssh", eksctl.LabelNodeGroupType: eksctl.TypeManaged},
			Annotations: map[string]string{
				eksbackend.ImageAnnotation: `{"amiType":"AL2_x86_64","releaseVersion":"1.37.0-20261124","amiID":"ami-0a1b2c3d4e5f60718"}`,
				eksbackend.TagsAnnotation:  `{"alpha.eksctl.io/nodegroup-type":"managed","auto-delete":"never"}`,
			},
		},
		Spec: v1alpha1.NodeGroupSpec{
			Scaling: v1alpha1.ScalingConfig{MinSize: 0, MaxSize: 10, DesiredSize: i32(3)},
			Template: v1alpha1.NodeTemplate{
				AMIFamily: v1alpha1.AMIFamilyAmazonLinux2, AMIID: "ami-0a1b2c3d4e5f60718", InstanceTypes: []string{"m5.large"}, CapacityType: v1alpha1.CapacityOnDemand,
				Labels: map[string]string{eksctl.LabelClusterName: "ironman-2022", eksctl.LabelNodeGroupName: "ng1-public-ssh"},
				Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}},
			},
			Subnets:        []string{"subnet-0e863f9fbcda592a3", "subnet-00ebeb2e8903fb3f9", "subnet-02d98be342d8ab2a7"},
			UpdateConfig:   &v1alpha1.UpdateConfig{MaxUnavailable: i32(1)},
			UpdateStrategy: v1alpha1.UpdateStrategyDefault,
		},
		Status: v1alpha1.NodeGroupStatus{
			ObservedGeneration: 3, Phase: v1alpha1.PhaseUpdating, DesiredSize: 3, ReadySize: 4, UpdatedSize: 1,
			LaunchTemplate:       &v1alpha1.LaunchTemplateStatus{Name: "nodejoin-ironman-2022-ng1-public-ssh", ID: "lt-000b4417a7baebbf8", Version: "2"},
			AutoScalingGroupName: "eks-ng1-public-ssh-62c19db5",
			Instances: []v1alpha1.InstanceStatus{
				{InstanceID: "i-0000000000000000a", AvailabilityZone: "us-west-2a", LaunchTemplateVersion: "1", LifecycleState: "InService", NodeName: "ip-198-18-0-11.local.internal", Ready: true},
				{InstanceID: "i-0000000000000000b", AvailabilityZone: "us-west-2b", LaunchTemplateVersion: "1", LifecycleState: "InService", NodeName: "ip-198-18-0-12.local.internal", Ready: true},
				{InstanceID: "i-0000000000000000c", AvailabilityZone: "us-west-2c", LaunchTemplateVersion: "1", LifecycleState: "InService", NodeName: "ip-198-18-0-13.local.internal", Ready: true},
				{InstanceID: "i-0000000000000000d", AvailabilityZone: "us-west-2a", LaunchTemplateVersion: "2", LifecycleState: "InService", NodeName: "ip-198-18-0-14.local.internal", Ready: true},
			},
			Update: &v1alpha1.UpdateStatus{
				Phase: v1alpha1.UpdatePhaseUpgrade, TargetVersion: "2", Strategy: v1alpha1.UpdateStrategyDefault, MaxUnavailable: 1, Surge: 1,
				OriginalMaxSize: 10, OriginalDesiredSize: 3,
				Nodes: []v1alpha1.UpdateNode{{InstanceID: "i-0000000000000000a", NodeName: "ip-198-18-0-11.local.internal", Step: v1alpha1.NodeStepDraining,
					Blocking: []string{"default/web-7d4b9c-abcde (PodDisruptionBudget web)"}}},
				Message: "draining 1 node",
			},
			Health: v1alpha1.Health{Issues: []v1alpha1.Issue{{Code: v1alpha1.IssueNodeCreationFailure, Message: "Instances failed to join the kubernetes cluster", ResourceIDs: []string{"i-0000000000000000e"}}}},
		},
	}
}

var testAccount = Account{Cluster: "ironman-2022", Region: "us-west-2", AccountID: "000000000000", Version: "1.37", NodeRole: "nodejoin-ironman-2022-node"}

func TestNodeGroupTable(t *testing.T) {
	active := testGroup()
	active.Name, active.Status.Phase, active.Status.Update = "ng2", v1alpha1.PhaseActive, nil
	active.Labels = nil
	active.Spec.Template.AMIFamily, active.Spec.Template.InstanceTypes = "", []string{"c5.large", "c5a.large"}
	var out, none bytes.Buffer
	WriteTable(&out, "ironman-2022", []v1alpha1.NodeGroup{*testGroup(), *active})
	printertest.Golden(t, "get-nodegroup.txt", out.String())
	WriteTable(&none, "demo", nil)
	if !strings.Contains(none.String(), "nodejoin create nodegroup --cluster demo") {
		t.Errorf("empty list says %q", none.String())
	}
}

func TestDescribeNodeGroup(t *testing.T) {
	ng := testGroup()
	d := Describe(ng, testAccount)
	var js, text bytes.Buffer
	if err := printer.Structured(&js, printer.JSON, d); err != nil {
		t.Fatal(err)
	}
	printertest.Golden(t, "describe-nodegroup.json", js.String())
	d.WriteText(&text, ng)
	printertest.Golden(t, "describe-nodegroup.txt", text.String())
}

// The progress lines of an update, from the successive versions of the group a
// watcher sees.
func TestProgressLines(t *testing.T) {
	var versions []*v1alpha1.NodeGroup
	g := testGroup()
	g.Status.Update, g.Status.Phase, g.Status.UpdatedSize, g.Status.ReadySize, g.Status.Instances = nil, v1alpha1.PhaseActive, 3, 3, g.Status.Instances[:3]
	g.Status.Health.Issues = nil
	for i := range g.Status.Instances {
		g.Status.Instances[i].LaunchTemplateVersion = "2"
	}
	versions = append(versions, g.DeepCopy())
	u := testGroup()
	u.Status.Health.Issues = nil
	u.Status.Update.Phase, u.Status.Update.Nodes, u.Status.Update.Message = v1alpha1.UpdatePhaseScaleUp, nil, "waiting for 1 new node to be Ready"
	u.Status.ReadySize = 3
	versions = append(versions, u.DeepCopy())
	u = testGroup()
	u.Status.Update.Nodes[0].Step, u.Status.Update.Nodes[0].Blocking = v1alpha1.NodeStepDraining, nil
	u.Status.Health.Issues = nil
	versions = append(versions, u.DeepCopy())
	versions = append(versions, testGroup()) // eviction refused, an issue raised
	done := testGroup()
	done.Status.Update, done.Status.Phase, done.Status.UpdatedSize, done.Status.ReadySize = nil, v1alpha1.PhaseActive, 3, 3
	done.Status.Instances = done.Status.Instances[1:]
	for i := range done.Status.Instances {
		done.Status.Instances[i].LaunchTemplateVersion = "2"
	}
	versions = append(versions, done, nil)

	w := &Progress{}
	var out strings.Builder
	for _, v := range versions {
		for _, l := range w.Lines("ng1-public-ssh", v) {
			out.WriteString(l + "\n")
		}
	}
	printertest.Golden(t, "nodegroup-progress.txt", out.String())
}

func TestIgnoredOutput(t *testing.T) {
	l := &Loaded{Source: "cluster.yaml", Ignored: []eksctl.Ignored{
		{Field: "metadata.region", Line: 6, Value: "eu-west-1", Reason: "a local cluster has no region"},
		{Field: "managedNodeGroups[0].ssh.publicKeyName", Line: 14, Value: strings.Repeat("k", 50), Reason: "local instances have no SSH"},
	}}
	var out bytes.Buffer
	l.WriteIgnored(&out)
	printertest.Golden(t, "create-nodegroup-ignored.txt", out.String())
}

func TestScalingChange(t *testing.T) {
	got := ScalingChange(v1alpha1.ScalingConfig{MinSize: 2, MaxSize: 4}, v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 4, DesiredSize: i32(4)})
	if want := "2 → 4 nodes (min 2 → 1, max 4 → 4)"; got != want {
		t.Errorf("scalingChange = %q, want %q", got, want)
	}
}
