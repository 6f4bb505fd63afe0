package nodegroup

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// nodeLauncher plays EC2 and the kubelets for the local cloud's Auto Scaling: a launched
// instance registers a Ready Node, a terminated one's Node goes.
type nodeLauncher struct {
	t      *testing.T
	c      client.Client
	mu     sync.Mutex
	n      int
	specs  map[string]localaws.LaunchSpec
	failed []string
}

func (l *nodeLauncher) Launch(_ context.Context, spec localaws.LaunchSpec) (string, error) {
	l.mu.Lock()
	l.n++
	id := fmt.Sprintf("i-%017x", l.n)
	l.specs[id] = spec
	l.mu.Unlock()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(id), Labels: map[string]string{v1alpha1.LabelNodeGroup: spec.Tags["eks:nodegroup-name"]}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + spec.AvailabilityZone + "/" + id},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}},
	}
	if err := l.c.Create(context.Background(), n); err != nil {
		l.mu.Lock()
		l.failed = append(l.failed, err.Error())
		l.mu.Unlock()
	}
	return id, nil
}

func (l *nodeLauncher) Terminate(_ context.Context, id string) error {
	err := l.c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(id)}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// localCloud is the controller running against the local cloud's EC2 launch templates
// and Auto Scaling on their wire protocols, and a real kube-apiserver, with group ng1
// created from ng.
type localCloud struct {
	c        client.Client
	asc      *autoscaling.Client
	ec2c     *ec2.Client
	rec      *recorder
	launcher *nodeLauncher
	waitFor  func(what string, cond func(*v1alpha1.NodeGroup) bool)
}

// startLocalCloud starts the local cloud and the controller; before runs before the
// group is created (to make the user's launch template, say).
func startLocalCloud(t *testing.T, ng *v1alpha1.NodeGroup, before ...func(context.Context, *ec2.Client)) *localCloud {
	t.Helper()
	env, c := realAPI(t)
	ctx, cancel := context.WithCancel(t.Context())

	const region = "us-west-2"
	lt := localaws.NewLaunchTemplates("111122223333")
	as := localaws.NewAutoScaling(localaws.AutoScalingConfig{AccountID: "111122223333", Region: region, Templates: lt,
		Interval: 200 * time.Millisecond, RetryDelay: time.Second})
	launcher := &nodeLauncher{t: t, c: c, specs: map[string]localaws.LaunchSpec{}}
	as.SetLauncher(launcher)
	asDone := make(chan struct{})
	go func() { defer close(asDone); as.Run(ctx) }()
	ec2Srv, asSrv := httptest.NewServer(lt), httptest.NewServer(as)
	awsCfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""), RetryMaxAttempts: 1}
	ec2c := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(ec2Srv.URL) })
	asc := autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(asSrv.URL) })
	var subnets []string
	for _, s := range localaws.DefaultSubnets(region) {
		subnets = append(subnets, s.ID)
	}

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testScheme(t), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	r, err := New(mgr.GetClient(), mgr.GetAPIReader(), rec, Options{EC2: ec2c, AutoScaling: asc, Subnets: subnets,
		Cluster: userdata.Cluster{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.0/16"},
		AMIs:    map[v1alpha1.AMIFamily]string{v1alpha1.AMIFamilyAmazonLinux2023: "ami-0123456789abcdef0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-mgrDone; err != nil {
			t.Error(err)
		}
		<-asDone
		ec2Srv.Close()
		asSrv.Close()
	})
	for _, b := range before {
		b(ctx, ec2c)
	}
	if err := c.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(*v1alpha1.NodeGroup) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			got := &v1alpha1.NodeGroup{}
			if err := c.Get(ctx, types.NamespacedName{Name: "ng1"}, got); err != nil {
				return apierrors.IsNotFound(err) && what == "deleted", nil
			}
			if hasIssue(got.Status.Health.Issues, v1alpha1.IssueAsgInstanceLaunchFailures) {
				return false, fmt.Errorf("the local cloud fails to launch: %s", got.Status.Health.Issues[0].Message)
			}
			return cond(got), nil
		})
		if err != nil {
			got := &v1alpha1.NodeGroup{}
			_ = c.Get(ctx, types.NamespacedName{Name: "ng1"}, got)
			t.Fatalf("waiting until %s: %v; status %+v; events:\n%s", what, err, got.Status, strings.Join(rec.events, "\n"))
		}
	}
	return &localCloud{c: c, asc: asc, ec2c: ec2c, rec: rec, launcher: launcher, waitFor: waitFor}
}

// The controller against the local cloud's EC2 launch templates and Auto Scaling on
// their wire protocols, through aws-sdk-go-v2, and a real kube-apiserver: a group is
// created, rolled onto a new template version (MINIMAL), and deleted.
func TestIntegrationLocalCloud(t *testing.T) {
	ng := baseGroup(3)
	ng.UID = ""
	ng.Spec.UpdateStrategy = v1alpha1.UpdateStrategyMinimal
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{}
	lc := startLocalCloud(t, ng)
	ctx, c, asc, rec, launcher, waitFor := t.Context(), lc.c, lc.asc, lc.rec, lc.launcher, lc.waitFor
	waitFor("active", active)

	// The instances were launched from the rendered launch template, spread over zones.
	launcher.mu.Lock()
	zones := map[string]bool{}
	for _, s := range launcher.specs {
		zones[s.AvailabilityZone] = true
		if s.ImageID != "ami-0123456789abcdef0" || s.InstanceType != "m5.large" || s.Tags["eks:cluster-name"] != testCluster ||
			!strings.Contains(string(s.UserData), "eks.amazonaws.com/nodegroup=ng1") {
			t.Errorf("launched %+v", s)
		}
	}
	if len(zones) < 2 || len(launcher.failed) > 0 {
		t.Errorf("zones %v; node registrations failed: %q", zones, launcher.failed)
	}
	launcher.mu.Unlock()

	got := &v1alpha1.NodeGroup{}
	if err := c.Get(ctx, types.NamespacedName{Name: "ng1"}, got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Template.Labels = map[string]string{"team": "blue"}
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitFor("updated", func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.LaunchTemplate.Version == "2" && ng.Status.UpdatedSize == 3
	})
	out, err := asc.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{got.Status.AutoScalingGroupName}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("DescribeAutoScalingGroups: %v", err)
	}
	g := out.AutoScalingGroups[0]
	if aws.ToInt32(g.DesiredCapacity) != 3 || aws.ToInt32(g.MaxSize) != 6 || aws.ToString(g.LaunchTemplate.Version) != "2" {
		t.Errorf("group after the update: desired %d max %d version %s", aws.ToInt32(g.DesiredCapacity), aws.ToInt32(g.MaxSize), aws.ToString(g.LaunchTemplate.Version))
	}
	for _, i := range g.Instances {
		if aws.ToString(i.LaunchTemplate.Version) != "2" {
			t.Errorf("instance %s on version %s", aws.ToString(i.InstanceId), aws.ToString(i.LaunchTemplate.Version))
		}
	}
	if !rec.has("UpdateSucceeded") {
		t.Errorf("events:\n%s", strings.Join(rec.events, "\n"))
	}

	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", func(*v1alpha1.NodeGroup) bool { return false })
	out, err = asc.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{got.Status.AutoScalingGroupName}})
	if err != nil || len(out.AutoScalingGroups) != 0 && aws.ToString(out.AutoScalingGroups[0].Status) == "" {
		t.Errorf("after delete: %v, %+v", err, out)
	}
}

// The defect this guards against: after `aws autoscaling set-desired-capacity
// --desired-capacity 2` on a group's Auto Scaling group, the group stayed at 2 while
// the NodeGroup said 1. The NodeGroup owns the size: the controller puts the group back,
// says so in an event, and its status agrees with the group again.
func TestIntegrationLocalCloudSizeOwnership(t *testing.T) {
	ng := baseGroup(1)
	ng.UID = ""
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{}
	lc := startLocalCloud(t, ng)
	ctx := t.Context()
	lc.waitFor("active", active)
	got := &v1alpha1.NodeGroup{}
	if err := lc.c.Get(ctx, types.NamespacedName{Name: "ng1"}, got); err != nil {
		t.Fatal(err)
	}
	name := got.Status.AutoScalingGroupName
	if _, err := lc.asc.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(name), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	group := func() (desired int32, instances int) {
		out, err := lc.asc.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		if err != nil || len(out.AutoScalingGroups) != 1 {
			t.Fatalf("DescribeAutoScalingGroups: %v", err)
		}
		g := out.AutoScalingGroups[0]
		for _, i := range g.Instances {
			if i.LifecycleState == "InService" || i.LifecycleState == "Pending" {
				instances++
			}
		}
		return aws.ToInt32(g.DesiredCapacity), instances
	}
	lc.waitFor("put back to 1", func(ng *v1alpha1.NodeGroup) bool {
		desired, instances := group()
		return lc.rec.has("SizeRestored") && desired == 1 && instances == 1 && len(ng.Status.Instances) == 1 && ng.Status.DesiredSize == 1 && active(ng)
	})
}
