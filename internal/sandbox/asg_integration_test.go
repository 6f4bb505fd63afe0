package sandbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	nodegroupuserdata "github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Instances that the local cloud's Auto Scaling launches become local instances whose
// (simulated) kubelets join: spread over the zones, tagged with their group, listed by
// Nodes; scaling in terminates them.
func TestAutoScalingLaunchesLocalInstances(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sb := startSim(t, "asgx", 0, nil)
	ctx := t.Context()
	cloud := sb.controller.Cloud()
	cfg := cloud.ControllerConfig("us-west-2")
	ec2c := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(cloud.EC2URL) })
	asc := autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(cloud.AutoScalingURL) })
	// The simulated kubelets read their user data as nodeadm does: they need a
	// NodeConfig, and register with its --node-labels.
	caPEM, err := os.ReadFile(sb.cluster.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	data, err := nodegroupuserdata.Render(nodegroupuserdata.Cluster{Name: "asgx", Endpoint: sb.cluster.InternalEndpoint(), CertificateAuthority: caPEM,
		ServiceCIDR: sb.cluster.Options().ServiceCIDR.String()}, nodegroupuserdata.Template{Family: nodejoinv1alpha1.AMIFamilyAmazonLinux2023,
		Style: nodegroupuserdata.Managed, NodeGroupName: "ng1", InstanceType: "m5.large"})
	if err != nil {
		t.Fatal(err)
	}
	userData := base64.StdEncoding.EncodeToString(data)
	if _, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("ng1"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{InstanceType: ec2types.InstanceTypeM5Large, UserData: aws.String(userData),
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(NodeRoleName("asgx"))}}}); err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for _, s := range cloud.AutoScaling.Subnets()[:2] {
		subnets = append(subnets, s.ID)
	}
	if _, err := asc.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{AutoScalingGroupName: aws.String("eks-ng1"),
		MinSize: aws.Int32(0), MaxSize: aws.Int32(3), DesiredCapacity: aws.Int32(2), VPCZoneIdentifier: aws.String(strings.Join(subnets, ",")),
		LaunchTemplate: &astypes.LaunchTemplateSpecification{LaunchTemplateName: aws.String("ng1"), Version: aws.String("$Latest")}}); err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(sb.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	waitNodes := func(want int) []corev1.Node {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ready := 0
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready == want && len(nodes.Items) == want {
				return nodes.Items
			}
			if time.Now().After(deadline) {
				acts, _ := asc.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("eks-ng1")})
				var lines []string
				for _, a := range acts.Activities {
					lines = append(lines, fmt.Sprintf("%s %s %s", a.StatusCode, aws.ToString(a.Description), aws.ToString(a.StatusMessage)))
				}
				t.Fatalf("%d of %d nodes Ready, want %d; activities:\n%s", ready, len(nodes.Items), want, strings.Join(lines, "\n"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	nodes := waitNodes(2)
	var zones []string
	for _, n := range nodes {
		zones = append(zones, n.Labels[corev1.LabelTopologyZone])
		if g := n.Labels[nodegroupuserdata.LabelNodeGroup]; g != "ng1" {
			t.Errorf("node %s: label %s = %q, want ng1 (its user data's --node-labels)", n.Name, nodegroupuserdata.LabelNodeGroup, g)
		}
	}
	slices.Sort(zones)
	if !slices.Equal(zones, []string{"us-west-2a", "us-west-2b"}) {
		t.Errorf("node zones %v, want one in each of the group's zones", zones)
	}
	statuses := waitJoined(t, "asgx", "eks-ng1", 2)
	for _, st := range statuses {
		if st.Kubelet != "sim" {
			t.Errorf("node %+v", st)
		}
		out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{st.InstanceID}})
		if err != nil {
			t.Fatal(err)
		}
		var group string
		for _, tag := range out.Reservations[0].Instances[0].Tags {
			if aws.ToString(tag.Key) == "aws:autoscaling:groupName" {
				group = aws.ToString(tag.Value)
			}
		}
		if group != "eks-ng1" {
			t.Errorf("instance %s: aws:autoscaling:groupName %q", st.InstanceID, group)
		}
	}
	if _, err := asc.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("eks-ng1"), DesiredCapacity: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := asc.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"eks-ng1"}})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.AutoScalingGroups[0].Instances); n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the group still has %d instances", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	running := 0
	for _, r := range cloud.EC2.Instances() {
		if r.State == "running" {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d instances running in EC2 after scaling in to 1", running)
	}
}

// The NodeGroup controller runs in the sandbox against the local cloud: a NodeGroup
// becomes a launch template and an Auto Scaling group whose instances join; scaling it
// adds a node; deleting it deletes the group.
func TestNodeGroupInTheSandbox(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sb := startSim(t, "ngx", 0, nil)
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(sb.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ngs := dyn.Resource(nodejoinv1alpha1.NodeGroupResource)
	ng := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion, "kind": nodejoinv1alpha1.NodeGroupKind,
		"metadata": map[string]any{"name": "ng1"},
		"spec": map[string]any{
			"scaling":  map[string]any{"minSize": int64(1), "maxSize": int64(3), "desiredSize": int64(2)},
			"template": map[string]any{"amiFamily": "AmazonLinux2023", "instanceTypes": []any{"m5.large"}},
		},
	}}
	// The CRD is applied as the controller starts: retry until it is served.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err = ngs.Create(ctx, ng, metav1.CreateOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the NodeGroup: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	status := func() map[string]any {
		u, err := ngs.Get(ctx, "ng1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		return st
	}
	waitReady := func(want int64) {
		deadline := time.Now().Add(4 * time.Minute)
		for {
			st := status()
			ready, _, _ := unstructured.NestedInt64(st, "readySize")
			if ready == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("NodeGroup ng1: readySize %d, want %d; status %v", ready, want, st)
			}
			time.Sleep(time.Second)
		}
	}
	waitReady(2)
	group, _, _ := unstructured.NestedString(status(), "autoScalingGroupName")
	if group == "" {
		t.Fatalf("NodeGroup status names no Auto Scaling group: %v", status())
	}
	waitJoined(t, "ngx", group, 2)
	if _, err := ngs.Patch(ctx, "ng1", types.MergePatchType, []byte(`{"spec":{"scaling":{"desiredSize":3}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(3)
	if err := ngs.Delete(ctx, "ng1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cloud := sb.controller.Cloud()
	asc := autoscaling.NewFromConfig(cloud.ControllerConfig("us-west-2"), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(cloud.AutoScalingURL) })
	deadline = time.Now().Add(3 * time.Minute)
	for {
		out, err := asc.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.AutoScalingGroups) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group outlived its NodeGroup: %+v", out.AutoScalingGroups)
		}
		time.Sleep(time.Second)
	}
}

// waitJoined waits until `get nodes` (Nodes) shows n instances of group, every step of
// their joins done (serving certificates included, which may trail Ready).
func waitJoined(t *testing.T, cluster, group string, n int) []NodeStatus {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		statuses, err := Nodes(t.Context(), cluster, NodesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var joined []NodeStatus
		for _, st := range statuses {
			if st.AutoScalingGroup == group && st.State == JoinReady {
				joined = append(joined, st)
			}
		}
		if len(joined) == n {
			return joined
		}
		if time.Now().After(deadline) {
			t.Fatalf("get nodes: %d joined nodes of group %s, want %d: %+v", len(joined), group, n, statuses)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Under an account instance limit, a NodeGroup's launches beyond it fail as Auto
// Scaling activities, and the NodeGroup reports InstanceLimitExceeded.
func TestNodeGroupInstanceLimit(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	testenv.RequireIntegration(t)
	bin := testenv.BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.KubeControllerManager, toolbin.KubeScheduler, toolbin.Nodeadm)
	sb, err := Start(t.Context(), Options{Name: "ngl", BinDir: bin, Network: controlplane.NetworkLoopback, UnsafeNoFsync: true,
		Nodes: NodeOptions{Kubelet: "sim"}, InstanceLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Stop(context.Background()); err != nil {
			t.Errorf("stopping: %v", err)
		}
		if _, err := Delete(context.Background(), "ngl"); err != nil {
			t.Errorf("deleting: %v", err)
		}
	})
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(sb.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ngs := dyn.Resource(nodejoinv1alpha1.NodeGroupResource)
	ng := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion, "kind": nodejoinv1alpha1.NodeGroupKind,
		"metadata": map[string]any{"name": "ng1"},
		"spec": map[string]any{
			"scaling":  map[string]any{"minSize": int64(0), "maxSize": int64(3), "desiredSize": int64(2)},
			"template": map[string]any{"instanceTypes": []any{"m5.large"}},
		},
	}}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err = ngs.Create(ctx, ng, metav1.CreateOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the NodeGroup: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		u, err := ngs.Get(ctx, "ng1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		issues, _, _ := unstructured.NestedSlice(u.Object, "status", "health", "issues")
		for _, i := range issues {
			if m, ok := i.(map[string]any); ok {
				code, _ := m["code"].(string)
				msg, _ := m["message"].(string)
				if code == "InstanceLimitExceeded" && strings.Contains(msg, "current instance limit of 1") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no InstanceLimitExceeded issue; issues %v", issues)
		}
		time.Sleep(time.Second)
	}
}
