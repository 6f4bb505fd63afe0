package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var (
	signTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	users    = map[string]Credential{
		"AKIAUSER": {Secret: "user-secret", Caller: Caller{ARN: "arn:aws:iam::111122223333:user/admin", UserID: "AIDAUSER", Account: "111122223333"}},
		"ASIASESSION": {Secret: "session-secret", SessionToken: "token-1", Expiration: signTime.Add(time.Hour),
			Caller: Caller{ARN: "arn:aws:sts::111122223333:assumed-role/r/s", UserID: "AROAR:s", Account: "111122223333", Role: "r"}},
	}
)

func lookup(akid string) (Credential, bool) {
	c, ok := users[akid]
	return c, ok
}

// signed returns a request as the SDK's signer signs it, then as a server receives it.
func signed(t *testing.T, method, target, body string, creds aws.Credentials, service string, edit func(*http.Request)) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), method, "https://127.0.0.1:4566"+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, r, hex.EncodeToString(sum[:]), service, "us-west-2", signTime); err != nil {
		t.Fatal(err)
	}
	// What the server sees: the Host header as Host, Content-Length moved out of the map.
	in := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	in.Host = r.Host
	in.Header = r.Header.Clone()
	in.Header.Del("Content-Length")
	if edit != nil {
		edit(in)
	}
	return in
}

func TestVerifyRequestSignedBySDK(t *testing.T) {
	user := aws.Credentials{AccessKeyID: "AKIAUSER", SecretAccessKey: "user-secret"}
	session := aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret", SessionToken: "token-1"}
	form := "Action=GetCallerIdentity&Version=2011-06-15"
	tests := []struct {
		name    string
		method  string
		target  string
		body    string
		creds   aws.Credentials
		edit    func(*http.Request)
		now     time.Time
		want    AuthFailure // 0: verifies
		wantARN string
	}{
		{name: "query POST", method: http.MethodPost, target: "/", body: form, creds: user, wantARN: "arn:aws:iam::111122223333:user/admin"},
		{name: "GET with query", method: http.MethodGet, target: "/?Action=GetCallerIdentity&Version=2011-06-15&X=a%20b", creds: user},
		{name: "REST path needing escapes", method: http.MethodGet, target: "/clusters/my%20cluster/node-groups?maxResults=10", creds: user},
		{name: "session with its token", method: http.MethodPost, target: "/", body: form, creds: session, wantARN: "arn:aws:sts::111122223333:assumed-role/r/s"},
		{name: "14 minutes late", method: http.MethodPost, target: "/", body: form, creds: user, now: signTime.Add(14 * time.Minute)},
		{name: "16 minutes late", method: http.MethodPost, target: "/", body: form, creds: user, now: signTime.Add(16 * time.Minute), want: AuthSkewed},
		{name: "16 minutes early", method: http.MethodPost, target: "/", body: form, creds: user, now: signTime.Add(-16 * time.Minute), want: AuthSkewed},
		{name: "tampered body", method: http.MethodPost, target: "/", body: form, creds: user, want: AuthBadSignature,
			edit: func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(form + "&Extra=1")) }},
		{name: "tampered query", method: http.MethodGet, target: "/?Action=GetCallerIdentity", creds: user, want: AuthBadSignature,
			edit: func(r *http.Request) { r.URL.RawQuery = "Action=AssumeRole" }},
		{name: "tampered host", method: http.MethodPost, target: "/", body: form, creds: user, want: AuthBadSignature,
			edit: func(r *http.Request) { r.Host = "evil.example" }},
		{name: "tampered path", method: http.MethodGet, target: "/clusters/a", creds: user, want: AuthBadSignature,
			edit: func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/clusters/b", "" }},
		{name: "wrong secret", method: http.MethodPost, target: "/", body: form, creds: aws.Credentials{AccessKeyID: "AKIAUSER", SecretAccessKey: "guess"}, want: AuthBadSignature},
		{name: "unknown key", method: http.MethodPost, target: "/", body: form, creds: aws.Credentials{AccessKeyID: "AKIANOBODY", SecretAccessKey: "x"}, want: AuthUnknownKey},
		{name: "session without its token", method: http.MethodPost, target: "/", body: form, creds: aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret"}, want: AuthUnknownKey},
		{name: "session with another token", method: http.MethodPost, target: "/", body: form, creds: aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret", SessionToken: "token-2"}, want: AuthUnknownKey},
		{name: "expired session", method: http.MethodPost, target: "/", body: form, creds: session, now: signTime.Add(61 * time.Minute), want: AuthSkewed},
		{name: "content hash that is not the body's", method: http.MethodPost, target: "/", body: form, creds: user, want: AuthBadSignature,
			edit: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD") }},
		{name: "unsigned", method: http.MethodPost, target: "/", body: form, creds: user, want: AuthMissing,
			edit: func(r *http.Request) { r.Header.Del("Authorization") }},
		{name: "malformed authorization", method: http.MethodPost, target: "/", body: form, creds: user, want: AuthMalformed,
			edit: func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAUSER") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := signed(t, tc.method, tc.target, tc.body, tc.creds, "sts", tc.edit)
			now := tc.now
			if now.IsZero() {
				now = signTime.Add(time.Minute)
			}
			caller, err := VerifyRequest(r, lookup, now)
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("refused: %v (%d)", err, err.Failure)
			case tc.want != 0 && err == nil:
				t.Fatalf("verified, want failure %d", tc.want)
			case tc.want != 0 && err.Failure != tc.want:
				t.Fatalf("failure %d (%v), want %d", err.Failure, err, tc.want)
			}
			if tc.want == 0 {
				if tc.wantARN != "" && caller.ARN != tc.wantARN {
					t.Errorf("caller %s, want %s", caller.ARN, tc.wantARN)
				}
				if caller.AccessKey != tc.creds.AccessKeyID {
					t.Errorf("access key %s", caller.AccessKey)
				}
				// The handler still reads the body.
				if b, _ := io.ReadAll(r.Body); string(b) != tc.body {
					t.Errorf("body after verification %q", b)
				}
			} else if strings.Contains(err.Message, "secret") || strings.Contains(err.Message, "token-1") {
				t.Errorf("message leaks a secret: %s", err.Message)
			}
		})
	}
}

func TestVerifyExpiredSession(t *testing.T) {
	session := aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret", SessionToken: "token-1"}
	r := signed(t, http.MethodPost, "/", "Action=GetCallerIdentity", session, "ec2", nil)
	old := users["ASIASESSION"]
	old.Expiration = signTime
	users["ASIASESSION"] = old
	defer func() { old.Expiration = signTime.Add(time.Hour); users["ASIASESSION"] = old }()
	if _, err := VerifyRequest(r, lookup, signTime.Add(time.Minute)); err == nil || err.Failure != AuthExpired {
		t.Fatalf("got %v, want expired", err)
	}
}

func TestVerifyPresignedBySDK(t *testing.T) {
	user := aws.Credentials{AccessKeyID: "AKIAUSER", SecretAccessKey: "user-secret"}
	r, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://127.0.0.1:4566/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60", nil)
	u, _, err := v4.NewSigner().PresignHTTP(t.Context(), user, r, emptyPayloadHash, "sts", "us-west-2", signTime)
	if err != nil {
		t.Fatal(err)
	}
	in := httptest.NewRequestWithContext(t.Context(), http.MethodGet, strings.TrimPrefix(u, "https://127.0.0.1:4566"), nil)
	in.Host = "127.0.0.1:4566"
	if _, err := VerifyRequest(in, lookup, signTime.Add(30*time.Second)); err != nil {
		t.Fatalf("refused: %v", err)
	}
	if _, err := VerifyRequest(in, lookup, signTime.Add(2*time.Minute)); err == nil || err.Failure != AuthBadSignature {
		t.Fatalf("after X-Amz-Expires: %v", err)
	}
	if s, ok := RequestScope(in); !ok || !s.Presigned || s.Service != "sts" || s.AccessKeyID != "AKIAUSER" {
		t.Errorf("scope %+v", s)
	}
}

func TestAuthErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		f      AuthFailure
		shape  ErrorShape
		code   string
		status int
	}{
		{AuthUnknownKey, QueryShape, "InvalidClientTokenId", 403},
		{AuthUnknownKey, EC2Shape, "AuthFailure", 401},
		{AuthUnknownKey, JSONShape, "UnrecognizedClientException", 403},
		{AuthMissing, QueryShape, "MissingAuthenticationToken", 403},
		{AuthMissing, JSONShape, "MissingAuthenticationTokenException", 403},
		{AuthBadSignature, QueryShape, "SignatureDoesNotMatch", 403},
		{AuthExpired, QueryShape, "ExpiredToken", 403},
		{AuthSkewed, EC2Shape, "RequestTimeTooSkewed", 403},
	} {
		e := (&AuthError{Failure: tc.f, Message: "m"}).In(tc.shape)
		if e.Code != tc.code || e.Status != tc.status {
			t.Errorf("%d in %d: %s %d, want %s %d", tc.f, tc.shape, e.Code, e.Status, tc.code, tc.status)
		}
	}
}
