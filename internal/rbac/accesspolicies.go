package rbac

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// EKS access policies are granted through groups (nodejoinv1alpha1.AccessPolicyGroup)
// that only a STANDARD access entry's associated policies put a caller in. Each group
// is bound to its policy's ClusterRole: in the cluster scope by a fixed
// ClusterRoleBinding per policy (ForAccessPolicies), in a namespace scope by a
// RoleBinding in that namespace, made and removed by AccessPolicyController as entries
// change.

// AccessPolicyLabel marks the RoleBindings AccessPolicyController owns; its value is
// the policy's name.
const AccessPolicyLabel = "nodejoin.io/access-policy"

// AccessPoliciesRole names the ClusterRole (and its binding) that lets the controller
// keep the namespace-scoped policies' RoleBindings.
const AccessPoliciesRole = "nodejoin:controller:access-policies"

func accessPolicyBindingName(policy string) string { return "nodejoin:access-policy:" + policy }

// ForAccessPolicies returns what access policies need: a ClusterRoleBinding per policy
// binding its cluster-scope group to the policy's ClusterRole (cluster-admin, admin,
// edit, view), and, bound to controller when it is set, the role the controller needs
// for namespace scopes: RoleBindings (listed by label, applied and deleted), Namespaces
// (watched, so that a binding is made once its namespace exists), and bind on exactly
// the policies' ClusterRoles — RBAC lets a RoleBinding be written only by whoever holds
// or may bind its role. This is a separate set (deploy/rbac-access-policies.yaml): a
// cluster that installs it lets the controller hand out the policies' rights, which is
// what STANDARD entries are for.
func ForAccessPolicies(controller *rbacv1.Subject) Objects {
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	var o Objects
	var roles []string
	for _, p := range nodejoinv1alpha1.AccessPolicies {
		roles = append(roles, p.ClusterRole)
		o.ClusterRoleBindings = append(o.ClusterRoleBindings, &rbacv1.ClusterRoleBinding{
			TypeMeta:   tm("ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: accessPolicyBindingName(p.Name), Labels: map[string]string{AccessPolicyLabel: p.Name}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: p.ClusterRole},
			Subjects:   []rbacv1.Subject{group(nodejoinv1alpha1.AccessPolicyGroup(p.Name, ""))},
		})
	}
	if controller == nil {
		return o
	}
	o.ClusterRoles = []*rbacv1.ClusterRole{{TypeMeta: tm("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: AccessPoliciesRole}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"list", "create", "patch", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: roles, Verbs: []string{"bind"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
	}}}
	o.ClusterRoleBindings = append(o.ClusterRoleBindings, &rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: AccessPoliciesRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: AccessPoliciesRole}, Subjects: []rbacv1.Subject{*controller}})
	return o
}

// AccessPolicyRoleBindings are the RoleBindings the namespace scopes of the STANDARD
// entries' policies need: one per policy and namespace, binding
// AccessPolicyGroup(policy, namespace) to the policy's ClusterRole, sorted by namespace
// and name. Entries that do not validate grant nothing (the webhook skips them too).
func AccessPolicyRoleBindings(entries []nodejoinv1alpha1.NodeAccessEntry) []*rbacv1.RoleBinding {
	want := map[[2]string]*rbacv1.RoleBinding{}
	for i := range entries {
		e := &entries[i]
		if e.Spec.Type != nodejoinv1alpha1.AccessEntryStandard || len(e.Validate()) > 0 {
			continue
		}
		for _, a := range e.Spec.AccessPolicies {
			p, ok := nodejoinv1alpha1.LookupAccessPolicy(a.PolicyARN)
			if !ok || a.AccessScope.Type != nodejoinv1alpha1.AccessScopeNamespace {
				continue
			}
			for _, ns := range a.AccessScope.Namespaces {
				want[[2]string{ns, p.Name}] = &rbacv1.RoleBinding{
					TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: accessPolicyBindingName(p.Name),
						Labels: map[string]string{AccessPolicyLabel: p.Name}},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: p.ClusterRole},
					Subjects: []rbacv1.Subject{group(nodejoinv1alpha1.AccessPolicyGroup(p.Name, ns))},
				}
			}
		}
	}
	out := make([]*rbacv1.RoleBinding, 0, len(want))
	for _, b := range want {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *rbacv1.RoleBinding) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// SyncAccessPolicyBindings makes the labelled RoleBindings exactly
// AccessPolicyRoleBindings(entries): it applies those whose namespace exists (a
// binding for a namespace not yet created waits for it) and deletes the others.
func SyncAccessPolicyBindings(ctx context.Context, c kubernetes.Interface, entries []nodejoinv1alpha1.NodeAccessEntry, fieldManager string) error {
	want := AccessPolicyRoleBindings(entries)
	wanted := map[string]bool{}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	for _, b := range want {
		wanted[b.Namespace+"/"+b.Name] = true
		err := apply(ctx, b, c.RbacV1().RoleBindings(b.Namespace).Apply, opts)
		if apierrors.IsInvalid(err) { // a binding whose role changed: roleRef is immutable
			if err = c.RbacV1().RoleBindings(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{}); err == nil {
				err = apply(ctx, b, c.RbacV1().RoleBindings(b.Namespace).Apply, opts)
			}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("role binding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	have, err := c.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{LabelSelector: AccessPolicyLabel})
	if err != nil {
		return fmt.Errorf("listing the access policies' role bindings: %w", err)
	}
	for _, b := range have.Items {
		if wanted[b.Namespace+"/"+b.Name] {
			continue
		}
		if err := c.RbacV1().RoleBindings(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting role binding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// AccessPolicyController keeps the namespace-scoped access policies' RoleBindings as
// the NodeAccessEntries say, again whenever an entry or a namespace changes. It runs on
// the leader only.
type AccessPolicyController struct {
	Client kubernetes.Interface
	// Reader lists NodeAccessEntries (the manager's cache).
	Reader       client.Reader
	FieldManager string
	Log          *slog.Logger
}

// syncKey is the one work item: every change re-syncs every binding.
var syncKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "access-policies"}}

// Reconcile syncs the bindings with the entries.
func (a *AccessPolicyController) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var l nodejoinv1alpha1.NodeAccessEntryList
	if err := a.Reader.List(ctx, &l); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing NodeAccessEntries: %w", err)
	}
	if err := SyncAccessPolicyBindings(ctx, a.Client, l.Items, a.FieldManager); err != nil {
		if a.Log != nil {
			a.Log.Warn("access policy bindings not synced", "err", err.Error())
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// SetupWithManager adds the controller to mgr.
func (a *AccessPolicyController) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{syncKey} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("access-policies").
		Watches(&nodejoinv1alpha1.NodeAccessEntry{}, one).
		Watches(&corev1.Namespace{}, one).
		Complete(a)
}
