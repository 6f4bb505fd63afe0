package nodegroup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	sigsyaml "sigs.k8s.io/yaml"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// realAPI starts a kube-apiserver with the NodeGroup CRD and returns a client.
func realAPI(t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	env := testenv.Start(t)
	s := testScheme(t)
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	// As manager.ApplyCRD does (which this package cannot import).
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sigsyaml.Unmarshal(v1alpha1.NodeGroupCRD, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for the NodeGroup CRD: %v", err)
	}
	// A new client: its REST mapper learns the new resource.
	if c, err = client.New(env.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	// Pods need their namespace's service account; no controller manager makes it.
	if err := c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	return env, c
}

// The CRD on a real API server: its defaults apply (instance types are the controller's
// default, m5.large, only without a launch template that may name one), its CEL rules
// refuse what Validate refuses, and kubectl gets eksctl's columns.
func TestIntegrationCRD(t *testing.T) {
	_, c := realAPI(t)
	ctx := t.Context()
	ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Spec: v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 3}}}
	if err := c.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	s := ng.Spec
	if s.Template.AMIFamily != v1alpha1.AMIFamilyAmazonLinux2023 || s.Template.CapacityType != v1alpha1.CapacityOnDemand ||
		len(s.Template.InstanceTypes) != 0 || s.UpdateStrategy != v1alpha1.UpdateStrategyDefault ||
		s.UpdateConfig == nil || ptr.Deref(s.UpdateConfig.MaxUnavailable, 0) != 1 || s.Timeouts.JoinTimeout.Duration != 15*time.Minute ||
		s.Timeouts.PostDrainWait.Duration != time.Minute || s.Scaling.DesiredSize != nil {
		t.Errorf("defaulted by the API server: %+v", s)
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.NodeGroupSpec
		want string
	}{
		{"min-above-max", v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 4, MaxSize: 3}}, "minSize must not exceed maxSize"},
		{"desired-outside", v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 3, DesiredSize: ptr.To[int32](5)}}, "desiredSize must be between minSize and maxSize"},
		{"both-unavailable", v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 3},
			UpdateConfig: &v1alpha1.UpdateConfig{MaxUnavailable: ptr.To[int32](1), MaxUnavailablePercentage: ptr.To[int32](50)}}, "set exactly one of maxUnavailable and maxUnavailablePercentage"},
		{"unavailable-above-max", v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 3},
			UpdateConfig: &v1alpha1.UpdateConfig{MaxUnavailable: ptr.To[int32](4)}}, "updateConfig.maxUnavailable must not exceed scaling.maxSize"},
		{"bad-strategy", v1alpha1.NodeGroupSpec{Scaling: v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 3}, UpdateStrategy: "FAST"}, "Unsupported value"},
	} {
		ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: tc.spec}
		err := c.Create(ctx, ng)
		switch {
		case !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: err = %v, want Invalid with %q", tc.name, err, tc.want)
		case len(ng.Validate()) == 0:
			t.Errorf("%s: the API server refuses it but Validate accepts it", tc.name)
		}
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, types.NamespacedName{Name: "nodegroups.nodejoin.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		cols = append(cols, strings.ToUpper(col.Name))
	}
	if got := strings.Join(cols, ","); got != "STATUS,MIN,MAX,DESIRED,READY,UPDATED,AMI FAMILY,INSTANCE TYPE,AGE" {
		t.Errorf("printer columns %s", got)
	}
}

// The rolling update on a real API server: evictions through the real Eviction API,
// which refuses them from the PodDisruptionBudget's status (written here as the
// disruption controller would), and status written through the status subresource.
// The reconciler acts as a user holding only rbac.ForNodeGroups's role.
func TestIntegrationRollingUpdateWithPDB(t *testing.T) {
	env, c := realAPI(t)
	const user = "nodejoin-test-nodegroups"
	subject := rbac.User(user)
	if err := rbac.ApplyObjects(t.Context(), env.Client, rbac.ForNodeGroups(&subject), "test-admin"); err != nil {
		t.Fatal(err)
	}
	asUser := rest.CopyConfig(env.Config)
	asUser.Impersonate = rest.ImpersonationConfig{UserName: user}
	ctrlClient, err := client.New(asUser, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ng := baseGroup(3)
	ng.UID = ""
	ng.Spec.Timeouts.PostDrainWait = &metav1.Duration{Duration: 10 * time.Second}
	h := newRealHarness(t, ng, c, ctrlClient)
	h.until("active", 60, active)
	h.addWorkload("web", 3, 3) // refuses every eviction
	h.mutate(func(ng *v1alpha1.NodeGroup) { ng.Spec.Template.Labels = map[string]string{"team": "blue"} })
	h.until("blocked", 60, func(ng *v1alpha1.NodeGroup) bool {
		u := ng.Status.Update
		return u != nil && len(u.Nodes) == 1 && len(u.Nodes[0].Blocking) > 0
	})
	if b := h.get().Status.Update.Nodes[0].Blocking[0]; !strings.Contains(b, "blocked by PodDisruptionBudget default/web") {
		t.Errorf("blocking = %q", b)
	}
	h.setPDB("web", 2)
	h.until("updated", 400, func(ng *v1alpha1.NodeGroup) bool {
		return active(ng) && ng.Status.UpdatedSize == 3 && ng.Status.LaunchTemplate.Version == "2"
	})
	if v := h.instanceVersions(); v["2"] != 3 || len(v) != 1 {
		t.Errorf("instances by version = %v", v)
	}
	if h.maxInFlight != 1 {
		t.Errorf("max in flight %d", h.maxInFlight)
	}
}

// The controller under a controller-runtime manager, driven by watches and its own
// requeues in real time: a group is created, its instances join, it is scaled and
// deleted.
func TestIntegrationManagerDrivesGroup(t *testing.T) {
	env, c := realAPI(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cloud := newFakeCloud(time.Now)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: testScheme(t), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(mgr.GetClient(), mgr.GetAPIReader(), &recorder{}, Options{EC2: cloud, AutoScaling: cloud, AvailabilityZones: []string{"us-west-2a"},
		Cluster: userdata.Cluster{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// The cloud and the kubelets, in real time.
	h := &harness{t: t, cloud: cloud, client: c, name: "ng1", launched: map[string]int{}, broken: map[string]bool{}, real: true, pdbs: map[string]int{}}
	world := make(chan struct{})
	go func() {
		defer close(world)
		for ctx.Err() == nil {
			cloud.converge()
			h.kubelets()
			h.step++
			time.Sleep(200 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-world }()
	ng := baseGroup(2)
	ng.UID = ""
	if err := c.Create(ctx, ng); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(*v1alpha1.NodeGroup) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			got := &v1alpha1.NodeGroup{}
			if err := c.Get(ctx, types.NamespacedName{Name: "ng1"}, got); err != nil {
				return apierrors.IsNotFound(err) && what == "deleted", nil
			}
			return cond(got), nil
		})
		if err != nil {
			got := &v1alpha1.NodeGroup{}
			_ = c.Get(ctx, types.NamespacedName{Name: "ng1"}, got)
			t.Fatalf("waiting until %s: %v; status %+v", what, err, got.Status)
		}
	}
	waitFor("active", active)
	got := &v1alpha1.NodeGroup{}
	if err := c.Get(ctx, types.NamespacedName{Name: "ng1"}, got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Scaling.DesiredSize = ptr.To[int32](3)
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitFor("scaled to 3", func(ng *v1alpha1.NodeGroup) bool { return active(ng) && ng.Status.ReadySize == 3 })
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", func(*v1alpha1.NodeGroup) bool { return false })
	if g := cloud.group(); g != nil || len(cloud.templates) != 0 {
		t.Errorf("the cloud still has the group or its template")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
