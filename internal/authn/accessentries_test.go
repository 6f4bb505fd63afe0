package authn

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

type instanceMap map[string]*inventory.Instance

func (m instanceMap) Instance(_ context.Context, id string) (*inventory.Instance, error) {
	if i, ok := m[id]; ok {
		return i, nil
	}
	return nil, inventory.ErrNotFound
}

func entry(name, arn string) *nodejoinv1alpha1.NodeAccessEntry {
	return &nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodejoinv1alpha1.NodeAccessEntrySpec{PrincipalARN: arn}}
}

func caller(role, session string) *Caller {
	return &Caller{
		Account: "111122223333", Role: role, SessionName: session, UserID: "AROAEXAMPLE",
		ARN:          "arn:aws:sts::111122223333:assumed-role/" + role + "/" + session,
		CanonicalARN: "arn:aws:iam::111122223333:role/" + role,
	}
}

// A token of a role with a NodeAccessEntry maps to the node its running instance is;
// the entry wins over aws-auth; an invalid entry admits nobody but locks nobody else out.
func TestAccessEntryMapping(t *testing.T) {
	var invalid []string
	entries := EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{
		entry("workers", "arn:aws:iam::111122223333:role/eks/workers"),
		entry("broken", "arn:aws:iam::111122223333:user/alice"),
	}, func(name string, _ error) { invalid = append(invalid, name) })
	if !slices.Equal(invalid, []string{"broken"}) {
		t.Errorf("invalid entries reported: %v", invalid)
	}
	awsAuth := AWSAuth{Get: func(context.Context) (*corev1.ConfigMap, error) {
		return &corev1.ConfigMap{Data: map[string]string{"mapRoles": `
- rolearn: arn:aws:iam::111122223333:role/workers
  username: admin-{{SessionName}}
  groups: [system:authenticated]
- rolearn: arn:aws:iam::111122223333:role/legacy
  username: system:node:{{EC2PrivateDNSName}}
  groups: [system:bootstrappers, system:nodes]
`}}, nil
	}}.Mappings
	mappings, err := Combine(func(context.Context) ([]RoleMapping, error) { return entries, nil }, awsAuth)(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	instances := instanceMap{
		"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", AccountID: "111122223333", Role: "workers", PrivateDNSName: "ip-198-18-0-11.local.internal"},
		"i-0bbbbbbbbbbbbbbbb": {ID: "i-0bbbbbbbbbbbbbbbb", State: "running", AccountID: "111122223333", Role: "legacy", PrivateDNSName: "ip-198-18-0-12.local.internal"},
	}
	u, err := Map(t.Context(), caller("workers", "i-0aaaaaaaaaaaaaaaa"), mappings, instances)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "system:node:ip-198-18-0-11.local.internal" || !slices.Equal(u.Groups, []string{"system:bootstrappers", "system:nodes"}) || u.Mapping != "NodeAccessEntry workers" {
		t.Errorf("workers token mapped to %+v; want the node, through the access entry rather than aws-auth", u)
	}
	u, err = Map(t.Context(), caller("legacy", "i-0bbbbbbbbbbbbbbbb"), mappings, instances)
	if err != nil || u.Username != "system:node:ip-198-18-0-12.local.internal" || u.Mapping != "aws-auth mapRoles[1]" {
		t.Errorf("legacy token: %+v, %v; want the node through aws-auth", u, err)
	}
	// The access entry admits the role's own instances only.
	_, err = Map(t.Context(), caller("workers", "i-0bbbbbbbbbbbbbbbb"), mappings, instances)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), `instance i-0bbbbbbbbbbbbbbbb has role "legacy", not the token's role "workers"`) {
		t.Errorf("session naming another role's instance: %v", err)
	}
	_, err = Map(t.Context(), caller("alice", "i-0aaaaaaaaaaaaaaaa"), mappings, instances)
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "has no access entry or aws-auth mapping") {
		t.Errorf("unmapped role: %v", err)
	}
}

// An EC2_WINDOWS entry also grants eks:kube-proxy-windows, as EKS does: kube-proxy on
// Windows runs with the node's credentials (issue 14's second defect).
func TestWindowsAccessEntryGrantsKubeProxyWindows(t *testing.T) {
	win := entry("windows", "arn:aws:iam::111122223333:role/win-nodes")
	win.Spec.Type = nodejoinv1alpha1.AccessEntryEC2Windows
	linux := entry("linux", "arn:aws:iam::111122223333:role/linux-nodes")
	linux.Spec.Type = nodejoinv1alpha1.AccessEntryEC2Linux
	mappings := EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{win, linux}, nil)
	instances := instanceMap{
		"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", AccountID: "111122223333", Role: "win-nodes", PrivateDNSName: "ip-198-18-0-21.local.internal"},
		"i-0bbbbbbbbbbbbbbbb": {ID: "i-0bbbbbbbbbbbbbbbb", State: "running", AccountID: "111122223333", Role: "linux-nodes", PrivateDNSName: "ip-198-18-0-22.local.internal"},
	}
	for _, tt := range []struct {
		role, instance string
		want           []string
	}{
		{"win-nodes", "i-0aaaaaaaaaaaaaaaa", []string{"system:bootstrappers", "system:nodes", "eks:kube-proxy-windows"}},
		{"linux-nodes", "i-0bbbbbbbbbbbbbbbb", []string{"system:bootstrappers", "system:nodes"}},
	} {
		u, err := Map(t.Context(), caller(tt.role, tt.instance), mappings, instances)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(u.Groups, tt.want) {
			t.Errorf("%s maps to groups %v, want %v", tt.role, u.Groups, tt.want)
		}
	}
	// The shared slice is never handed out: a caller appending to one mapping's groups
	// cannot change another's.
	if g := nodejoinv1alpha1.GroupsFor(nodejoinv1alpha1.AccessEntryEC2Linux); len(g) != 2 {
		t.Errorf("GroupsFor(EC2_LINUX) = %v", g)
	}
}

func TestCombineReportsSourceErrors(t *testing.T) {
	failing := func(context.Context) ([]RoleMapping, error) { return nil, errors.New("boom") }
	if _, err := Combine(failing, nil)(t.Context()); err == nil || !strings.Contains(err.Error(), "reading NodeAccessEntries: boom") {
		t.Errorf("entries failing: %v", err)
	}
	if _, err := Combine(nil, failing)(t.Context()); err == nil || !strings.Contains(err.Error(), "reading aws-auth: boom") {
		t.Errorf("aws-auth failing: %v", err)
	}
}

// A malformed aws-auth is reported and skipped: the nodes access entries admit still
// get in. Mappings granting system: groups other than the node groups, templated groups,
// or groups bound to cluster-admin are refused with the reason.
func TestAWSAuthNeverBlocksAccessEntries(t *testing.T) {
	entries := func(context.Context) ([]RoleMapping, error) {
		return EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{entry("workers", "arn:aws:iam::111122223333:role/workers")}, nil), nil
	}
	instances := instanceMap{
		"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", AccountID: "111122223333", Role: "workers", PrivateDNSName: "ip-198-18-0-11.local.internal"},
		"i-0bbbbbbbbbbbbbbbb": {ID: "i-0bbbbbbbbbbbbbbbb", State: "running", AccountID: "111122223333", Role: "legacy", PrivateDNSName: "ip-198-18-0-12.local.internal"},
	}
	admin := func(context.Context) (map[string]string, error) {
		return map[string]string{"ops-admins": "ops-are-admins"}, nil
	}
	for _, tc := range []struct {
		name, mapRoles string
		// reported is what Invalid is told; legacy the denial of the legacy role ("" admitted).
		reported, legacy string
	}{
		{"malformed YAML", "- rolearn: [unclosed", "mapRoles does not parse", "role arn:aws:iam::111122223333:role/legacy has no access entry or aws-auth mapping"},
		{"an unknown field", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  usernme: x\n", "mapRoles does not parse", "has no access entry or aws-auth mapping"},
		{"an entry without a username", "- rolearn: arn:aws:iam::111122223333:role/other\n- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes]\n",
			"mapRoles[0]: rolearn and username are required; entry skipped", ""},
		{"system:masters", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes, system:masters]\n",
			"aws-auth mapRoles[0] grants group system:masters, a system: group other than system:bootstrappers and system:nodes",
			"the mapping of role arn:aws:iam::111122223333:role/legacy is refused: aws-auth mapRoles[0] grants group system:masters, a system: group other than system:bootstrappers and system:nodes"},
		{"system:authenticated", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:authenticated]\n",
			"grants group system:authenticated, a system: group other than", "is refused: aws-auth mapRoles[0] grants group system:authenticated"},
		{"system:node-proxier", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:node-proxier]\n",
			"grants group system:node-proxier, a system: group other than", "is refused: aws-auth mapRoles[0] grants group system:node-proxier"},
		{"a group bound to cluster-admin", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes, ops-admins]\n",
			"grants group ops-admins, which is bound to cluster-admin by ClusterRoleBinding ops-are-admins", "is refused: aws-auth mapRoles[0] grants group ops-admins, which is bound to cluster-admin"},
		{"a templated group", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: ['{{SessionName}}']\n",
			"grants group {{SessionName}}, a template: aws-auth groups must be literal", "is refused"},
		{"an access-policy group", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [nodejoin:access-policy:AmazonEKSClusterAdminPolicy]\n",
			"grants group nodejoin:access-policy:AmazonEKSClusterAdminPolicy, which is reserved for the access policies of STANDARD access entries", "is refused"},
		{"an IAM user", "- rolearn: arn:aws:iam::111122223333:user/legacy\n  username: legacy\n  groups: [devs]\n",
			"names an IAM user: mapRoles maps roles", "has no access entry or aws-auth mapping"},
		{"the node groups", "- rolearn: arn:aws:iam::111122223333:role/legacy\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []string
			awsAuth := AWSAuth{
				Get: func(context.Context) (*corev1.ConfigMap, error) {
					return &corev1.ConfigMap{Data: map[string]string{"mapRoles": tc.mapRoles}}, nil
				},
				AdminGroups: admin,
				Invalid: func(err error) {
					if !errors.Is(err, ErrAWSAuthInvalid) {
						t.Errorf("reported %v, not an ErrAWSAuthInvalid", err)
					}
					reported = append(reported, err.Error())
				},
			}.Mappings
			mappings, err := Combine(entries, awsAuth)(t.Context())
			if err != nil {
				t.Fatalf("Combine = %v; a bad aws-auth must not be an error", err)
			}
			if tc.reported == "" && len(reported) > 0 || tc.reported != "" && (len(reported) != 1 || !strings.Contains(reported[0], tc.reported)) {
				t.Errorf("reported %q, want %q", reported, tc.reported)
			}
			if u, err := Map(t.Context(), caller("workers", "i-0aaaaaaaaaaaaaaaa"), mappings, instances); err != nil || u.Mapping != "NodeAccessEntry workers" {
				t.Errorf("the access entry's node: %+v, %v; want admitted", u, err)
			}
			u, err := Map(t.Context(), caller("legacy", "i-0bbbbbbbbbbbbbbbb"), mappings, instances)
			switch {
			case tc.legacy == "" && err != nil:
				t.Errorf("legacy: %v, want admitted", err)
			case tc.legacy != "" && (!errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tc.legacy)):
				t.Errorf("legacy: %+v, %v; want the denial %q", u, err, tc.legacy)
			}
		})
	}
}
