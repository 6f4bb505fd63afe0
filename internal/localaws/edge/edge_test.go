package edge

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

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

var users = Static{"AKIAADMIN": {Secret: "s3cret", Caller: protocol.Caller{ARN: "arn:aws:iam::1:user/admin", Account: "1"}}}

// echo answers with the service's name and the caller's ARN and the body it read.
func echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := protocol.CallerFrom(r.Context())
		b, _ := io.ReadAll(r.Body)
		if !ok {
			c.ARN = "unverified"
		}
		_, _ = io.WriteString(w, name+" "+c.ARN+" "+string(b))
	})
}

func send(t *testing.T, e *Edge, service, akid, secret, body string, edit func(*http.Request)) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:4566/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if akid != "" {
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(t.Context(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}, r, hex.EncodeToString(sum[:]), service, "us-west-2", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, r)
	return w
}

func TestEdgeRoutes(t *testing.T) {
	e := New(Lookups(Static{}.Lookup, users.Lookup))
	e.Route("ec2", echo("ec2"))
	e.Route("sts", echo("sts"))
	e.Route("eks", echo("eks"))
	for _, tc := range []struct {
		name, service, akid, secret string
		edit                        func(*http.Request)
		status                      int
		has                         string
	}{
		{"ec2", "ec2", "AKIAADMIN", "s3cret", nil, 200, "ec2 arn:aws:iam::1:user/admin Action=X"},
		{"sts", "sts", "AKIAADMIN", "s3cret", nil, 200, "sts arn:aws:iam::1:user/admin"},
		{"unknown service, JSON", "ssm", "AKIAADMIN", "s3cret", nil, 400, `service \"ssm\"`},
		{"unknown service, Query", "iam", "AKIAADMIN", "s3cret", nil, 400, "<Code>InvalidAction</Code>"},
		{"unknown key, EC2", "ec2", "AKIANOBODY", "x", nil, 401, "<Code>AuthFailure</Code>"},
		{"unknown key, Query", "sts", "AKIANOBODY", "x", nil, 403, "<Code>InvalidClientTokenId</Code>"},
		{"unknown key, JSON", "eks", "AKIANOBODY", "x", nil, 403, "UnrecognizedClientException"},
		{"bad signature", "sts", "AKIAADMIN", "guess", nil, 403, "<Code>SignatureDoesNotMatch</Code>"},
		{"unsigned Query", "", "", "", nil, 403, "<Code>MissingAuthenticationToken</Code>"},
		{"unsigned JSON", "", "", "", func(r *http.Request) { r.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter") }, 403, "MissingAuthenticationTokenException"},
		{"skewed", "sts", "AKIAADMIN", "s3cret", func(r *http.Request) {
			r.Header.Set("X-Amz-Date", time.Now().Add(-time.Hour).UTC().Format("20060102T150405Z"))
		}, 403, "RequestTimeTooSkewed"},
		{"presigned STS passes through", "", "", "", func(r *http.Request) {
			r.URL.RawQuery = "Action=GetCallerIdentity&X-Amz-Credential=AKIAADMIN%2F20260101%2Fus-west-2%2Fsts%2Faws4_request"
		}, 200, "sts unverified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := send(t, e, tc.service, tc.akid, tc.secret, "Action=X", tc.edit)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.has) {
				t.Errorf("%d %s, want %d with %s", w.Code, w.Body.String(), tc.status, tc.has)
			}
			if w.Code != 200 && strings.Contains(w.Body.String(), "s3cret") {
				t.Error("the answer shows the secret")
			}
		})
	}
	if got := strings.Join(e.Services(), ","); got != "ec2,eks,sts" {
		t.Errorf("Services = %s", got)
	}
}
