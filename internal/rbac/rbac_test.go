package rbac

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite deploy/rbac.yaml and deploy/crds/ from the code")

// deploy/ ships exactly the roles the controller installs with --install-rbac, bound to
// its service account, and the CRD it installs with --install-crds.
func TestDeployManifestsMatchCode(t *testing.T) {
	rendered, err := For(&ServiceAccount).YAML()
	if err != nil {
		t.Fatal(err)
	}
	crd := append([]byte(nil), nodejoinv1alpha1.NodeAccessEntryCRD...)
	for path, want := range map[string][]byte{
		"../../deploy/rbac.yaml":                               rendered,
		"../../deploy/crds/nodejoin.io_nodeaccessentries.yaml": crd,
	} {
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/rbac -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the code installs; run go test ./internal/rbac -update", path)
		}
	}
}

// The controller's roles grant nothing that could make it a node or an administrator.
func TestControllerRolesAreLeastPrivilege(t *testing.T) {
	o := For(&ServiceAccount)
	for _, r := range o.ClusterRoles {
		for _, rule := range r.Rules {
			for _, v := range rule.Verbs {
				if v == "*" || v == "escalate" || v == "bind" || v == "impersonate" {
					t.Errorf("%s grants %s on %v", r.Name, v, rule.Resources)
				}
			}
			for _, res := range rule.Resources {
				if res == "nodes" && (len(rule.Verbs) != 1 || rule.Verbs[0] != "get") {
					t.Errorf("ClusterRole %s grants %v on nodes; only get is needed", r.Name, rule.Verbs)
				}
				if res == "*" || res == "secrets" {
					t.Errorf("ClusterRole %s grants %v on %s cluster-wide", r.Name, rule.Verbs, res)
				}
			}
		}
	}
	if len(o.Roles) != 1 || o.Roles[0].Namespace != "kube-system" {
		t.Fatalf("want one Role in kube-system, got %+v", o.Roles)
	}
}
