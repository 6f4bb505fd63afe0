package ssm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
)

// Arbitrary request bodies never panic SSM and always get one JSON object: the answer,
// or an error with its type in __type and X-Amzn-Errortype, never a server error.
func FuzzSSMRequest(f *testing.F) {
	for _, seed := range []string{
		`{"Name":"/aws/service/eks/optimized-ami/1.37/amazon-linux-2/recommended/image_id"}`,
		`{"Names":["/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_version","/x"],"WithDecryption":true}`,
		`{"Name":7}`, `[]`, ``, `{"Names":null}`,
	} {
		f.Add("GetParameter", []byte(seed))
		f.Add("GetParameters", []byte(seed))
	}
	s := New("us-west-2", ec2.NewReleaseCatalog("1.37"))
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("X-Amz-Target", targetPrefix+op)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/ssm/aws4_request, SignedHeaders=host, Signature=00")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		var doc map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%d: not a JSON object: %q", w.Code, w.Body)
		}
		if w.Code >= 500 || w.Code != http.StatusOK && (doc["__type"] == nil || w.Header().Get("X-Amzn-Errortype") == "") {
			t.Fatalf("%d %v: %q", w.Code, w.Header(), w.Body)
		}
	})
}
