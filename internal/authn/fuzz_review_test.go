package authn_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/inventory"
)

// stsAnswer is a transport that answers every request with status and body.
type stsAnswer struct {
	status int
	body   []byte
}

func (a stsAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Body: io.NopCloser(bytes.NewReader(a.body)), Header: http.Header{}, Request: r}, nil
}

// FuzzTokenReviewDecoding: a request body the webhook accepts re-encodes to a review
// that decodes to the same review (semantically: an empty list and no list are one, as
// the API's omitempty encoding makes them); and every answer of the webhook (STS refusing all
// tokens) is a TokenReview that authenticates nobody, a denial always carrying its
// reason in status.error.
func FuzzTokenReviewDecoding(f *testing.F) {
	host := "sts.us-west-2.amazonaws.com"
	for _, seed := range []string{
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + forged(host, "ASIAFUZZ000000000001", 1) + `","audiences":["https://kubernetes.default.svc"]}}`,
		`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{"creationTimestamp":null},"spec":{"token":"k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8"},"status":{"user":{}}}`,
		`{"spec":{"token":"abcdef.0123456789abcdef"}}`,
		`{"apiVersion":"authentication.k8s.io/v1beta1","kind":"TokenReview","spec":{"token":"x"}}`,
		`{"spec":{}}`, `[]`, `{"spec":{"token":"k8s-aws-v1.` + strings.Repeat("A", 5000) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	w := &authn.Webhook{
		Verifier: &authn.Verifier{ClusterID: "demo", STSHosts: []string{host}, HTTP: &http.Client{Transport: stsAnswer{403,
			[]byte(`<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>`)}}},
		Mappings: staticMappings, Instances: nodeInstances(), Limiter: rate.NewLimiter(rate.Inf, 1),
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		review, err := authn.DecodeReview(bytes.NewReader(body))
		if err == nil {
			again, err := json.Marshal(review)
			if err != nil {
				t.Fatalf("re-encoding %+v: %v", review, err)
			}
			back, err := authn.DecodeReview(bytes.NewReader(again))
			if err != nil || !equality.Semantic.DeepEqual(review, back) {
				t.Fatalf("decode(encode(review)) = %+v, %v; want %+v", back, err, review)
			}
			if review.Spec.Token == "" {
				t.Fatal("accepted a review without a token")
			}
		}
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/authenticate", bytes.NewReader(body)))
		if err != nil {
			if rec.Code != http.StatusBadRequest || rec.Body.Len() == 0 {
				t.Fatalf("undecodable review answered %d %q, want 400 with the reason", rec.Code, rec.Body.String())
			}
			return
		}
		var out authenticationv1.TokenReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer %d %q is not a TokenReview: %v", rec.Code, rec.Body.String(), err)
		}
		if out.Status.Authenticated {
			t.Fatalf("authenticated %+v though STS refuses every token", out.Status.User)
		}
		if out.Status.Error == "" {
			t.Fatalf("denial (HTTP %d) without a reason", rec.Code)
		}
		if len(review.Spec.Token) >= 32 && strings.Contains(rec.Body.String(), review.Spec.Token) {
			t.Fatal("the answer quotes the token")
		}
	})
}

// FuzzSTSAnswer: whatever STS answers, a caller is accepted only from HTTP 200, and its
// ARN re-renders from the parts parsed out of it (partition, account, role, session;
// for an IAM user, partition, account and name);
// every error is a denial, throttling, a retryable failure or an unreadable answer, and
// never carries the presigned URL's signature, session token, access key or parameter
// names, even when STS echoes them.
func FuzzSTSAnswer(f *testing.F) {
	const host = "sts.us-west-2.amazonaws.com"
	const accessKey = "ASIAFUZZSTS000000001"
	token := forged(host, accessKey, 0xbeef)
	signature := fmt.Sprintf("%064x", 0xbeef)
	session := fmt.Sprintf("%s%d", sessionTokenMark, 0xbeef)
	secrets := []string{signature, session, accessKey, "X-Amz-Signature", "X-Amz-Security-Token", "X-Amz-Credential"}
	ok := `{"GetCallerIdentityResponse":{"GetCallerIdentityResult":{"Arn":"arn:aws:sts::111122223333:assumed-role/nodes/i-0aaaaaaaaaaaaaaaa","UserId":"AROAEXAMPLEROLEID0001:i-0aaaaaaaaaaaaaaaa","Account":"111122223333"}}}`
	xmlOK := `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws-cn:sts::111122223333:assumed-role/path/nodes/i-0aaaaaaaaaaaaaaaa</Arn><UserId>AROAEXAMPLE:i-0aaaaaaaaaaaaaaaa</UserId><Account>111122223333</Account></GetCallerIdentityResult></GetCallerIdentityResponse>`
	for _, seed := range []struct {
		status uint16
		body   string
	}{
		{200, ok}, {200, xmlOK},
		{200, strings.Replace(ok, `"Account":"111122223333"`, `"Account":"444455556666"`, 1)},
		{200, strings.Replace(ok, "assumed-role/nodes/", "assumed-role/"+signature+"/", 1)},
		{200, `{"GetCallerIdentityResponse":{"GetCallerIdentityResult":{"Arn":"arn:aws:iam::111122223333:user/` + session + `","UserId":"AIDA","Account":"111122223333"}}}`},
		{403, `<ErrorResponse><Error><Type>Sender</Type><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error></ErrorResponse>`},
		{403, `<ErrorResponse><Error><Code>` + signature + `</Code></Error></ErrorResponse>`},
		{403, `<ErrorResponse><Error><Code>` + session + `X</Code></Error></ErrorResponse>`},
		{400, `<ErrorResponse><Error><Code>InvalidClientTokenId</Code><Message>https://` + host + `/?X-Amz-Signature=` + signature + `</Message></Error></ErrorResponse>`},
		{400, `<ErrorResponse><Error><Code>Throttling</Code></Error></ErrorResponse>`},
		{503, `<ErrorResponse><Error><Code>ServiceUnavailable</Code></Error></ErrorResponse>`},
		{200, `not xml`}, {500, ``},
	} {
		f.Add(seed.status, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		code := 100 + int(status)%500
		v := &authn.Verifier{ClusterID: "demo", STSHosts: []string{host}, HTTP: &http.Client{Transport: stsAnswer{code, body}}}
		caller, err := v.Verify(t.Context(), token)
		if err == nil {
			if code != http.StatusOK {
				t.Fatalf("HTTP %d accepted as %+v", code, caller)
			}
			p, _, _ := strings.Cut(strings.TrimPrefix(caller.ARN, "arn:"), ":")
			if caller.Kind == authn.CallerUser {
				// An IAM user: the canonical ARN is the ARN without its path.
				name := caller.CanonicalARN[strings.LastIndex(caller.CanonicalARN, "/")+1:]
				if !partitionRE.MatchString(p) || !strings.HasPrefix(caller.ARN, "arn:"+p+":iam::"+caller.Account+":user/") || !strings.HasSuffix(caller.ARN, "/"+name) ||
					caller.CanonicalARN != "arn:"+p+":iam::"+caller.Account+":user/"+name || caller.Role != "" || caller.SessionName != "" {
					t.Fatalf("user caller %+v does not re-render from its parts", caller)
				}
				return
			}
			rendered := partitionRE.MatchString(p) &&
				caller.ARN == "arn:"+p+":sts::"+caller.Account+":assumed-role/"+caller.Role+"/"+caller.SessionName &&
				caller.CanonicalARN == "arn:"+p+":iam::"+caller.Account+":role/"+caller.Role
			if !rendered || caller.UserID == "" || caller.AccessKeyID != accessKey {
				t.Fatalf("caller %+v does not re-render from its parts", caller)
			}
			return
		}
		if !errors.Is(err, authn.ErrDenied) && !errors.Is(err, authn.ErrThrottled) && !errors.Is(err, authn.ErrUnavailable) && !strings.HasPrefix(err.Error(), "STS answer: ") {
			t.Fatalf("error %v is of no known kind", err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("error %q carries %q", err, s)
			}
		}
	})
}

// partitionRE is a whole AWS partition name.
var partitionRE = regexp.MustCompile(`^` + nodejoinv1alpha1.PartitionPattern + `$`)

// FuzzEntryMappings: a NodeAccessEntry that Validate accepts maps its principal. A
// node entry maps only to system:node:<the instance's private DNS name> in
// system:bootstrappers and system:nodes (and, for EC2_WINDOWS, eks:kube-proxy-windows):
// rendered through Map for a running instance of that role, nothing else, whatever
// groups or policies it carries. A STANDARD entry maps to its own groups, none reserved,
// and to access-policy groups only through its policies. An entry Validate refuses maps
// nothing and is reported.
func FuzzEntryMappings(f *testing.F) {
	for _, s := range []struct{ name, arn, typ, group, policy string }{
		{"workers", "arn:aws:iam::111122223333:role/NodeRole", "EC2_LINUX", "", ""},
		{"win", "arn:aws-cn:iam::111122223333:role/path/to/Win", "EC2_WINDOWS", "", ""},
		{"bad", "arn:aws:iam::111122223333:user/alice", "", "", ""},
		{"std", "arn:aws:iam::111122223333:role/admin", "STANDARD", "devs", ""},
		{"admin", "arn:aws:iam::111122223333:user/admin", "STANDARD", "", "AmazonEKSClusterAdminPolicy"},
		{"masters", "arn:aws:iam::111122223333:user/admin", "STANDARD", "system:masters", ""},
		{"node-admin", "arn:aws:iam::111122223333:role/NodeRole", "EC2_LINUX", "", "AmazonEKSClusterAdminPolicy"},
	} {
		f.Add(s.name, s.arn, s.typ, s.group, s.policy)
	}
	f.Fuzz(func(t *testing.T, name, arn, typ, group, policy string) {
		e := &nodejoinv1alpha1.NodeAccessEntry{Spec: nodejoinv1alpha1.NodeAccessEntrySpec{PrincipalARN: arn, Type: nodejoinv1alpha1.AccessEntryType(typ)}}
		e.Name = name
		if group != "" {
			e.Spec.KubernetesGroups = []string{group}
		}
		if policy != "" {
			e.Spec.AccessPolicies = []nodejoinv1alpha1.AccessPolicyAssociation{{PolicyARN: nodejoinv1alpha1.AccessPolicyARNPrefix + policy,
				AccessScope: nodejoinv1alpha1.AccessScope{Type: nodejoinv1alpha1.AccessScopeCluster}}}
		}
		reported := 0
		maps := authn.EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{e}, func(string, error) { reported++ })
		if len(e.Validate()) > 0 {
			if len(maps) != 0 || reported != 1 {
				t.Fatalf("invalid entry mapped %+v, reported %d times", maps, reported)
			}
			return
		}
		if len(maps) != 1 {
			t.Fatalf("valid entry gave %d mappings", len(maps))
		}
		m := maps[0]
		parts := strings.SplitN(m.RoleARN, ":", 6)
		if e.Spec.Type == nodejoinv1alpha1.AccessEntryStandard {
			checkStandardMapping(t, e, maps, parts)
			return
		}
		wantGroups := []string{"system:bootstrappers", "system:nodes"}
		if e.Spec.Type == nodejoinv1alpha1.AccessEntryEC2Windows {
			wantGroups = append(wantGroups, "eks:kube-proxy-windows")
		}
		if !slices.Equal(m.Groups, wantGroups) || m.Username != "system:node:{{EC2PrivateDNSName}}" || m.Standard || len(m.PolicyGroups) > 0 {
			t.Fatalf("mapping %+v grants more than a node's identity", m)
		}
		// Rendered for a caller of that role naming a running instance of it.
		role := strings.TrimPrefix(parts[5], "role/")
		inst := &inventory.Instance{ID: "i-0aaaaaaaaaaaaaaaa", State: "running", AccountID: parts[4], Role: role, RoleARN: arn, PrivateDNSName: "ip-198-18-0-11.ec2.internal"}
		caller := &authn.Caller{Account: parts[4], ARN: "arn:" + parts[1] + ":sts::" + parts[4] + ":assumed-role/" + role + "/" + inst.ID,
			CanonicalARN: m.RoleARN, Kind: authn.CallerRole, Role: role, UserID: "AROAEXAMPLE", SessionName: inst.ID}
		user, err := authn.Map(t.Context(), caller, maps, instances{inst.ID: inst})
		if err != nil {
			t.Fatalf("Map(%+v) = %v", caller, err)
		}
		if user.Username != "system:node:"+inst.PrivateDNSName || !slices.Equal(user.Groups, wantGroups) {
			t.Fatalf("mapped to %s %v", user.Username, user.Groups)
		}
	})
}

// checkStandardMapping renders a valid STANDARD entry's mapping for a caller of its
// principal: its groups are the entry's, none reserved, then its policies' groups.
func checkStandardMapping(t *testing.T, e *nodejoinv1alpha1.NodeAccessEntry, maps []authn.RoleMapping, parts []string) {
	t.Helper()
	caller := &authn.Caller{Account: parts[4], CanonicalARN: maps[0].RoleARN, UserID: "AIDAEXAMPLE"}
	if kind, name, _ := strings.Cut(parts[5], "/"); kind == "user" {
		caller.Kind, caller.ARN = authn.CallerUser, maps[0].RoleARN
	} else {
		caller.Kind, caller.Role, caller.SessionName = authn.CallerRole, name, "alice"
		caller.ARN = "arn:" + parts[1] + ":sts::" + parts[4] + ":assumed-role/" + name + "/alice"
	}
	user, err := authn.Map(t.Context(), caller, maps, nil)
	if err != nil {
		t.Fatalf("Map(%+v) = %v", caller, err)
	}
	n := len(e.Spec.KubernetesGroups)
	if !slices.Equal(user.Groups[:n], e.Spec.KubernetesGroups) || !slices.Equal(user.Groups[n:], e.PolicyGroups()) {
		t.Fatalf("mapped to groups %v; want %v then %v", user.Groups, e.Spec.KubernetesGroups, e.PolicyGroups())
	}
	for _, g := range user.Groups[:n] {
		if nodejoinv1alpha1.ReservedPrefix(g) != "" {
			t.Fatalf("a STANDARD entry granted reserved group %s", g)
		}
	}
}
