package eks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Any signed request to any of the operations with a body taken from it gets one JSON
// answer: a success, or an error in EKS's shape (the code in X-Amzn-Errortype and
// __type, a message) that is never a server error.
func FuzzRequests(f *testing.F) {
	f.Add(uint8(0), []byte(`{"nodegroupName":"ng","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":[]}`))
	f.Add(uint8(7), []byte(`{"scalingConfig":{"desiredSize":3},"labels":{"addOrUpdateLabels":{"a":"b"}}}`))
	f.Add(uint8(8), []byte(`{"releaseVersion":"1.37.0-20261127","force":true}`))
	f.Add(uint8(11), []byte(`{"principalArn":"arn:aws:iam::000000000000:role/r","type":"EC2_LINUX"}`))
	f.Add(uint8(11), []byte(`{"principalArn":"arn:aws:iam::000000000000:user/u","kubernetesGroups":["devs","system:masters"],"username":"u"}`))
	f.Add(uint8(16), []byte(`{"kubernetesGroups":["ops"],"username":"eks:x"}`))
	f.Add(uint8(17), []byte(`{"policyArn":"arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy","accessScope":{"type":"namespace","namespaces":["dev"]}}`))
	f.Add(uint8(19), []byte(``))
	f.Add(uint8(3), []byte(`{"nodegroupName":"ng","nodeRole":"x","taints":[{"key":"k","effect":"NO_SCHEDULE"}],"updateConfig":{"maxUnavailable":0}}`))
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		e := NewWithBackend(newFake(), nil)
		rt := routes[int(op)%len(routes)]
		path := rt.path
		for _, p := range []string{"demo", "ng", "u-1"} {
			path = strings.Replace(path, "*", p, 1)
		}
		r := httptest.NewRequestWithContext(t.Context(), rt.method, path+"?nodegroupName=ng", bytes.NewReader(body))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/eks/aws4_request, SignedHeaders=host, Signature=00")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: answer %d is not one JSON object: %q", rt.name, w.Code, w.Body)
		}
		if w.Code == http.StatusOK {
			return
		}
		if w.Code >= 500 || w.Header().Get("X-Amzn-Errortype") == "" || out["__type"] != w.Header().Get("X-Amzn-Errortype") || out["message"] == "" {
			t.Fatalf("%s: error %d %v, header %q", rt.name, w.Code, out, w.Header().Get("X-Amzn-Errortype"))
		}
	})
}
