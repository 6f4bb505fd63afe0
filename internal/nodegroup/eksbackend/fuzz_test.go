package eksbackend_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/localaws/eks"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
)

// fakeEKS is the local EKS over a fake API client.
func fakeEKS(t testing.TB) (*eks.EKS, client.Client) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kc := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.NodeGroup{}).Build()
	return eks.NewWithBackend(eksbackend.New(kc, info, releases{}), nil), kc
}

// Any CreateNodegroup body the local EKS accepts yields a NodeGroup that passes the
// API's validation (so the API server takes it and the controller can run it) and that
// EKS describes back with the name, sizes, labels and tags asked for; anything else is
// refused in EKS's error shape, never a server error.
func FuzzCreateNodegroup(f *testing.F) {
	for _, seed := range []string{
		`{"nodegroupName":"ng","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":[]}`,
		`{"nodegroupName":"ng-2","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":["subnet-0123456789abcdef0"],"scalingConfig":{"minSize":0,"maxSize":5,"desiredSize":3},"labels":{"a":"b"},"taints":[{"key":"k","value":"v","effect":"NO_EXECUTE"}],"tags":{"t":"u"},"amiType":"BOTTLEROCKET_x86_64","capacityType":"SPOT","instanceTypes":["c5.large","m5.large"],"updateConfig":{"maxUnavailablePercentage":50,"updateStrategy":"MINIMAL"},"releaseVersion":"1.37.0-20261101","diskSize":40}`,
		`{"nodegroupName":"ng","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":[],"labels":{"kubernetes.io/hostname":"x"}}`,
		`{"nodegroupName":"ng","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":[],"scalingConfig":{"maxSize":1000,"desiredSize":1000}}`,
		`{"nodegroupName":"UPPER","nodeRole":"arn:aws:iam::000000000000:role/r","subnets":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, kc := fakeEKS(t)
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/clusters/demo/node-groups", bytes.NewReader(body))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/eks/aws4_request, SignedHeaders=host, Signature=00")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			code := w.Header().Get("X-Amzn-Errortype")
			if w.Code >= 500 || !slices.Contains([]string{eksapi.CodeInvalidParameter, eksapi.CodeResourceNotFound, eksapi.CodeResourceInUse, eksapi.CodeInvalidRequest}, code) {
				t.Fatalf("refusal %d %s: %s", w.Code, code, w.Body)
			}
			var l v1alpha1.NodeGroupList
			if err := kc.List(t.Context(), &l); err != nil || len(l.Items) != 0 {
				t.Fatalf("a refused request left %d NodeGroups", len(l.Items))
			}
			return
		}
		var in eksapi.CreateNodegroupRequest
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		var out struct{ Nodegroup eksapi.Nodegroup }
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer: %v", err)
		}
		var ng v1alpha1.NodeGroup
		if err := kc.Get(t.Context(), client.ObjectKey{Name: in.NodegroupName}, &ng); err != nil {
			t.Fatalf("accepted, but no NodeGroup %q: %v", in.NodegroupName, err)
		}
		if errs := ng.Validate(); len(errs) > 0 {
			t.Fatalf("accepted %s, but the NodeGroup is invalid: %v", body, errs.ToAggregate())
		}
		d := out.Nodegroup
		if d.NodegroupName != in.NodegroupName || len(d.Labels) != len(in.Labels) || len(d.Tags) != len(in.Tags) || len(d.Taints) != len(in.Taints) {
			t.Fatalf("asked %+v, described %+v", in, d)
		}
		if s := in.ScalingConfig; s != nil && s.DesiredSize != nil && *d.ScalingConfig.DesiredSize != *s.DesiredSize {
			t.Fatalf("desired %d, described %d", *s.DesiredSize, *d.ScalingConfig.DesiredSize)
		}
	})
}
