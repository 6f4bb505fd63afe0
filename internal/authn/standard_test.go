package authn_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

const (
	account    = "111122223333"
	adminARN   = "arn:aws:iam::111122223333:user/nodejoin-admin"
	adminKey   = "AKIAADMINEXAMPLE0001"
	adminGroup = "nodejoin:access-policy:AmazonEKSClusterAdminPolicy"
)

func standardEntry(name, arn string, groups []string, policies ...nodejoinv1alpha1.AccessPolicyAssociation) *nodejoinv1alpha1.NodeAccessEntry {
	return &nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nodejoinv1alpha1.NodeAccessEntrySpec{
		PrincipalARN: arn, Type: nodejoinv1alpha1.AccessEntryStandard, KubernetesGroups: groups, AccessPolicies: policies}}
}

var clusterAdmin = nodejoinv1alpha1.AccessPolicyAssociation{PolicyARN: nodejoinv1alpha1.AccessPolicyARNPrefix + "AmazonEKSClusterAdminPolicy",
	AccessScope: nodejoinv1alpha1.AccessScope{Type: nodejoinv1alpha1.AccessScopeCluster}}

// An IAM user's token, verified by STS, maps through its STANDARD entry to its ARN and
// the cluster-admin policy's group; the mapping is logged (principal, entry, policy,
// never the token) and counted. A user without an entry is denied.
func TestWebhookMapsAStandardUser(t *testing.T) {
	f := newSTSFixture(t)
	f.sts.Users = func(akid string) (protocol.Credential, bool) {
		if akid != adminKey {
			return protocol.Credential{}, false
		}
		return protocol.Credential{Secret: "admin-secret", Caller: protocol.Caller{ARN: adminARN, UserID: "AIDAADMINEXAMPLE", Account: account, AccessKey: adminKey}}, true
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	metrics := authn.NewMetrics(reg)
	entries := []*nodejoinv1alpha1.NodeAccessEntry{standardEntry("admin", adminARN, nil, clusterAdmin)}
	w := &authn.Webhook{Verifier: f.verifier(), Log: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: metrics,
		Mappings: func(context.Context) ([]authn.RoleMapping, error) { return authn.EntryMappings(entries, nil), nil }}
	token := f.mint(t, localaws.Credentials{AccessKeyID: adminKey, SecretAccessKey: "admin-secret"})
	u, err := w.Authenticate(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != adminARN || !slices.Equal(u.Groups, []string{adminGroup}) || u.Mapping != "NodeAccessEntry admin" || u.UID != "aws-iam-authenticator:"+account+":AIDAADMINEXAMPLE" {
		t.Errorf("mapped to %+v", u)
	}
	if n := testutil.ToFloat64(metrics.StandardMappings.WithLabelValues("AmazonEKSClusterAdminPolicy")); n != 1 {
		t.Errorf("standard mappings counted %v, want 1", n)
	}
	out := logs.String()
	if !strings.Contains(out, "access entry mapped") || !strings.Contains(out, adminARN) || !strings.Contains(out, "AmazonEKSClusterAdminPolicy") {
		t.Errorf("the mapping was not logged with principal and policy: %s", out)
	}
	if strings.Contains(out, strings.TrimPrefix(token, "k8s-aws-v1.")[:40]) {
		t.Error("the log holds the token")
	}

	entries = nil
	w2 := &authn.Webhook{Verifier: f.verifier(), Mappings: func(context.Context) ([]authn.RoleMapping, error) { return authn.EntryMappings(entries, nil), nil }}
	if _, err := w2.Authenticate(t.Context(), f.mint(t, localaws.Credentials{AccessKeyID: adminKey, SecretAccessKey: "admin-secret"})); !errors.Is(err, authn.ErrDenied) ||
		!strings.Contains(err.Error(), "user "+adminARN+" has no access entry") {
		t.Errorf("a user without an entry: %v", err)
	}
}

// Only a STANDARD entry maps a user or grants access-policy groups; every other path to
// them is refused with its reason (a RefusedError the webhook counts).
func TestOnlyStandardEntriesGrantPolicies(t *testing.T) {
	user := &authn.Caller{Account: account, ARN: adminARN, CanonicalARN: adminARN, Kind: authn.CallerUser, UserID: "AIDAEXAMPLE"}
	role := &authn.Caller{Account: account, ARN: "arn:aws:sts::111122223333:assumed-role/Ops/alice@example.com", CanonicalARN: "arn:aws:iam::111122223333:role/Ops",
		Kind: authn.CallerRole, Role: "Ops", SessionName: "alice@example.com", UserID: "AROAEXAMPLE"}
	viewDev := nodejoinv1alpha1.AccessPolicyAssociation{PolicyARN: nodejoinv1alpha1.AccessPolicyARNPrefix + "AmazonEKSViewPolicy",
		AccessScope: nodejoinv1alpha1.AccessScope{Type: nodejoinv1alpha1.AccessScopeNamespace, Namespaces: []string{"dev"}}}
	for _, tc := range []struct {
		name     string
		caller   *authn.Caller
		mappings []authn.RoleMapping
		username string
		groups   []string
		refused  string // the RefusedError's source, or "" for admitted
	}{
		{"a STANDARD user", user, authn.EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{standardEntry("a", adminARN, []string{"devs"}, clusterAdmin)}, nil),
			adminARN, []string{"devs", adminGroup}, ""},
		{"a STANDARD role, EKS's default username", role, authn.EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{standardEntry("o", "arn:aws:iam::111122223333:role/team/Ops", nil, viewDev)}, nil),
			"arn:aws:sts::111122223333:assumed-role/Ops/alice-example.com", []string{"nodejoin:access-policy:AmazonEKSViewPolicy:dev"}, ""},
		{"a user named by a role mapping", user, []authn.RoleMapping{{RoleARN: adminARN, Username: "admin", Groups: []string{"devs"}, Source: "aws-auth mapRoles[0]"}},
			"", nil, "aws-auth"},
		{"policy groups on a mapping that is not STANDARD", role, []authn.RoleMapping{{RoleARN: role.CanonicalARN, Username: "ops", Source: "NodeAccessEntry x", PolicyGroups: []string{adminGroup}}},
			"ops", nil, ""},
		{"an access-policy group in an aws-auth mapping", role, []authn.RoleMapping{{RoleARN: role.CanonicalARN, Username: "ops", Groups: []string{adminGroup}, Source: "aws-auth mapRoles[0]"}},
			"", nil, "aws-auth"},
		{"system:masters in a STANDARD mapping built by hand", role, []authn.RoleMapping{{RoleARN: role.CanonicalARN, Username: "ops", Groups: []string{"system:masters"}, Source: "NodeAccessEntry x", Standard: true}},
			"", nil, "access-entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := authn.Map(t.Context(), tc.caller, tc.mappings, nil)
			if tc.refused != "" {
				var r authn.RefusedError
				if !errors.Is(err, authn.ErrDenied) || !errors.As(err, &r) || r.Source != tc.refused {
					t.Fatalf("Map = %+v, %v; want refused (%s)", u, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Username != tc.username || !slices.Equal(u.Groups, tc.groups) {
				t.Errorf("mapped to %s %v, want %s %v", u.Username, u.Groups, tc.username, tc.groups)
			}
		})
	}
}

// A token signed for AWS's public STS host (as `aws eks get-token` signs it, whatever
// endpoint it was told) is verified by the cluster's own STS (Endpoint), its host kept
// as the signed Host header; a host outside STSHosts is refused before any call.
func TestVerifierEndpointKeepsTheSignedHost(t *testing.T) {
	f := newSTSFixture(t)
	creds := f.credentials(t, "i-0aaaaaaaaaaaaaaaa")
	cfg := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.Token)}
	token, _, err := identity.Mint(t.Context(), cfg, "demo")
	if err != nil {
		t.Fatal(err)
	}
	v := f.verifier()
	v.STSHosts, v.Endpoint = []string{"sts.us-west-2.amazonaws.com"}, f.srv.URL
	c, err := v.Verify(t.Context(), token)
	if err != nil || c.Role != "nodes" || c.Kind != authn.CallerRole {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	calls := f.sts.Calls()
	v.STSHosts = []string{"sts.eu-west-1.amazonaws.com"}
	if _, err := v.Verify(t.Context(), token); !errors.Is(err, authn.ErrDenied) || !strings.Contains(err.Error(), "unexpected hostname") || f.sts.Calls() != calls {
		t.Errorf("a host outside STSHosts: %v (STS calls %d → %d)", err, calls, f.sts.Calls())
	}
}
