package csr

import (
	"context"
	"maps"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// Item 2 of issue 25: a bootstrap token is bound to its node group. Before, any running,
// unregistered instance was approved, so a token of group "batch" got the first client
// certificate of a "web" instance, or of a bastion with no node role, and pre-empted
// that instance's name.
func TestBootstrapTokenBoundToItsGroup(t *testing.T) {
	const nodeRole = "arn:aws:iam::111122223333:role/nodes"
	tags := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	batch := tags(NodeGroupTag, "batch", ClusterTagPrefix+"test", "owned")
	inst := func(id string, role string, t map[string]string) *inventory.Instance {
		i := &inventory.Instance{ID: id, State: "running", Tags: maps.Clone(t)}
		if role != "" {
			i.RoleARN, i.Role = role, role[strings.LastIndex(role, "/")+1:]
		}
		return i
	}
	tokenGroups := []string{"system:bootstrappers", "system:bootstrappers:batch", "system:authenticated"}
	tests := []struct {
		name    string
		inst    *inventory.Instance
		groups  []string
		cluster string
		roles   NodeRoles
		reason  string
		msg     string
	}{
		{"instance of the token's group", inst("i-0b1", nodeRole, batch), tokenGroups, "test", nil, ReasonApproved, MessageClient},
		{"shared cluster tag", inst("i-0b2", nodeRole, tags(NodeGroupTag, "batch", ClusterTagPrefix+"test", "shared")), tokenGroups, "test", nil, ReasonApproved, MessageClient},
		{"another group's instance", inst("i-0web", nodeRole, tags(NodeGroupTag, "web", ClusterTagPrefix+"test", "owned")), tokenGroups, "test", nil,
			ReasonTokenGroup, `instance i-0web is tagged for node group "web", the token is for "batch"`},
		{"bastion without a role or tags", inst("i-0bastion", "", nil), tokenGroups, "test", nil,
			ReasonTokenGroup, `instance i-0bastion carries no eks:nodegroup-name tag, the token is for node group "batch"`},
		{"bastion tagged for the group, no role", inst("i-0bastion", "", batch), tokenGroups, "test", nil,
			ReasonNodeRole, "instance i-0bastion has no instance profile role; a bootstrap token joins only instances with a node role"},
		{"tagged instance of a role no entry maps", inst("i-0admin", "arn:aws:iam::111122223333:role/admin", batch), tokenGroups, "test", nil,
			ReasonNodeRole, "instance i-0admin has role arn:aws:iam::111122223333:role/admin, which no node access entry (EC2_LINUX or EC2_WINDOWS) maps"},
		{"no cluster tag", inst("i-0b3", nodeRole, tags(NodeGroupTag, "batch")), tokenGroups, "test", nil,
			ReasonCluster, "instance i-0b3 carries no kubernetes.io/cluster/test tag"},
		{"another cluster's instance", inst("i-0b4", nodeRole, tags(NodeGroupTag, "batch", ClusterTagPrefix+"other", "owned")), tokenGroups, "test", nil,
			ReasonCluster, "instance i-0b4 carries no kubernetes.io/cluster/test tag"},
		{"cluster name unknown", inst("i-0b5", nodeRole, batch), tokenGroups, "", nil,
			ReasonCluster, "the controller does not know the cluster's name"},
		{"token without a node group", inst("i-0b6", nodeRole, batch), []string{"system:bootstrappers", "system:authenticated"}, "test", nil,
			ReasonTokenGroup, "bootstrap token system:bootstrap:abcdef names no node group (no group system:bootstrappers:<node group>)"},
		{"kubeadm's default token", inst("i-0b7", nodeRole, batch), []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"}, "test", nil,
			ReasonTokenGroup, `instance i-0b7 is tagged for node group "batch", the token is for "kubeadm:default-node-token"`},
		{"token of two groups", inst("i-0b8", nodeRole, batch), []string{"system:bootstrappers", "system:bootstrappers:web", "system:bootstrappers:batch"}, "test", nil,
			ReasonTokenGroup, `names several node groups ["batch" "web"]`},
		{"no source of node roles", inst("i-0b9", nodeRole, batch), tokenGroups, "test", NodeRoles(nil),
			ReasonNodeRole, "the controller has no source of node roles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const node = "ip-198-18-0-50.us-west-2.compute.internal"
			roles := tt.roles
			if roles == nil && tt.name != "no source of node roles" {
				roles = roleSet{nodeRole: true}
			}
			p := &Policy{
				Inventory: staticInventory{node: tt.inst},
				Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
					return true, nil
				},
				NodeRegistered: func(context.Context, string) (bool, error) { return false, nil },
				Issued:         mapRecord{}, ClusterName: tt.cluster, NodeRoles: roles,
			}
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    request(t, reqSpec{cn: "system:node:" + node, orgs: []string{"system:nodes"}}),
				SignerName: SignerKubeletClient, Usages: clientUsages, Username: "system:bootstrap:abcdef", Groups: tt.groups,
			}}
			d, err := p.Decide(t.Context(), csr)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != tt.reason || !strings.Contains(d.Message, tt.msg) || d.Approve != (tt.reason == ReasonApproved) {
				t.Errorf("decision = %+v, want %s %q", d, tt.reason, tt.msg)
			}
			if d.Approve && d.ClaimInstance != tt.inst.ID {
				t.Errorf("approved without claiming instance %s: %+v", tt.inst.ID, d)
			}
		})
	}
}

// EntryNodeRoles knows a role as a node role only through a node entry (EC2_LINUX,
// EC2_WINDOWS) of the same role, compared without its path; a STANDARD entry of the role
// (an administrator's) does not make it a node role.
func TestEntryNodeRoles(t *testing.T) {
	s := runtime.NewScheme()
	if err := nodejoinv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	entry := func(name, arn string, typ nodejoinv1alpha1.AccessEntryType) *nodejoinv1alpha1.NodeAccessEntry {
		return &nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: nodejoinv1alpha1.NodeAccessEntrySpec{PrincipalARN: arn, Type: typ}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		entry("nodes", "arn:aws:iam::111122223333:role/nodes", nodejoinv1alpha1.AccessEntryEC2Linux),
		entry("win", "arn:aws:iam::111122223333:role/path/win", nodejoinv1alpha1.AccessEntryEC2Windows),
		entry("admin", "arn:aws:iam::111122223333:role/admin", nodejoinv1alpha1.AccessEntryStandard),
	).Build()
	roles := EntryNodeRoles{Reader: c}
	tests := []struct {
		inst inventory.Instance
		want string
	}{
		{inventory.Instance{Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/nodes"}, "NodeAccessEntry nodes"},
		{inventory.Instance{Role: "nodes", RoleARN: "arn:aws:iam::111122223333:role/a/b/nodes"}, "NodeAccessEntry nodes"},
		{inventory.Instance{Role: "win", RoleARN: "arn:aws:iam::111122223333:role/win"}, "NodeAccessEntry win"},
		{inventory.Instance{Role: "nodes", RoleARN: "arn:aws:iam::444455556666:role/nodes"}, ""},
		{inventory.Instance{Role: "admin", RoleARN: "arn:aws:iam::111122223333:role/admin"}, ""},
		{inventory.Instance{Role: "nodes"}, "NodeAccessEntry nodes"},
		{inventory.Instance{Role: "nodes", AccountID: "444455556666"}, ""},
	}
	for _, tt := range tests {
		got, err := roles.NodeRole(t.Context(), &tt.inst)
		if err != nil || got != tt.want {
			t.Errorf("NodeRole(%s %s %s) = %q, %v; want %q", tt.inst.RoleARN, tt.inst.Role, tt.inst.AccountID, got, err, tt.want)
		}
	}
}
