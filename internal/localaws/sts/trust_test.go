package sts

import (
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

func TestTrustAllows(t *testing.T) {
	const acct = "111122223333"
	admin := protocol.Caller{ARN: "arn:aws:iam::111122223333:user/nodejoin-admin", Account: acct}
	session := protocol.Caller{ARN: "arn:aws:sts::111122223333:assumed-role/nodes/i-1", Account: acct, Role: "nodes"}
	other := protocol.Caller{ARN: "arn:aws:iam::999999999999:user/x", Account: "999999999999"}
	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	for _, tc := range []struct {
		name   string
		policy string
		caller protocol.Caller
		want   bool
	}{
		{"account root admits a user", defaultTrustPolicy(acct), admin, true},
		{"account root does not admit a session", defaultTrustPolicy(acct), session, false},
		{"account root does not admit another account", defaultTrustPolicy(acct), other, false},
		{"account ID", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:AssumeRole"}`), admin, true},
		{"exact user ARN in a list", stmt(`{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:root","arn:aws:iam::111122223333:user/nodejoin-admin"]},"Action":["sts:TagSession","sts:AssumeRole"]}`), admin, true},
		{"another user's ARN", stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:user/bob"},"Action":"sts:AssumeRole"}`), admin, false},
		{"role ARN admits its sessions", stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:role/nodes"},"Action":"sts:AssumeRole"}`), session, true},
		{"session ARN", stmt(`{"Effect":"Allow","Principal":{"AWS":"arn:aws:sts::111122223333:assumed-role/nodes/i-1"},"Action":"sts:AssumeRole"}`), session, true},
		{"wildcard action", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:*"}`), admin, true},
		{"action names ignore case", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"STS:assumerole"}`), admin, true},
		{"another action", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:AssumeRoleWithWebIdentity"}`), admin, false},
		{"service principal only", stmt(`{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}`), admin, false},
		{"principal star", stmt(`{"Effect":"Allow","Principal":"*","Action":"sts:AssumeRole"}`), other, true},
		{"explicit deny wins", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:AssumeRole"},{"Effect":"Deny","Principal":{"AWS":"*"},"Action":"sts:*"}`), admin, false},
		{"condition never allows", stmt(`{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:AssumeRole","Condition":{"StringEquals":{"sts:ExternalId":"x"}}}`), admin, false},
		{"single statement object", `{"Statement":{"Effect":"Allow","Principal":{"AWS":"111122223333"},"Action":"sts:AssumeRole"}}`, admin, true},
		{"no statement", `{"Version":"2012-10-17"}`, admin, false},
		{"not JSON", `Allow everyone`, admin, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TrustAllows(tc.policy, tc.caller, acct); got != tc.want {
				t.Errorf("TrustAllows = %t, want %t", got, tc.want)
			}
		})
	}
}

// defaultTrustPolicy is IAM's default trust policy (iam.DefaultTrustPolicy),
// which sts does not import.
func defaultTrustPolicy(account string) string {
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"},` +
		`{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + account + `:root"},"Action":"sts:AssumeRole"}]}`
}
