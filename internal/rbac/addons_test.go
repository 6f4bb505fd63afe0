package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// usedByTheAddonInstaller lists every right manager's addonInstaller uses; the add-on
// roles grant exactly these.
var usedByTheAddonInstaller = func() map[grant]string {
	m := map[grant]string{}
	add := func(scope, group, resource, why string, verbs []string, names ...string) {
		if len(names) == 0 {
			names = []string{""}
		}
		for _, n := range names {
			for _, v := range verbs {
				m[grant{scope, group, resource, n, v}] = why
			}
		}
	}
	apply := []string{"create", "patch"}
	add("cluster", "rbac.authorization.k8s.io", "clusterroles", "apply system:coredns and aws-node", apply, "system:coredns", "aws-node")
	add("cluster", "rbac.authorization.k8s.io", "clusterroles", "bind kube-proxy to system:node-proxier", []string{"bind"}, "system:node-proxier")
	add("cluster", "rbac.authorization.k8s.io", "clusterrolebindings", "apply, and replace when the role changed", []string{"create", "patch", "delete"}, "nodejoin:node-proxier", "system:coredns", "aws-node")
	add("cluster", "rbac.authorization.k8s.io", "clusterrolebindings", "informer", []string{"list", "watch"})
	for _, r := range []string{"endpoints", "services", "pods", "namespaces"} {
		add("cluster", "", r, "held to create and bind system:coredns", []string{"list", "watch"})
	}
	add("cluster", "discovery.k8s.io", "endpointslices", "held to create and bind system:coredns", []string{"list", "watch"})
	for _, r := range []string{"nodes", "pods", "namespaces"} {
		add("cluster", "", r, "held to create and bind aws-node", []string{"get", "list", "watch"})
	}
	add("kube-system", "", "serviceaccounts", "apply", apply, "kube-proxy", "coredns", "aws-node")
	add("kube-system", "", "configmaps", "apply", apply, "kube-proxy", "coredns")
	add("kube-system", "", "services", "apply", apply, "kube-dns")
	add("kube-system", "apps", "daemonsets", "apply", apply, "kube-proxy", "aws-node")
	add("kube-system", "apps", "deployments", "apply", apply, "coredns")
	add("kube-system", "", "serviceaccounts", "informer", []string{"list", "watch"})
	add("kube-system", "", "services", "informer", []string{"list", "watch"})
	add("kube-system", "apps", "daemonsets", "informer", []string{"list", "watch"})
	add("kube-system", "apps", "deployments", "informer", []string{"list", "watch"})
	return m
}()

func TestAddonRolesGrantOnlyWhatTheInstallerUses(t *testing.T) {
	o := ForAddons(&ServiceAccount)
	var got []grant
	for _, r := range o.ClusterRoles {
		got = append(got, grants("cluster", r.Rules)...)
	}
	for _, r := range o.Roles {
		got = append(got, grants(r.Namespace, r.Rules)...)
	}
	seen := map[grant]bool{}
	for _, g := range got {
		if _, ok := usedByTheAddonInstaller[g]; !ok {
			t.Errorf("the add-on roles grant %+v, which the installer does not use", g)
		}
		if g.verb == "escalate" || g.verb == "*" || g.verb == "impersonate" || (g.verb == "bind" && g.name != addons.NodeProxierRole) {
			t.Errorf("the add-on roles grant %+v", g)
		}
		seen[g] = true
	}
	for g, why := range usedByTheAddonInstaller {
		if !seen[g] {
			t.Errorf("the add-on roles lack %+v (%s)", g, why)
		}
	}
}

// Every object the add-ons consist of can be applied (created and patched by name).
func TestAddonRolesCoverEveryAddonObject(t *testing.T) {
	objs, err := addons.Objects(addons.Options{Enabled: addons.Names, APIServer: "https://198.18.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	o := ForAddons(&ServiceAccount)
	have := map[grant]bool{}
	for _, r := range o.ClusterRoles {
		for _, g := range grants("cluster", r.Rules) {
			have[g] = true
		}
	}
	for _, r := range o.Roles {
		for _, g := range grants(r.Namespace, r.Rules) {
			have[g] = true
		}
	}
	for _, obj := range objs {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		gvk := obj.GetObjectKind().GroupVersionKind()
		gvr, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
		scope := m.GetNamespace()
		if scope == "" {
			scope = "cluster"
		}
		for _, v := range []string{"create", "patch"} {
			if g := (grant{scope, gvr.Group, gvr.Resource, m.GetName(), v}); !have[g] {
				t.Errorf("the add-on roles do not allow %s of %s %s/%s", v, gvk.Kind, m.GetNamespace(), m.GetName())
			}
		}
	}
	// Binding system:coredns and aws-node without bind: the controller holds their rules.
	for role, rules := range map[string][]rbacv1.PolicyRule{addons.CoreDNSRole: addons.CoreDNSRules(), addons.AWSNode: addons.AWSNodeRules()} {
		for _, g := range grants("cluster", rules) {
			if !have[g] {
				t.Errorf("the controller does not hold %+v of %s, so it may not create or bind it", g, role)
			}
		}
	}
	if len(o.RoleBindings) != 1 || o.RoleBindings[0].Subjects[0] != ServiceAccount || o.ClusterRoleBindings[0].Subjects[0] != ServiceAccount ||
		o.RoleBindings[0].RoleRef.Kind != "Role" || o.ClusterRoleBindings[0].RoleRef.Name != AddonsRole {
		t.Errorf("the add-on roles are not bound to the controller: %+v %+v", o.RoleBindings, o.ClusterRoleBindings)
	}
}
