package authn

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzAWSAuthMappings: any mapRoles yields no error (a malformed one is reported, never
// blocking), and every mapping it yields has a role ARN, a username and a source, and
// grants no refused group and gives no refused username (a system: name but a node's,
// an administrator's) unless it is marked Refused with a reason.
func FuzzAWSAuthMappings(f *testing.F) {
	f.Add("- rolearn: arn:aws:iam::111122223333:role/nodes\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:nodes]\n")
	f.Add("- rolearn: arn:aws:iam::111122223333:role/x\n  username: u\n  groups: [system:masters, ops]\n")
	f.Add("- rolearn: arn:aws:iam::111122223333:role/x\n  username: system:node:{{SessionName}}\n  groups: [system:nodes]\n")
	f.Add("- rolearn: arn:aws:iam::111122223333:role/x\n  username: kubernetes-admin\n- rolearn: arn:aws:iam::111122223333:role/y\n  username: lead\n")
	f.Add("- rolearn: [")
	f.Add("")
	f.Fuzz(func(t *testing.T, mapRoles string) {
		reports := 0
		a := AWSAuth{
			Get: func(context.Context) (*corev1.ConfigMap, error) {
				return &corev1.ConfigMap{Data: map[string]string{"mapRoles": mapRoles}}, nil
			},
			AdminGroups: func(context.Context) (map[string]string, error) { return map[string]string{"ops": "ops-admin"}, nil },
			AdminUsers:  func(context.Context) (map[string]string, error) { return map[string]string{"lead": "lead-admin"}, nil },
			Invalid: func(err error) {
				if !errors.Is(err, ErrAWSAuthInvalid) || err.Error() == "" {
					t.Errorf("report %v", err)
				}
				reports++
			},
		}
		maps, err := a.Mappings(context.Background())
		if err != nil {
			t.Fatalf("Mappings = %v", err)
		}
		refused := 0
		for _, m := range maps {
			if m.RoleARN == "" || m.Username == "" || !strings.HasPrefix(m.Source, "aws-auth mapRoles[") {
				t.Fatalf("mapping %+v", m)
			}
			if m.Refused != "" {
				refused++
				continue
			}
			for _, g := range m.Groups {
				if refusedGroup(g, map[string]string{"ops": "ops-admin"}) != "" {
					t.Fatalf("mapping %+v grants %q unrefused", m, g)
				}
			}
			if m.AdminUsers["lead"] != "lead-admin" || refusedUsername(m.Username, m.Groups, m.AdminUsers) != "" ||
				strings.HasPrefix(m.Username, "system:") && !slices.Contains(nodeUsernames, m.Username) {
				t.Fatalf("mapping %+v gives username %q unrefused", m, m.Username)
			}
		}
		if reports < refused {
			t.Fatalf("%d refused mappings, %d reports", refused, reports)
		}
	})
}
