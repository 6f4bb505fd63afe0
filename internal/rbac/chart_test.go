package rbac

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// renderedModes are the chart's renderings that test/chart keeps fresh (helm template
// of every mode, golden files): the RBAC tests here read them without helm.
var renderedModes = []string{"approver", "webhook", "addons", "nodegroups"}

// renderedRBAC decodes the roles and bindings of one golden rendering of the chart.
func renderedRBAC(t *testing.T, mode string) Objects {
	t.Helper()
	data, err := os.ReadFile("../../test/chart/testdata/" + mode + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var o Objects
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var head struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var err error
		switch head.Kind {
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			err = sigsyaml.UnmarshalStrict([]byte(doc), r)
			o.ClusterRoles = append(o.ClusterRoles, r)
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			err = sigsyaml.UnmarshalStrict([]byte(doc), b)
			o.ClusterRoleBindings = append(o.ClusterRoleBindings, b)
		case "Role":
			r := &rbacv1.Role{}
			err = sigsyaml.UnmarshalStrict([]byte(doc), r)
			o.Roles = append(o.Roles, r)
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			err = sigsyaml.UnmarshalStrict([]byte(doc), b)
			o.RoleBindings = append(o.RoleBindings, b)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", mode, head.Kind, err)
		}
	}
	return o
}

// boundGrants returns every grant of the roles bound to the service account name.
func boundGrants(o Objects, sa string) []grant {
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa })
	}
	var out []grant
	for _, b := range o.ClusterRoleBindings {
		if !bound(b.Subjects) {
			continue
		}
		for _, r := range o.ClusterRoles {
			if r.Name == b.RoleRef.Name {
				out = append(out, grants("cluster", r.Rules)...)
			}
		}
	}
	for _, b := range o.RoleBindings {
		if !bound(b.Subjects) {
			continue
		}
		for _, r := range o.Roles {
			if r.Name == b.RoleRef.Name && r.Namespace == b.Namespace {
				out = append(out, grants(r.Namespace, r.Rules)...)
			}
		}
	}
	return out
}

// The allow-list of every grant holds for the roles the chart renders in every mode:
// the approver's service account gets exactly what its code uses, whatever else is on.
func TestChartControllerRolesGrantOnlyWhatTheCodeUses(t *testing.T) {
	for _, mode := range renderedModes {
		seen := map[grant]bool{}
		for _, g := range boundGrants(renderedRBAC(t, mode), ServiceAccount.Name) {
			if _, ok := usedByTheController[g]; !ok {
				t.Errorf("%s: the chart grants nodejoin-controller %+v, which its code does not use", mode, g)
			}
			seen[g] = true
		}
		for g, why := range usedByTheController {
			if !seen[g] {
				t.Errorf("%s: the chart's roles lack %+v (%s)", mode, g, why)
			}
		}
	}
}

// No service account of the chart may read or write Secrets, and ConfigMap writes are
// limited to names; the add-ons' and node groups' rights are on their own accounts.
func TestChartServiceAccountsHoldNoSecretsAndNamedConfigMapWrites(t *testing.T) {
	o := renderedRBAC(t, "addons")
	ng := renderedRBAC(t, "nodegroups")
	o.ClusterRoles, o.ClusterRoleBindings = append(o.ClusterRoles, ng.ClusterRoles...), append(o.ClusterRoleBindings, ng.ClusterRoleBindings...)
	o.Roles, o.RoleBindings = append(o.Roles, ng.Roles...), append(o.RoleBindings, ng.RoleBindings...)
	for _, sa := range []string{ServiceAccount.Name, AddonsServiceAccount, NodeGroupsServiceAccount} {
		gs := boundGrants(o, sa)
		if len(gs) == 0 {
			t.Errorf("no role is bound to %s", sa)
		}
		for _, g := range gs {
			if g.resource == "secrets" || g.resource == "*" || g.verb == "*" {
				t.Errorf("%s may %s %s (%s)", sa, g.verb, g.resource, g.scope)
			}
			if g.resource == "configmaps" && g.name == "" && slices.Contains([]string{"create", "update", "patch", "delete"}, g.verb) {
				t.Errorf("%s may %s any ConfigMap in %s: writes must name theirs", sa, g.verb, g.scope)
			}
		}
	}
	// The approver holds none of the add-ons' or node groups' rights.
	for _, g := range boundGrants(o, ServiceAccount.Name) {
		if g.group == "apps" || g.resource == "pods/eviction" || (g.resource == "nodes" && g.verb != "get") {
			t.Errorf("nodejoin-controller holds %+v, a right of the add-ons or node groups", g)
		}
	}
}
