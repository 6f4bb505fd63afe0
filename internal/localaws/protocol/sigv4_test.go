package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

// sigv4Suite is a table of cases from AWS's published SigV4 test suite.
type sigv4Suite struct {
	Source          string `json:"source"`
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	AmzDate         string `json:"amzDate"`
	Region          string `json:"region"`
	Service         string `json:"service"`
	Cases           []struct {
		Name string `json:"name"`
		// Presigned cases carry their signature in the query, as a presigned URL does.
		Presigned        bool        `json:"presigned"`
		Method           string      `json:"method"`
		Path             string      `json:"path"`
		Query            string      `json:"query"`
		Headers          [][2]string `json:"headers"`
		Body             string      `json:"body"`
		SignedHeaders    string      `json:"signedHeaders"`
		CanonicalRequest string      `json:"canonicalRequest"`
		StringToSign     string      `json:"stringToSign"`
		Signature        string      `json:"signature"`
	} `json:"cases"`
}

func TestSigV4TestSuite(t *testing.T) {
	data, err := os.ReadFile("testdata/sigv4-test-suite.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite sigv4Suite
	if err := json.Unmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	for _, tc := range suite.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			target := tc.Path
			if tc.Query != "" {
				target += "?" + tc.Query
			}
			r := httptest.NewRequestWithContext(t.Context(), tc.Method, "http://example.amazonaws.com"+target, strings.NewReader(tc.Body))
			r.Header = http.Header{}
			for _, h := range tc.Headers {
				if strings.EqualFold(h[0], "host") {
					r.Host = h[1]
					continue
				}
				r.Header.Add(h[0], h[1])
			}
			var (
				req   *sigv4Request
				scope sigv4Scope
			)
			if tc.Presigned {
				req, scope = presigned(suite.Region, suite.Service, r)
				if got := PresignedSignature(suite.SecretAccessKey, suite.Region, suite.Service, r); got != tc.Signature {
					t.Errorf("presigned signature = %s, want %s", got, tc.Signature)
				}
			} else {
				query, err := url.ParseQuery(tc.Query)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte(tc.Body))
				req = &sigv4Request{
					Method: tc.Method, Path: r.URL.EscapedPath(), Query: query, Header: r.Header, Host: r.Host,
					SignedHeaders: strings.Split(tc.SignedHeaders, ";"), PayloadHash: hex.EncodeToString(sum[:]),
				}
				scope = sigv4Scope{AmzDate: suite.AmzDate, Region: suite.Region, Service: suite.Service}
			}
			canonical := req.canonical()
			if canonical != tc.CanonicalRequest {
				t.Errorf("canonical request:\n%s\nwant:\n%s", canonical, tc.CanonicalRequest)
			}
			toSign := stringToSign(canonical, scope)
			if toSign != tc.StringToSign {
				t.Errorf("string to sign:\n%s\nwant:\n%s", toSign, tc.StringToSign)
			}
			if got := signature(suite.SecretAccessKey, scope, toSign); got != tc.Signature {
				t.Errorf("signature = %s, want %s", got, tc.Signature)
			}
		})
	}
}

// A presigned request verifies only as it was signed: any change to what it signs, or
// another secret, gives another signature.
func TestPresignedSignatureCoversTheRequest(t *testing.T) {
	const (
		secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" //nolint:gosec // G101: AWS's published example secret.
		query  = "Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fsts%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"
	)
	request := func(target, host, cluster string) *http.Request {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://sts.amazonaws.com"+target, nil)
		r.Host = host
		r.Header.Set("X-K8s-Aws-Id", cluster)
		return r
	}
	base := PresignedSignature(secret, "us-east-1", "sts", request("/?"+query, "sts.amazonaws.com", "c1"))
	for name, r := range map[string]*http.Request{
		"another host":       request("/?"+query, "sts.example.com", "c1"),
		"another cluster":    request("/?"+query, "sts.amazonaws.com", "c2"),
		"another path":       request("/x?"+query, "sts.amazonaws.com", "c1"),
		"another parameter":  request("/?"+query+"&Extra=1", "sts.amazonaws.com", "c1"),
		"another action":     request("/?"+strings.Replace(query, "GetCallerIdentity", "AssumeRole", 1), "sts.amazonaws.com", "c1"),
		"another signed set": request("/?"+strings.Replace(query, "host%3Bx-k8s-aws-id", "host", 1), "sts.amazonaws.com", "c1"),
	} {
		if got := PresignedSignature(secret, "us-east-1", "sts", r); got == base {
			t.Errorf("%s: same signature", name)
		}
	}
	same := request("/?"+query+"&X-Amz-Signature=anything", "sts.amazonaws.com", "c1")
	if got := PresignedSignature(secret, "us-east-1", "sts", same); got != base {
		t.Error("X-Amz-Signature is signed")
	}
	if got := PresignedSignature("other", "us-east-1", "sts", request("/?"+query, "sts.amazonaws.com", "c1")); got == base {
		t.Error("another secret gives the same signature")
	}
}
