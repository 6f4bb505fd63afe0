package manager

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// DefaultAddonsResync is how often the leader applies the add-ons again even when no
// watched object changed: the ConfigMaps and the ClusterRole are not watched (the
// controller may not list kube-system's ConfigMaps or the cluster's roles).
const DefaultAddonsResync = 5 * time.Minute

// addonInstaller applies the add-ons' objects with server-side apply when the leader
// starts, and again whenever one of its watched objects (kube-system's DaemonSets,
// Deployments, Services and ServiceAccounts, and the ClusterRoleBindings, carrying
// addons.Label) is deleted or its spec changes, and every resync: EKS's cluster
// bootstrap brings back an add-on that was deleted the same way. Applying objects
// that are as applied changes nothing, so a trigger too many costs only requests.
type addonInstaller struct {
	objects []runtime.Object
	client  kubernetes.Interface
	dyn     dynamic.Interface
	log     *slog.Logger
	resync  time.Duration
	// onApplied, when set, is called after each complete application (tests).
	onApplied func()
}

// NeedLeaderElection: only the leader applies.
func (*addonInstaller) NeedLeaderElection() bool { return true }

func (a *addonInstaller) Start(ctx context.Context) error {
	trigger := make(chan struct{}, 1)
	kick := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	selector := func(o *metav1.ListOptions) { o.LabelSelector = addons.Label }
	ns := informers.NewSharedInformerFactoryWithOptions(a.client, 0,
		informers.WithNamespace(metav1.NamespaceSystem), informers.WithTweakListOptions(selector))
	cluster := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithTweakListOptions(selector))
	handler := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			if changed(old, obj) {
				kick()
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				a.log.Info("add-on object deleted, applying the add-ons again", "kind", fmt.Sprintf("%T", obj), "namespace", m.GetNamespace(), "name", m.GetName())
			}
			kick()
		},
	}
	for _, inf := range []cache.SharedIndexInformer{
		ns.Apps().V1().DaemonSets().Informer(),
		ns.Apps().V1().Deployments().Informer(),
		ns.Core().V1().Services().Informer(),
		ns.Core().V1().ServiceAccounts().Informer(),
		cluster.Rbac().V1().ClusterRoleBindings().Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	ns.Start(ctx.Done())
	cluster.Start(ctx.Done())
	defer ns.Shutdown()
	defer cluster.Shutdown()

	resync := time.NewTicker(a.resync)
	defer resync.Stop()
	failures, applied := 0, false
	for {
		var retry <-chan time.Time
		if err := a.apply(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			backoff := min(time.Second<<min(failures, 6), time.Minute)
			a.log.Warn("applying the add-ons failed, retrying", "err", err, "retryIn", backoff)
			retry = time.After(backoff)
		} else {
			if !applied || failures > 0 {
				a.log.Info("add-ons applied", "objects", len(a.objects))
			}
			failures, applied = 0, true
			if a.onApplied != nil {
				a.onApplied()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
		case <-resync.C:
		case <-retry:
		}
	}
}

// changed reports whether an update is one an apply may have to undo: a new
// generation (spec) or other labels. Status updates are not.
func changed(old, obj any) bool {
	o, err1 := meta.Accessor(old)
	n, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return true
	}
	if o.GetGeneration() != n.GetGeneration() {
		return true
	}
	if n.GetGeneration() == 0 && o.GetResourceVersion() != n.GetResourceVersion() {
		// Services and ServiceAccounts have no generation.
		return true
	}
	ol, nl := o.GetLabels(), n.GetLabels()
	if len(ol) != len(nl) {
		return true
	}
	for k, v := range nl {
		if ol[k] != v {
			return true
		}
	}
	return false
}

// apply applies every object in order under the controller's field manager, taking
// over fields others changed. A ClusterRoleBinding whose role changed (which cannot
// change in place) is deleted and applied again.
func (a *addonInstaller) apply(ctx context.Context) error {
	opts := metav1.ApplyOptions{FieldManager: Component, Force: true}
	for _, obj := range a.objects {
		u, gvr, err := toApply(obj)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = a.dyn.Resource(gvr)
		if ns := u.GetNamespace(); ns != "" {
			ri = a.dyn.Resource(gvr).Namespace(ns)
		}
		_, err = ri.Apply(ctx, u.GetName(), u, opts)
		if apierrors.IsInvalid(err) && u.GetKind() == "ClusterRoleBinding" {
			if err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
				_, err = ri.Apply(ctx, u.GetName(), u, opts)
			}
		}
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), key(u), err)
		}
	}
	return nil
}

func key(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// toApply turns a typed object into the body of an apply request: no status, and no
// null fields (empty creation timestamps), which would claim fields for nothing.
func toApply(obj runtime.Object) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, schema.GroupVersionResource{}, err
	}
	delete(m, "status")
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("%T has no kind", obj)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return u, gvr, nil
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}
