package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// NodeGroupsRole names the ClusterRole and binding that let the controller run node
// groups (nodejoin-controller run --nodegroups).
const NodeGroupsRole = "nodejoin:controller:nodegroups"

// ForNodeGroups returns the role the NodeGroup controller needs, bound to controller:
//   - NodeGroups: read and watch them, update them (its finalizer) and patch their
//     status;
//   - Nodes: watch them (instances become nodes), patch them (cordon, and the
//     exclude-from-external-load-balancers label) and delete those of terminated
//     instances;
//   - Pods: list those of a node being drained, evict them (pods/eviction, which
//     honours PodDisruptionBudgets), and delete them only when the group says force;
//   - PodDisruptionBudgets: list them, to name the budget that refuses an eviction.
//
// Events are granted by the controller's main role.
func ForNodeGroups(controller *rbacv1.Subject) Objects {
	ng := nodejoinv1alpha1.NodeGroupResource.Resource
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{nodejoinv1alpha1.GroupName}, Resources: []string{ng}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{nodejoinv1alpha1.GroupName}, Resources: []string{ng + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list"}},
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	return Objects{
		ClusterRoles: []*rbacv1.ClusterRole{{TypeMeta: tm("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: NodeGroupsRole}, Rules: rules}},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: NodeGroupsRole},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeGroupsRole}, Subjects: []rbacv1.Subject{*controller}}},
	}
}
