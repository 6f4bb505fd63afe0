package eksbackend_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/localaws/eks"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// releases is a catalog of two AL2023 releases.
type releases struct{}

var catalog = []struct{ release, ami string }{
	{"1.37.0-20261101", "ami-00000000000000a01"},
	{"1.37.0-20261127", "ami-00000000000000a02"},
}

func (releases) Latest(f v1alpha1.AMIFamily) (string, string, bool) {
	if f != v1alpha1.AMIFamilyAmazonLinux2023 {
		return "", "", false
	}
	return catalog[1].release, catalog[1].ami, true
}

func (releases) Image(f v1alpha1.AMIFamily, release string) (string, bool) {
	for _, c := range catalog {
		if c.release == release && f == v1alpha1.AMIFamilyAmazonLinux2023 {
			return c.ami, true
		}
	}
	return "", false
}

func (releases) ReleaseOf(ami string) (v1alpha1.AMIFamily, string, bool) {
	for _, c := range catalog {
		if c.ami == ami {
			return v1alpha1.AMIFamilyAmazonLinux2023, c.release, true
		}
	}
	return "", "", false
}

var info = eksbackend.ClusterInfo{
	Cluster: eksapi.Cluster{Name: "demo", Arn: "arn:aws:eks:us-west-2:000000000000:cluster/demo", Version: "1.37", Status: "ACTIVE",
		Endpoint: "https://127.0.0.1:6443", ResourcesVpcConfig: eksapi.VpcConfig{SubnetIDs: []string{}, SecurityGroupIDs: []string{}, PublicAccessCidrs: []string{}}},
	Region: "us-west-2", AccountID: "000000000000", NodeRole: "demo-node", Subnets: []string{"subnet-0000000000000000a"},
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// setup starts a real API server with the CRDs, and the local EKS over it.
func setup(t *testing.T, with ...func(*eksbackend.Backend)) (*awseks.Client, client.Client) {
	t.Helper()
	env := testenv.Start(t)
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range [][]byte{v1alpha1.NodeGroupCRD, v1alpha1.NodeAccessEntryCRD} {
		if err := manager.ApplyCRD(ctx, dyn, crd); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return kc.List(ctx, &v1alpha1.NodeGroupList{}) == nil && kc.List(ctx, &v1alpha1.NodeAccessEntryList{}) == nil, nil
	}); err != nil {
		t.Fatalf("the CRDs were not served: %v", err)
	}
	b := eksbackend.New(kc, info, releases{})
	for _, w := range with {
		w(b)
	}
	srv := httptest.NewServer(eks.NewWithBackend(b, nil))
	t.Cleanup(srv.Close)
	cfg := aws.Config{Region: "us-west-2", RetryMaxAttempts: 1, Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", "")}
	return awseks.NewFromConfig(cfg, func(o *awseks.Options) { o.BaseEndpoint = aws.String(srv.URL) }), kc
}

// Create → describe → update-config → update-version → describe-update → delete, through
// the SDK, against NodeGroup objects on a real API server; the test plays the NodeGroup
// controller by writing status.
func TestEKSOverNodeGroups(t *testing.T) {
	c, kc := setup(t)
	ctx := t.Context()
	key := client.ObjectKey{Name: "ng-1"}
	get := func() *v1alpha1.NodeGroup {
		t.Helper()
		var ng v1alpha1.NodeGroup
		if err := kc.Get(ctx, key, &ng); err != nil {
			t.Fatal(err)
		}
		return &ng
	}
	controller := func(mutate func(ng *v1alpha1.NodeGroup)) {
		t.Helper()
		ng := get()
		ng.Status.ObservedGeneration = ng.Generation
		mutate(ng)
		if err := kc.Status().Update(ctx, ng); err != nil {
			t.Fatal(err)
		}
	}
	describe := func() ekstypes.Nodegroup {
		t.Helper()
		d, err := c.DescribeNodegroup(ctx, &awseks.DescribeNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Nodegroup
	}
	updateStatus := func(id *string) ekstypes.Update {
		t.Helper()
		d, err := c.DescribeUpdate(ctx, &awseks.DescribeUpdateInput{Name: aws.String("demo"), NodegroupName: aws.String("ng-1"), UpdateId: id})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Update
	}

	create := &awseks.CreateNodegroupInput{
		ClientRequestToken: aws.String("create-ng-1"), ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"), NodeRole: aws.String("arn:aws:iam::000000000000:role/demo-node"),
		Subnets: []string{"subnet-0123456789abcdef0"}, ReleaseVersion: aws.String(catalog[0].release), Version: aws.String("1.37"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(3), DesiredSize: aws.Int32(2)},
		Labels:        map[string]string{"team": "web"}, Tags: map[string]string{"owner": "me"},
		Taints: []ekstypes.Taint{{Key: aws.String("dedicated"), Value: aws.String("web"), Effect: ekstypes.TaintEffectNoSchedule}},
	}
	out, err := c.CreateNodegroup(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's retry of the same request (its clientRequestToken) gets the group.
	if again, err := c.CreateNodegroup(ctx, create); err != nil || aws.ToString(again.Nodegroup.NodegroupArn) != aws.ToString(out.Nodegroup.NodegroupArn) {
		t.Errorf("retried CreateNodegroup = %+v, %v", again, err)
	}
	if out.Nodegroup.Status != ekstypes.NodegroupStatusCreating || aws.ToString(out.Nodegroup.ReleaseVersion) != catalog[0].release {
		t.Errorf("CreateNodegroup = %+v", out.Nodegroup)
	}
	ng := get()
	tp := ng.Spec.Template
	if tp.AMIID != catalog[0].ami || tp.InstanceProfile != "demo-node" || tp.AMIFamily != v1alpha1.AMIFamilyAmazonLinux2023 ||
		tp.Taints[0].Effect != corev1.TaintEffectNoSchedule || tp.Labels["team"] != "web" || ng.Spec.Scaling.Desired() != 2 ||
		!strings.Contains(ng.Annotations[eksbackend.TagsAnnotation], "owner") {
		t.Errorf("NodeGroup = %+v", ng)
	}
	// The same group, twice, is refused; an unknown release too, creating nothing.
	_, err = c.CreateNodegroup(ctx, &awseks.CreateNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"),
		NodeRole: aws.String("arn:aws:iam::000000000000:role/demo-node"), Subnets: []string{}})
	if apiCode(err) != "ResourceInUseException" {
		t.Errorf("second CreateNodegroup = %v", err)
	}
	_, err = c.CreateNodegroup(ctx, &awseks.CreateNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-2"),
		NodeRole: aws.String("arn:aws:iam::000000000000:role/demo-node"), Subnets: []string{}, ReleaseVersion: aws.String("1.37.0-19990101")})
	if apiCode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), "releaseVersion") {
		t.Errorf("CreateNodegroup with an unknown release = %v", err)
	}
	_, err = c.CreateNodegroup(ctx, &awseks.CreateNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-2"),
		NodeRole: aws.String("arn:aws:iam::000000000000:role/demo-node"), Subnets: []string{}, Labels: map[string]string{"kubernetes.io/hostname": "x"}})
	if apiCode(err) != "InvalidParameterException" || !strings.Contains(err.Error(), "labels") {
		t.Errorf("CreateNodegroup with a reserved label = %v", err)
	}

	controller(func(ng *v1alpha1.NodeGroup) {
		ng.Status.Phase, ng.Status.AutoScalingGroupName = v1alpha1.PhaseActive, "eks-ng-1-abc"
	})
	d := describe()
	if d.Status != ekstypes.NodegroupStatusActive || d.Resources.AutoScalingGroups[0].Name == nil || d.AmiType != ekstypes.AMITypesAl2023X8664Standard ||
		aws.ToString(d.Version) != "1.37" || d.CreatedAt.IsZero() || len(d.Subnets) != 1 || aws.ToString(d.NodeRole) != "arn:aws:iam::000000000000:role/demo-node" {
		t.Errorf("DescribeNodegroup = %+v", d)
	}

	scale := &awseks.UpdateNodegroupConfigInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"), ClientRequestToken: aws.String("scale-1"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(3)},
		Labels:        &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: map[string]string{"tier": "front"}, RemoveLabels: []string{"team"}},
		Taints:        &ekstypes.UpdateTaintsPayload{AddOrUpdateTaints: []ekstypes.Taint{{Key: aws.String("gpu"), Effect: ekstypes.TaintEffectNoExecute}}},
	}
	u, err := c.UpdateNodegroupConfig(ctx, scale)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.UpdateNodegroupConfig(ctx, scale); err != nil || aws.ToString(again.Update.Id) != aws.ToString(u.Update.Id) {
		t.Errorf("retried UpdateNodegroupConfig = %+v, %v", again, err)
	}
	if u.Update.Status != ekstypes.UpdateStatusInProgress || updateStatus(u.Update.Id).Status != ekstypes.UpdateStatusInProgress {
		t.Errorf("UpdateNodegroupConfig = %+v", u.Update)
	}
	ng = get()
	if ng.Spec.Scaling.Desired() != 3 || ng.Spec.Template.Labels["tier"] != "front" || ng.Spec.Template.Labels["team"] != "" || len(ng.Spec.Template.Taints) != 2 {
		t.Errorf("after UpdateNodegroupConfig: %+v", ng.Spec)
	}
	_, err = c.UpdateNodegroupConfig(ctx, &awseks.UpdateNodegroupConfigInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(1)}})
	if apiCode(err) != "ResourceInUseException" {
		t.Errorf("UpdateNodegroupConfig during an update = %v", err)
	}
	controller(func(*v1alpha1.NodeGroup) {})
	if s := updateStatus(u.Update.Id).Status; s != ekstypes.UpdateStatusSuccessful {
		t.Errorf("config update = %s once observed", s)
	}

	// A managed upgrade to the latest release, which fails draining.
	v, err := c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if err != nil {
		t.Fatal(err)
	}
	if get().Spec.Template.AMIID != catalog[1].ami || aws.ToString(describe().ReleaseVersion) != catalog[1].release {
		t.Errorf("after UpdateNodegroupVersion the template has %s", get().Spec.Template.AMIID)
	}
	controller(func(ng *v1alpha1.NodeGroup) {
		ng.Status.Update = &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseFailed, TargetVersion: "2", Strategy: v1alpha1.UpdateStrategyDefault,
			MaxUnavailable: 1, Message: "eviction of default/web refused", FailedGeneration: ng.Generation,
			StartTime: metav1.Now(), PhaseTime: metav1.Now()}
		ng.Status.Health.Issues = []v1alpha1.Issue{{Code: v1alpha1.IssuePodEvictionFailure, Message: "eviction of default/web refused", ResourceIDs: []string{"node-a"}}}
	})
	fu := updateStatus(v.Update.Id)
	if fu.Status != ekstypes.UpdateStatusFailed || len(fu.Errors) != 1 || fu.Errors[0].ErrorCode != ekstypes.ErrorCodePodEvictionFailure || fu.Errors[0].ResourceIds[0] != "node-a" {
		t.Errorf("failed update = %+v", fu)
	}
	// Force resumes it; the failed update stays failed.
	f, err := c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"), Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !get().Spec.Force {
		t.Error("force was not set")
	}
	controller(func(ng *v1alpha1.NodeGroup) { ng.Status.Update, ng.Status.Health.Issues = nil, nil })
	if s, fs := updateStatus(f.Update.Id).Status, updateStatus(v.Update.Id).Status; s != ekstypes.UpdateStatusSuccessful || fs != ekstypes.UpdateStatusFailed {
		t.Errorf("forced update %s, failed one %s", s, fs)
	}
	lu, err := c.ListUpdates(ctx, &awseks.ListUpdatesInput{Name: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if err != nil || !slices.Equal(lu.UpdateIds, []string{*u.Update.Id, *v.Update.Id, *f.Update.Id}) {
		t.Errorf("ListUpdates = %v, %v", lu, err)
	}

	// Deleting: DELETING while the controller's finalizer runs, then gone.
	ng = get()
	ng.Finalizers = []string{v1alpha1.NodeGroupFinalizer}
	if err := kc.Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	del, err := c.DeleteNodegroup(ctx, &awseks.DeleteNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if err != nil || del.Nodegroup.Status != ekstypes.NodegroupStatusDeleting || describe().Status != ekstypes.NodegroupStatusDeleting {
		t.Fatalf("DeleteNodegroup = %+v, %v", del, err)
	}
	ng = get()
	ng.Finalizers = nil
	if err := kc.Update(ctx, ng); err != nil {
		t.Fatal(err)
	}
	_, err = c.DescribeNodegroup(ctx, &awseks.DescribeNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if apiCode(err) != "ResourceNotFoundException" {
		t.Errorf("DescribeNodegroup after delete = %v", err)
	}
}

func TestAccessEntriesOverNodeAccessEntries(t *testing.T) {
	c, kc := setup(t)
	ctx := t.Context()
	arn := "arn:aws:iam::000000000000:role/nodes/demo-node"
	out, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_WINDOWS")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(out.AccessEntry.KubernetesGroups, v1alpha1.KubeProxyWindowsGroup) || aws.ToString(out.AccessEntry.Username) != v1alpha1.NodeUsernameTemplate {
		t.Errorf("CreateAccessEntry = %+v", out.AccessEntry)
	}
	var l v1alpha1.NodeAccessEntryList
	if err := kc.List(ctx, &l); err != nil || len(l.Items) != 1 || l.Items[0].Spec.PrincipalARN != arn || l.Items[0].Spec.Type != v1alpha1.AccessEntryEC2Windows {
		t.Fatalf("NodeAccessEntries = %+v, %v", l.Items, err)
	}
	if _, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX")}); apiCode(err) != "ResourceInUseException" {
		t.Errorf("second CreateAccessEntry = %v", err)
	}
	d, err := c.DescribeAccessEntry(ctx, &awseks.DescribeAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)})
	if err != nil || aws.ToString(d.AccessEntry.Type) != "EC2_WINDOWS" {
		t.Fatalf("DescribeAccessEntry = %+v, %v", d, err)
	}
	ls, err := c.ListAccessEntries(ctx, &awseks.ListAccessEntriesInput{ClusterName: aws.String("demo")})
	if err != nil || !slices.Equal(ls.AccessEntries, []string{arn}) {
		t.Fatalf("ListAccessEntries = %+v, %v", ls, err)
	}
	if _, err := c.DeleteAccessEntry(ctx, &awseks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if err := kc.List(ctx, &l); err != nil || len(l.Items) != 0 {
		t.Errorf("after DeleteAccessEntry: %+v, %v", l.Items, err)
	}
}
