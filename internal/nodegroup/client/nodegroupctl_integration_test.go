package client

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// The commands' work against a real API server with the NodeGroup CRD; the test plays
// the controller by writing status.
func TestClientAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c, err := NewForConfig(env.Config, "test")
	if err != nil {
		t.Fatal(err)
	}
	c.Poll = 50 * time.Millisecond

	// No CRD yet: the error says what to do.
	if _, err := c.List(ctx); err == nil || !strings.Contains(err.Error(), "does not serve NodeGroups") {
		t.Fatalf("List without the CRD = %v", err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.ApplyCRD(ctx, dyn, v1alpha1.NodeGroupCRD); err != nil {
		t.Fatal(err)
	}
	// Discovery serves a new CRD a moment after it is Established (under load, after
	// the first Create would already have tried).
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.List(ctx)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the NodeGroup CRD was not served a minute after it was Established: %v", err)
	}

	l, err := Load([]byte("apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: test}\nmanagedNodeGroups:\n  - {name: ng, desiredCapacity: 2, maxSize: 4}\n"), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	created, err := c.Create(ctx, l.NodeGroups)
	if err != nil || len(created) != 1 {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if _, err := c.Create(ctx, l.NodeGroups); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second Create = %v", err)
	}
	if _, err := c.Get(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "node group nope not found in cluster test") {
		t.Errorf("Get(nope) = %v", err)
	}

	// The controller's part: it reports the group ACTIVE with two Ready nodes.
	setStatus := func(mutate func(ng *v1alpha1.NodeGroup)) {
		t.Helper()
		ng, err := c.Get(ctx, "ng")
		if err != nil {
			t.Fatal(err)
		}
		mutate(ng)
		ng.Status.ObservedGeneration = ng.Generation
		if err := c.c.Status().Update(ctx, ng); err != nil {
			t.Fatal(err)
		}
	}
	instances := func(n int, version string) []v1alpha1.InstanceStatus {
		var out []v1alpha1.InstanceStatus
		for i := range n {
			out = append(out, v1alpha1.InstanceStatus{InstanceID: "i-" + strings.Repeat(string(rune('a'+i)), 17), LaunchTemplateVersion: version, Ready: true,
				FirstSeen: metav1.Now()})
		}
		return out
	}
	setStatus(func(ng *v1alpha1.NodeGroup) {
		ng.Status.Phase, ng.Status.DesiredSize, ng.Status.ReadySize, ng.Status.UpdatedSize = v1alpha1.PhaseActive, 2, 2, 2
		ng.Status.LaunchTemplate = &v1alpha1.LaunchTemplateStatus{Name: "lt", ID: "lt-1", Version: "1"}
		ng.Status.Instances = instances(2, "1")
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var seen int
	if _, err := c.Wait(wctx, "ng", func(ng *v1alpha1.NodeGroup) (bool, error) { return Reached(Created, 0, ng) }, func(*v1alpha1.NodeGroup) { seen++ }); err != nil {
		t.Fatal(err)
	}
	if seen != 1 {
		t.Errorf("observe called %d times for one version", seen)
	}

	// Scale: refused above the maximum, then done; the wait ends when the status
	// catches up with the new generation.
	if _, err := c.Scale(ctx, "ng", Sizes{Desired: i32(5)}); err == nil || !strings.Contains(err.Error(), "pass --nodes-max 5") {
		t.Errorf("Scale(5) = %v", err)
	}
	res, err := c.Scale(ctx, "ng", Sizes{Desired: i32(4)})
	if err != nil {
		t.Fatal(err)
	}
	if *res.Before.DesiredSize != 2 || *res.After.DesiredSize != 4 || res.Generation < 2 {
		t.Errorf("Scale = %+v", res)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Wait(wctx, "ng", func(ng *v1alpha1.NodeGroup) (bool, error) { return Reached(Scaled, res.Generation, ng) }, nil)
		done <- err
	}()
	setStatus(func(ng *v1alpha1.NodeGroup) {
		ng.Status.DesiredSize, ng.Status.ReadySize, ng.Status.UpdatedSize, ng.Status.Instances = 4, 4, 4, instances(4, "1")
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Upgrade: the same template is no change; a new label is.
	ng, err := c.Get(ctx, "ng")
	if err != nil {
		t.Fatal(err)
	}
	same := ng.Spec.Template.DeepCopy()
	same.AMIFamily, same.CapacityType = "", "" // defaults, as a file would leave them
	up, err := c.Upgrade(ctx, "ng", same, false)
	if err != nil || up.TemplateChanged || up.FromVersion != "1" {
		t.Fatalf("Upgrade(same) = %+v, %v", up, err)
	}
	changed := ng.Spec.Template.DeepCopy()
	changed.Labels["release"] = "2"
	up, err = c.Upgrade(ctx, "ng", changed, true)
	if err != nil || !up.TemplateChanged {
		t.Fatalf("Upgrade(changed) = %+v, %v", up, err)
	}
	ng, _ = c.Get(ctx, "ng")
	if !ng.Spec.Force || ng.Spec.Template.Labels["release"] != "2" {
		t.Errorf("after Upgrade: force %v, labels %v", ng.Spec.Force, ng.Spec.Template.Labels)
	}

	// Delete: the object goes (no finalizer without a controller).
	if err := c.Delete(ctx, "ng"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(wctx, "ng", func(ng *v1alpha1.NodeGroup) (bool, error) { return Reached(Deleted, 0, ng) }, nil); err != nil {
		t.Fatal(err)
	}
}
