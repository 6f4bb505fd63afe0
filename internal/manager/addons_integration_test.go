package manager

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Against a real kube-apiserver, as a user holding only rbac.ForAddons: the add-ons are
// created; a deleted DaemonSet and a changed Deployment come back; the installer never
// fails for want of a right.
func TestAddonInstallerOnAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const user = "addon-installer"
	subject := rbac.User(user)
	if err := rbac.ApplyObjects(ctx, env.Client, rbac.ForAddons(&subject), "test"); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := addons.Objects(addons.Options{Enabled: addons.Names, APIServer: "https://198.18.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	applied := make(chan struct{}, 100)
	a := &addonInstaller{objects: objs, client: client, dyn: dyn, log: slog.New(slog.NewTextHandler(&logs, nil)), resync: time.Hour,
		onApplied: func() { applied <- struct{}{} }}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Start(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("installer log:\n%s", logs.String())
		}
	}()
	select {
	case <-applied:
	case <-time.After(time.Minute):
		t.Fatalf("the add-ons were not applied; log:\n%s", logs.String())
	}

	admin := env.Client
	ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, addons.KubeProxy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AppsV1().Deployments("kube-system").Get(ctx, addons.CoreDNS, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := admin.CoreV1().Services("kube-system").Get(ctx, addons.KubeDNS, metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.100.0.10" {
		t.Fatalf("kube-dns: %v, %v", svc, err)
	}
	for _, name := range []string{addons.KubeProxy, addons.CoreDNS} {
		if _, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
		if _, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	}
	for _, name := range []string{addons.KubeProxyBinding, addons.CoreDNSRole} {
		if _, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	}

	// Deleted: it comes back (a new object).
	if err := admin.AppsV1().DaemonSets("kube-system").Delete(ctx, addons.KubeProxy, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, addons.KubeProxy, metav1.GetOptions{})
		return err == nil && got.UID != ds.UID && got.DeletionTimestamp == nil, nil
	}); err != nil {
		t.Fatalf("the deleted kube-proxy DaemonSet did not come back: %v", err)
	}
	// Changed: the applied fields are set back.
	dep, err := admin.AppsV1().Deployments("kube-system").Get(ctx, addons.CoreDNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Image = "example.com/other:1"
	if _, err := admin.AppsV1().Deployments("kube-system").Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := admin.AppsV1().Deployments("kube-system").Get(ctx, addons.CoreDNS, metav1.GetOptions{})
		return err == nil && got.Spec.Template.Spec.Containers[0].Image == addons.DefaultCoreDNSImage, nil
	}); err != nil {
		t.Fatalf("the changed CoreDNS Deployment was not set back: %v", err)
	}
	// A deleted binding comes back too.
	if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, addons.KubeProxyBinding, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, addons.KubeProxyBinding, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the deleted kube-proxy binding did not come back: %v", err)
	}
}
