package nodejoin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The node-group commands take eksctl's flags: --cluster names the cluster, --name the
// node group (or the argument, as before); --name in its old meaning, a cluster, is
// refused naming --cluster.
func TestNodeGroupFlags(t *testing.T) {
	orig := clusterExists
	clusterExists = func(name string) bool { return name == "demo" }
	t.Cleanup(func() { clusterExists = orig })
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	doc := "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: demo, region: eu-west-1}\n" +
		"managedNodeGroups:\n- name: ng-1\n  instanceType: m5.large\n- name: ng-2\n  instanceType: m5.large\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"scale", "nodegroup", "--nodes=3", "--nodes-max=10", "--name=ng1", "--cluster=absent"}, "no cluster named absent"},
		{[]string{"scale", "nodegroup", "ng1", "--nodes", "3", "--cluster", "absent"}, "no cluster named absent"},
		{[]string{"scale", "nodegroup", "--nodes", "3", "--cluster", "absent"}, "name the node group with --name NAME"},
		{[]string{"scale", "nodegroup", "ng-1", "--name", "ng-2", "--nodes", "1", "--cluster", "absent"}, "the argument ng-1 and --name ng-2 name two node groups"},
		{[]string{"scale", "nodegroup", "ng-1", "--name", "demo", "--nodes", "3"}, "--name demo names a cluster: --name is the node group (here ng-1); name the cluster with --cluster demo"},
		{[]string{"scale", "nodegroup", "--name", "demo", "--nodes", "3"}, "--name is the node group; name the cluster with --cluster demo"},
		{[]string{"describe", "nodegroup", "--cluster", "absent"}, "name the node group with --name NAME"},
		{[]string{"describe", "nodegroup", "--name", "demo"}, "name the cluster with --cluster demo"},
		{[]string{"get", "nodegroup", "--name", "demo"}, "name the cluster with --cluster demo"},
		{[]string{"get", "nodegroup", "--cluster", "absent", "--name", "ng-1"}, "no cluster named absent"},
		{[]string{"delete", "nodegroup", "--name", "demo"}, "name the cluster with --cluster demo"},
		{[]string{"upgrade", "nodegroup", "-f", file, "--cluster", "absent"}, "name the node group with --name NAME"},
		{[]string{"upgrade", "nodegroup", "-f", file, "--cluster", "absent", "--name", "ng-3"}, "has no node group ng-3"},
		{[]string{"create", "nodegroup", "-f", file, "--name", "demo", "--dry-run"}, "--name demo names a cluster: --name is the node group; name the cluster with --cluster demo"},
		{[]string{"create", "nodegroup", "-f", file, "--name", "ng-3", "--dry-run"}, "--name: " + file + " has no node group ng-3 (it has ng-1, ng-2)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	out, err := run(t, "create", "nodegroup", "-f", file, "--name", "ng-2", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "name: ng-2") || strings.Contains(out, "name: ng-1") {
		t.Errorf("--name ng-2 --dry-run printed\n%s", out)
	}
}
