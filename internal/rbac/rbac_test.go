package rbac

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the chart's RBAC, FlowSchema and CRDs (charts/nodejoin-controller) and deploy/crds/ from the code")

// The chart ships exactly the roles and CRDs of this code (bound to its service
// accounts), and deploy/crds/ the CRDs; deploy/'s other files are rendered from the
// chart (test/chart checks them).
func TestChartAndCRDsMatchCode(t *testing.T) {
	files, err := ChartTemplates()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"../../deploy/crds/nodejoin.io_nodeaccessentries.yaml": nodejoinv1alpha1.NodeAccessEntryCRD,
		"../../deploy/crds/nodejoin.io_nodegroups.yaml":        nodejoinv1alpha1.NodeGroupCRD,
	}
	for path, data := range files {
		want["../../charts/nodejoin-controller/"+path] = data
	}
	for path, want := range want {
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
			t.Fatalf("%v (run make generate)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the code installs; run make generate", path)
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

// grant is one verb on one resource (one name of it, when limited) in one API group.
type grant struct{ scope, group, resource, name, verb string }

// usedByTheController lists every right the controller's code uses; a role granting
// anything else fails TestControllerRolesGrantOnlyWhatTheCodeUses. Add a right here
// only together with the code that needs it, saying where.
var usedByTheController = map[grant]string{
	// internal/csr: the controller-runtime cache lists and watches CSRs; decisions are
	// written to the approval subresource, certificates and Failed to status.
	{"cluster", "certificates.k8s.io", "certificatesigningrequests", "", "get"}:             "csr cache",
	{"cluster", "certificates.k8s.io", "certificatesigningrequests", "", "list"}:            "csr cache",
	{"cluster", "certificates.k8s.io", "certificatesigningrequests", "", "watch"}:           "csr cache",
	{"cluster", "certificates.k8s.io", "certificatesigningrequests/approval", "", "update"}: "csr.Controller.Settle UpdateApproval",
	{"cluster", "certificates.k8s.io", "certificatesigningrequests/status", "", "update"}:   "csr.Controller.Settle UpdateStatus",
	// The API server requires approve/sign on the signer for those writes.
	{"cluster", "certificates.k8s.io", "signers", "kubernetes.io/kubelet-serving", "approve"}:               "approval",
	{"cluster", "certificates.k8s.io", "signers", "kubernetes.io/kubelet-serving", "sign"}:                  "issuance",
	{"cluster", "certificates.k8s.io", "signers", "kubernetes.io/kube-apiserver-client-kubelet", "approve"}: "approval",
	{"cluster", "certificates.k8s.io", "signers", "kubernetes.io/kube-apiserver-client-kubelet", "sign"}:    "issuance",
	// csr.NewAccessReview.
	{"cluster", "authorization.k8s.io", "subjectaccessreviews", "", "create"}: "csr.NewAccessReview",
	// The event recorders (core and events.k8s.io, create and patch for aggregation).
	{"cluster", "", "events", "", "create"}:              "events",
	{"cluster", "", "events", "", "patch"}:               "events",
	{"cluster", "events.k8s.io", "events", "", "create"}: "events",
	{"cluster", "events.k8s.io", "events", "", "patch"}:  "events",
	// manager.newAccessEntries: an informer on NodeAccessEntries.
	{"cluster", "nodejoin.io", "nodeaccessentries", "", "get"}:   "entries cache",
	{"cluster", "nodejoin.io", "nodeaccessentries", "", "list"}:  "entries cache",
	{"cluster", "nodejoin.io", "nodeaccessentries", "", "watch"}: "entries cache",
	{"cluster", "nodejoin.io", "nodeaccessentries", "", "patch"}: "manager/entries.go: the role ID pinned on first use",
	// csr.NewNodeRegistered: is the Node of a bootstrap client CSR registered.
	{"cluster", "", "nodes", "", "get"}: "csr.NewNodeRegistered",
	// kube-system: leader election creates the Lease, then reads and renews it by name.
	{"kube-system", "coordination.k8s.io", "leases", "", "create"}:                    "leader election",
	{"kube-system", "coordination.k8s.io", "leases", "nodejoin-controller", "get"}:    "leader election",
	{"kube-system", "coordination.k8s.io", "leases", "nodejoin-controller", "update"}: "leader election",
	// manager.awsAuth reads aws-auth by name.
	{"kube-system", "", "configmaps", "aws-auth", "get"}:   "manager.awsAuth",
	{"kube-system", "", "configmaps", "aws-auth", "list"}:  "manager.awsAuthCache",
	{"kube-system", "", "configmaps", "aws-auth", "watch"}: "manager.awsAuthCache",
	// manager.awsAuthCache: the groups bound to cluster-admin.
	{"cluster", "rbac.authorization.k8s.io", "clusterrolebindings", "", "list"}:  "manager.awsAuthCache, manager.forgetOnRBACChange",
	{"cluster", "rbac.authorization.k8s.io", "clusterrolebindings", "", "watch"}: "manager.awsAuthCache, manager.forgetOnRBACChange",
	{"cluster", "rbac.authorization.k8s.io", "clusterroles", "", "list"}:         "manager.forgetOnRBACChange",
	{"cluster", "rbac.authorization.k8s.io", "clusterroles", "", "watch"}:        "manager.forgetOnRBACChange",
	// csr.ConfigMapRecord: read and updated by name (created empty with the roles).
	{"kube-system", "", "configmaps", "nodejoin-bootstrap-client-certificates", "get"}:    "csr.ConfigMapRecord",
	{"kube-system", "", "configmaps", "nodejoin-bootstrap-client-certificates", "update"}: "csr.ConfigMapRecord.Claim",
}

func grants(scope string, rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out = append(out, grant{scope, g, res, n, v})
					}
				}
			}
		}
	}
	return out
}

// The controller's roles grant exactly the rights its code uses: nothing more (a new
// right must be listed in usedByTheController with its reason), nothing left over.
func TestControllerRolesGrantOnlyWhatTheCodeUses(t *testing.T) {
	o := For(&ServiceAccount)
	var got []grant
	for _, r := range o.ClusterRoles {
		if r.Name == ControllerRole {
			got = append(got, grants("cluster", r.Rules)...)
		}
	}
	for _, r := range o.Roles {
		got = append(got, grants(r.Namespace, r.Rules)...)
	}
	seen := map[grant]bool{}
	for _, g := range got {
		if _, ok := usedByTheController[g]; !ok {
			t.Errorf("the controller's roles grant %+v, which its code does not use", g)
		}
		seen[g] = true
	}
	for g := range usedByTheController {
		if !seen[g] {
			t.Errorf("the controller's roles lack %+v (%s)", g, usedByTheController[g])
		}
	}
}

// Every binding's subjects are on a fixed list; in particular nodeclient (a first
// client certificate for any node name) is bound to no group but one node group's
// bootstrappers, never to system:bootstrappers as a whole.
func TestBindingSubjectsAllowList(t *testing.T) {
	allowed := map[string][]string{
		NodeBootstrapperRole:         {"Group/system:bootstrappers", "Group/system:nodes"},
		"nodejoin:kubelet-bootstrap": {"Group/system:bootstrappers"},
		"nodejoin:selfnodeclient":    {"Group/system:nodes"},
		ControllerRole:               {"ServiceAccount/nodejoin-controller"},
		// Windows nodes' kube-proxy (system:node-proxier), as EKS binds it.
		"eks:kube-proxy-windows": {"Group/eks:kube-proxy-windows"},
	}
	for _, b := range For(&ServiceAccount).ClusterRoleBindings {
		want, ok := allowed[b.Name]
		if !ok {
			t.Errorf("binding %s (role %s) is not on the allow-list", b.Name, b.RoleRef.Name)
			continue
		}
		var got []string
		for _, s := range b.Subjects {
			got = append(got, s.Kind+"/"+s.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("binding %s binds %v, want %v", b.Name, got, want)
		}
		if b.RoleRef.Name == NodeClientRole {
			t.Errorf("binding %s grants nodeclient to %v", b.Name, got)
		}
	}
	b := NodeGroupBinding("workers")
	if b.Name != "nodejoin:nodeclient:workers" || b.RoleRef.Name != NodeClientRole || len(b.Subjects) != 1 ||
		b.Subjects[0].Kind != rbacv1.GroupKind || b.Subjects[0].Name != "system:bootstrappers:workers" {
		t.Errorf("NodeGroupBinding(workers) = %s → %s %+v", b.Name, b.RoleRef.Name, b.Subjects)
	}
}
