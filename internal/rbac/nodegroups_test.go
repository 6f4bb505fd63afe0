package rbac

import "testing"

// usedByTheNodeGroupController lists every right internal/nodegroup uses; its role
// grants exactly these.
var usedByTheNodeGroupController = map[grant]string{
	{"cluster", "nodejoin.io", "nodegroups", "", "get"}:          "NodeGroup cache",
	{"cluster", "nodejoin.io", "nodegroups", "", "list"}:         "NodeGroup cache",
	{"cluster", "nodejoin.io", "nodegroups", "", "watch"}:        "NodeGroup cache",
	{"cluster", "nodejoin.io", "nodegroups", "", "update"}:       "the finalizer",
	{"cluster", "nodejoin.io", "nodegroups/status", "", "patch"}: "Reconciler.finish",
	{"cluster", "", "nodes", "", "list"}:                         "Node cache",
	{"cluster", "", "nodes", "", "watch"}:                        "Node cache",
	{"cluster", "", "nodes", "", "patch"}:                        "Reconciler.cordon",
	{"cluster", "", "nodes", "", "delete"}:                       "Reconciler.deleteNode",
	{"cluster", "", "pods", "", "list"}:                          "Reconciler.drain",
	{"cluster", "", "pods", "", "delete"}:                        "Reconciler.drain with force",
	{"cluster", "", "pods/eviction", "", "create"}:               "Reconciler.drain",
	{"cluster", "policy", "poddisruptionbudgets", "", "list"}:    "Reconciler.blocker",
}

func TestNodeGroupRolesGrantOnlyWhatTheControllerUses(t *testing.T) {
	o := ForNodeGroups(&ServiceAccount)
	if len(o.Roles) != 0 || len(o.RoleBindings) != 0 {
		t.Errorf("namespaced roles: %d, bindings %d", len(o.Roles), len(o.RoleBindings))
	}
	seen := map[grant]bool{}
	for _, r := range o.ClusterRoles {
		for _, g := range grants("cluster", r.Rules) {
			if _, ok := usedByTheNodeGroupController[g]; !ok {
				t.Errorf("the node group role grants %+v, which the controller does not use", g)
			}
			seen[g] = true
		}
	}
	for g, why := range usedByTheNodeGroupController {
		if !seen[g] {
			t.Errorf("the node group role lacks %+v (%s)", g, why)
		}
	}
	// Bound to the controller alone.
	for _, b := range o.ClusterRoleBindings {
		if len(b.Subjects) != 1 || b.Subjects[0] != ServiceAccount || b.RoleRef.Name != NodeGroupsRole {
			t.Errorf("binding %s: subjects %+v role %s", b.Name, b.Subjects, b.RoleRef.Name)
		}
	}
}
