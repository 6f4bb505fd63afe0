package authn_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/authn"
)

// The instance a session names must carry the token's role in the token's account: the
// full role ARN is compared (partition, account, name; the instance profile role's path
// is not in an assumed-role ARN, and a role name is unique in its account whatever its
// path), so a same-named role in another account is refused.
func TestMapComparesTheFullRoleARN(t *testing.T) {
	caller := &authn.Caller{
		Account: "111122223333", ARN: "arn:aws:sts::111122223333:assumed-role/nodes/i-0aaaaaaaaaaaaaaaa",
		CanonicalARN: "arn:aws:iam::111122223333:role/nodes", Role: "nodes", UserID: "AROAEXAMPLE", SessionName: "i-0aaaaaaaaaaaaaaaa",
	}
	mappings, _ := staticMappings(t.Context())
	inst := func(account, roleARN string) instances {
		return instances{"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", PrivateDNSName: "ip-198-18-0-11.us-west-2.compute.internal",
			Role: "nodes", AccountID: account, RoleARN: roleARN}}
	}
	for _, tc := range []struct {
		name      string
		instances instances
		want      string // "" for accepted
	}{
		{"the same role", inst("111122223333", "arn:aws:iam::111122223333:role/nodes"), ""},
		{"the same role under a path", inst("111122223333", "arn:aws:iam::111122223333:role/eks/workers/nodes"), ""},
		{"only the account known", inst("111122223333", ""), ""},
		{"an instance and a same-named role in another account", inst("444455556666", "arn:aws:iam::444455556666:role/nodes"),
			"instance i-0aaaaaaaaaaaaaaaa belongs to account 444455556666, not the token's account 111122223333"},
		{"a same-named role in another account", inst("", "arn:aws:iam::444455556666:role/nodes"),
			"instance i-0aaaaaaaaaaaaaaaa has role arn:aws:iam::444455556666:role/nodes, not the token's role arn:aws:iam::111122223333:role/nodes"},
		{"another account's instance, role ARN unknown", inst("444455556666", ""),
			"instance i-0aaaaaaaaaaaaaaaa belongs to account 444455556666, not the token's account 111122223333"},
		{"another partition", inst("111122223333", "arn:aws-cn:iam::111122223333:role/nodes"),
			"instance i-0aaaaaaaaaaaaaaaa has role arn:aws-cn:iam::111122223333:role/nodes, not the token's role arn:aws:iam::111122223333:role/nodes"},
		{"a role whose name ends like the token's", inst("111122223333", "arn:aws:iam::111122223333:role/my-nodes"),
			"instance i-0aaaaaaaaaaaaaaaa has role arn:aws:iam::111122223333:role/my-nodes, not the token's role arn:aws:iam::111122223333:role/nodes"},
		{"a malformed role ARN", inst("111122223333", "arn:aws:iam::111122223333:user/nodes"),
			"instance i-0aaaaaaaaaaaaaaaa has role arn:aws:iam::111122223333:user/nodes, not the token's role arn:aws:iam::111122223333:role/nodes"},
		{"account and role ARN unknown", inst("", ""),
			"the inventory says neither the account nor the role ARN of instance i-0aaaaaaaaaaaaaaaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := authn.Map(t.Context(), caller, mappings, tc.instances)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Map = %v, want accepted", err)
			case tc.want == "" && u.Username != "system:node:ip-198-18-0-11.us-west-2.compute.internal":
				t.Fatalf("user = %+v", u)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Map = %v, %v; want the denial %q", u, err, tc.want)
			}
		})
	}
}

// A mapping pinned to its role's unique ID refuses a caller whose role has another (the
// role was deleted and re-created under the same ARN); an unpinned mapping pins the ID
// IAM gives now; when IAM cannot be asked the review fails retryably, never a denial.
func TestMapChecksThePinnedRoleID(t *testing.T) {
	caller := &authn.Caller{
		Account: "111122223333", ARN: "arn:aws:sts::111122223333:assumed-role/nodes/i-0aaaaaaaaaaaaaaaa",
		CanonicalARN: "arn:aws:iam::111122223333:role/nodes", Role: "nodes", UserID: "AROANEWROLE00000000", SessionName: "i-0aaaaaaaaaaaaaaaa",
	}
	base, _ := staticMappings(t.Context())
	for _, tc := range []struct {
		name   string
		roleID string
		pin    func(context.Context) (string, error)
		want   string // "" accepted; else in the error
		denial bool
	}{
		{name: "pinned, same ID", roleID: "AROANEWROLE00000000"},
		{name: "pinned, re-created role", roleID: "AROAOLDROLE00000000", denial: true,
			want: "role arn:aws:iam::111122223333:role/nodes has unique ID AROANEWROLE00000000, not AROAOLDROLE00000000, which test pinned: the role was deleted and re-created; re-create the entry to admit the new role"},
		{name: "pinned now", pin: func(context.Context) (string, error) { return "AROANEWROLE00000000", nil }},
		{name: "pinned now, another ID", pin: func(context.Context) (string, error) { return "AROAOTHER0000000000", nil }, denial: true, want: "not AROAOTHER0000000000"},
		{name: "IAM unavailable", pin: func(context.Context) (string, error) { return "", errors.New("getting role nodes: timeout") }, want: "the role's unique ID is unknown: pinning role"},
		{name: "no pinning"},
	} {
		m := base[0]
		m.RoleID, m.Pin = tc.roleID, tc.pin
		u, err := authn.Map(t.Context(), caller, []authn.RoleMapping{m}, nodeInstances())
		switch {
		case tc.want == "" && (err != nil || u.Username != "system:node:ip-198-18-0-11.us-west-2.compute.internal"):
			t.Errorf("%s: %v, %v; want accepted", tc.name, u, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, authn.ErrDenied) != tc.denial):
			t.Errorf("%s: %v; want %q (denial %v)", tc.name, err, tc.want, tc.denial)
		}
	}
}
