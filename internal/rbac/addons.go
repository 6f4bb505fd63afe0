package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// AddonsRole names the ClusterRole, Role and bindings that let the controller apply
// the add-ons (nodejoin-controller run --addons).
const AddonsRole = "nodejoin:controller:addons"

// ForAddons returns the roles the controller needs to apply the add-ons and watch them,
// bound to controller. Least privilege:
//   - every write (server-side apply: patch, and create when the object is missing,
//     which the API server authorizes with the object's name) is limited to the
//     add-ons' object names;
//   - list and watch (label-selected informers, which RBAC cannot limit by name) cover
//     kube-system's DaemonSets, Deployments, Services and ServiceAccounts, and the
//     cluster's ClusterRoleBindings; kube-system's ConfigMaps are not watched, so not
//     listable (they are applied again on every trigger and resync);
//   - kube-proxy's binding to upstream's system:node-proxier needs `bind` on that one
//     role (the controller does not hold its rights, and should not: it would read
//     every Node);
//   - CoreDNS's ClusterRole system:coredns: creating a role and binding it need either
//     `escalate` and `bind`, or holding its rules. The controller holds them (list
//     and watch of Services, endpoints, EndpointSlices, pods and namespaces: read
//     only). `escalate` with `bind` on the same role would let the controller write
//     any rule into it and bind it to itself: cluster-admin in two requests.
//   - aws-node's ClusterRole aws-node likewise: the controller holds its rules (get,
//     list and watch of nodes, pods and namespaces: read only).
func ForAddons(controller *rbacv1.Subject) Objects {
	names := func(n ...string) []string { return n }
	cluster := []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: names(addons.CoreDNSRole, addons.AWSNode), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: names(addons.NodeProxierRole), Verbs: []string{"bind"}},
		// Delete: a binding whose role reference changed is deleted and applied again.
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, ResourceNames: names(addons.KubeProxyBinding, addons.CoreDNSRole, addons.AWSNode), Verbs: []string{"create", "patch", "delete"}},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterrolebindings"}, Verbs: []string{"list", "watch"}},
	}
	cluster = append(cluster, addons.CoreDNSRules()...)
	cluster = append(cluster, addons.AWSNodeRules()...)
	namespaced := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: names(addons.KubeProxy, addons.CoreDNS, addons.AWSNode), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: names(addons.KubeProxy, addons.CoreDNS), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: names(addons.KubeDNS), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: names(addons.KubeProxy, addons.AWSNode), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: names(addons.CoreDNS), Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts", "services"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments"}, Verbs: []string{"list", "watch"}},
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: AddonsRole}
	}
	return Objects{
		ClusterRoles: []*rbacv1.ClusterRole{{TypeMeta: tm("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: AddonsRole}, Rules: cluster}},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: AddonsRole},
			RoleRef: ref("ClusterRole"), Subjects: []rbacv1.Subject{*controller}}},
		Roles: []*rbacv1.Role{{TypeMeta: tm("Role"), ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: AddonsRole}, Rules: namespaced}},
		RoleBindings: []*rbacv1.RoleBinding{{TypeMeta: tm("RoleBinding"), ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: AddonsRole},
			RoleRef: ref("Role"), Subjects: []rbacv1.Subject{*controller}}},
	}
}
