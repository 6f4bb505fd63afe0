package authn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/internal/authn"
)

// awsAuthOf is an aws-auth source holding one mapRoles entry for role nodes, with the
// user lead bound to cluster-admin by ClusterRoleBinding lead-is-admin; reports collects
// what it reports.
func awsAuthOf(username, groups string, reports *[]string) authn.AWSAuth {
	mapRoles := "- rolearn: arn:aws:iam::111122223333:role/nodes\n  username: \"" + username + "\"\n  groups: " + groups + "\n"
	return authn.AWSAuth{
		Get: func(context.Context) (*corev1.ConfigMap, error) {
			return &corev1.ConfigMap{Data: map[string]string{"mapRoles": mapRoles}}, nil
		},
		AdminGroups: func(context.Context) (map[string]string, error) { return map[string]string{}, nil },
		AdminUsers: func(context.Context) (map[string]string, error) {
			return map[string]string{"lead": "lead-is-admin"}, nil
		},
		Invalid: func(err error) { *reports = append(*reports, err.Error()) },
	}
}

// aws-auth usernames: a mapping may give a system: username only as
// system:node:{{EC2PrivateDNSName}} (or {{PrivateDNSName}}), and that only with the
// node groups; no other system: name, and no administrator's username (well-known, or
// bound to cluster-admin), whether written in the entry or made by a template from the
// session name the caller chose. Each refusal names the entry, the username and why, is
// reported, and denies the role as a refused mapping (logged and counted by the webhook).
func TestAWSAuthUsernames(t *testing.T) {
	const dns = "ip-198-18-0-11.us-west-2.compute.internal"
	for _, tc := range []struct {
		name, username, groups string
		session                string // the caller's session name; default the instance's ID
		want                   string // "" accepted (then user is the username); else in the denial
		user                   string
		reported               bool
	}{
		{name: "the node username", username: "system:node:{{EC2PrivateDNSName}}", groups: "[system:bootstrappers, system:nodes]", user: "system:node:" + dns},
		{name: "the node username, PrivateDNSName", username: "system:node:{{PrivateDNSName}}", groups: "[system:bootstrappers, system:nodes]", user: "system:node:" + dns},
		{name: "a Windows node", username: "system:node:{{EC2PrivateDNSName}}", groups: "[system:bootstrappers, system:nodes, eks:kube-proxy-windows]", user: "system:node:" + dns},
		{name: "the node username with another group", username: "system:node:{{EC2PrivateDNSName}}", groups: "[system:nodes, developers]", reported: true,
			want: "aws-auth mapRoles[0] maps to username system:node:{{EC2PrivateDNSName}}, a node's username, which may be given only with the groups system:bootstrappers and system:nodes (and eks:kube-proxy-windows), not with group developers"},
		{name: "kube-controller-manager", username: "system:kube-controller-manager", groups: "[]", reported: true,
			want: "the mapping of role arn:aws:iam::111122223333:role/nodes is refused: aws-auth mapRoles[0] maps to username system:kube-controller-manager, a system: username other than system:node:{{EC2PrivateDNSName}}"},
		{name: "a node named by the session", username: "system:node:{{SessionName}}", groups: "[system:bootstrappers, system:nodes]", reported: true,
			want: "aws-auth mapRoles[0] maps to username system:node:{{SessionName}}, a node's username that is not system:node:{{EC2PrivateDNSName}}"},
		{name: "a fixed node name", username: "system:node:fixed-name", groups: "[system:nodes]", reported: true,
			want: "aws-auth mapRoles[0] maps to username system:node:fixed-name, a node's username that is not system:node:{{EC2PrivateDNSName}}"},
		{name: "kubeadm's admin", username: "kubernetes-admin", groups: "[]", reported: true,
			want: "aws-auth mapRoles[0] maps to username kubernetes-admin, the username of kubeadm's admin.conf and of the EKS cluster creator, an administrator"},
		{name: "a user bound to cluster-admin", username: "lead", groups: "[]", reported: true,
			want: "aws-auth mapRoles[0] maps to username lead, which is bound to cluster-admin by ClusterRoleBinding lead-is-admin"},
		{name: "a person", username: "alice", groups: "[developers]", session: "alice", user: "alice"},
		{name: "aws-iam-authenticator's instance example", username: "aws:{{AccountID}}:instance:{{SessionName}}", groups: "[system:bootstrappers]",
			user: "aws:111122223333:instance:i-0aaaaaaaaaaaaaaaa"},
		{name: "a session named after the admin", username: "{{SessionName}}", groups: "[developers]", session: "kubernetes-admin",
			want: "aws-auth mapRoles[0] maps arn:aws:iam::111122223333:role/nodes to username kubernetes-admin, the username of kubeadm's admin.conf"},
		{name: "a session named after a user bound to cluster-admin", username: "{{SessionName}}", groups: "[developers]", session: "lead",
			want: "aws-auth mapRoles[0] maps arn:aws:iam::111122223333:role/nodes to username lead, which is bound to cluster-admin by ClusterRoleBinding lead-is-admin"},
		{name: "a session making a system: name", username: "{{SessionName}}:kube-scheduler", groups: "[]", session: "system",
			want: "aws-auth mapRoles[0] maps arn:aws:iam::111122223333:role/nodes to username system:kube-scheduler, a system: username that only system:node:{{EC2PrivateDNSName}} may give"},
		{name: "an ordinary session", username: "{{SessionName}}", groups: "[developers]", session: "bob", user: "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reports []string
			maps, err := awsAuthOf(tc.username, tc.groups, &reports).Mappings(t.Context())
			if err != nil || len(maps) != 1 {
				t.Fatalf("Mappings = %+v, %v", maps, err)
			}
			if got := len(reports) == 1 && strings.Contains(reports[0], maps[0].Refused); got != tc.reported || tc.reported != (maps[0].Refused != "") {
				t.Errorf("reports %q, Refused %q; want reported %v", reports, maps[0].Refused, tc.reported)
			}
			session := tc.session
			if session == "" {
				session = "i-0aaaaaaaaaaaaaaaa"
			}
			caller := &authn.Caller{
				Account: "111122223333", ARN: "arn:aws:sts::111122223333:assumed-role/nodes/" + session, Kind: authn.CallerRole,
				CanonicalARN: "arn:aws:iam::111122223333:role/nodes", Role: "nodes", UserID: "AROAEXAMPLE", SessionName: session,
			}
			u, err := authn.Map(t.Context(), caller, maps, nodeInstances())
			var refused authn.RefusedError
			switch {
			case tc.want == "" && (err != nil || u.Username != tc.user):
				t.Errorf("Map = %+v, %v; want user %s", u, err, tc.user)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, authn.ErrDenied) ||
				!errors.As(err, &refused) || refused.Source != "aws-auth"):
				t.Errorf("Map = %+v, %v; want the aws-auth refusal %q", u, err, tc.want)
			}
		})
	}
}
