package authn_test

import (
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
