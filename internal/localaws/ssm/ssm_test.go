package ssm

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

func newClient(t *testing.T, s *SSM) *ssm.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return ssm.NewFromConfig(awstest.SDKConfig(), func(o *ssm.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// The parameters eksctl's AMI resolvers and users read name the catalog's latest
// release of each family, as DescribeImages lists it.
func TestGetParameterWithTheSSMClient(t *testing.T) {
	cat := ec2.NewReleaseCatalog("1.36", "1.37")
	c := newClient(t, New("us-west-2", cat))
	latest := func(f string) ec2.Release { r, _ := cat.Latest("1.37", f); return r }
	al2, al2023, br, win := latest(ec2.FamilyAmazonLinux2), latest(ec2.FamilyAmazonLinux2023), latest(ec2.FamilyBottlerocket), latest(ec2.FamilyWindows)
	tests := []struct{ name, want string }{
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2/recommended/image_id", al2.ImageID},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2/recommended/release_version", al2.ReleaseVersion},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2/recommended/image_name", al2.Name},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id", al2023.ImageID},
		{"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/release_version", "1.37.1-20261015"},
		{"/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id", br.ImageID},
		{"/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_version", br.ReleaseVersion},
		{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.37/image_id", win.ImageID},
	}
	arn := "arn:aws:ssm:us-west-2::parameter/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id"
	if out, err := c.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(arn)}); err != nil || aws.ToString(out.Parameter.Value) != br.ImageID || aws.ToString(out.Parameter.ARN) != arn {
		t.Errorf("by ARN: %+v %v", out, err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(tt.name), WithDecryption: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			p := out.Parameter
			if aws.ToString(p.Value) != tt.want || aws.ToString(p.Name) != tt.name || p.Type != ssmtypes.ParameterTypeString ||
				aws.ToString(p.DataType) != "text" || p.Version != 2 || aws.ToString(p.ARN) != "arn:aws:ssm:us-west-2::parameter"+tt.name ||
				p.LastModifiedDate == nil || !p.LastModifiedDate.Equal(al2.CreationDate) {
				t.Errorf("parameter %+v, want value %s", p, tt.want)
			}
		})
	}
	// The recommended path itself holds its leaves as one JSON document.
	out, err := c.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended")})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]string
	old, _ := cat.Latest("1.36", ec2.FamilyAmazonLinux2)
	if err := json.Unmarshal([]byte(aws.ToString(out.Parameter.Value)), &doc); err != nil || doc["image_id"] != old.ImageID ||
		doc["release_version"] != "1.36.1-20261015" || doc["image_name"] != old.Name {
		t.Errorf("recommended = %s (%v)", aws.ToString(out.Parameter.Value), err)
	}
}

func TestGetParametersWithTheSSMClient(t *testing.T) {
	cat := ec2.NewReleaseCatalog("1.37")
	c := newClient(t, New("us-west-2", cat))
	id := "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id"
	out, err := c.GetParameters(t.Context(), &ssm.GetParametersInput{Names: []string{id, "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id", id}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := cat.Latest("1.37", ec2.FamilyAmazonLinux2023)
	if len(out.Parameters) != 1 || aws.ToString(out.Parameters[0].Value) != r.ImageID ||
		!slices.Equal(out.InvalidParameters, []string{"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id"}) {
		t.Errorf("got %+v", out)
	}
}

func TestSSMRefusals(t *testing.T) {
	s := New("us-west-2", ec2.NewReleaseCatalog("1.37"))
	c := newClient(t, s)
	for _, name := range []string{
		"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id", // a version the catalog lacks
		"/aws/service/eks/optimized-ami/1.37/amazon-linux-2/recommended/colour",
		"/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest",
		"/my/own/parameter",
	} {
		_, err := c.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(name)})
		var nf *ssmtypes.ParameterNotFound
		if code, status := awstest.APICode(t, err); code != "ParameterNotFound" || status != http.StatusBadRequest || !errorsAs(err, &nf) {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := c.GetParameters(t.Context(), &ssm.GetParametersInput{Names: slices.Repeat([]string{"/x"}, 11)})
	if code, _ := awstest.APICode(t, err); code != "ValidationException" || !strings.Contains(err.Error(), "between 1 and 10") {
		t.Errorf("eleven names: %v", err)
	}
	_, err = c.DeleteParameter(t.Context(), &ssm.DeleteParameterInput{Name: aws.String("/x")})
	if code, _ := awstest.APICode(t, err); code != "UnknownOperationException" || !strings.Contains(err.Error(), "AmazonSSM.DeleteParameter") {
		t.Errorf("an operation SSM lacks: %v", err)
	}
	raw := func(body string, signed bool) (int, string) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
		r.Header.Set("Content-Type", "application/x-amz-json-1.1")
		if signed {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/ssm/aws4_request, SignedHeaders=host, Signature=00")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Header().Get("X-Amzn-Errortype") + " " + w.Body.String()
	}
	for _, tt := range []struct {
		body   string
		signed bool
		want   string
	}{
		{`{"Name":"/x"}`, false, "MissingAuthenticationTokenException"},
		{`{}`, true, "ValidationException"},
		{`{"Name":"/x","Colour":"red"}`, true, "ValidationException"},
		{`{"Name":7}`, true, "SerializationException"},
		{`[`, true, "SerializationException"},
	} {
		want := http.StatusBadRequest
		if !tt.signed {
			want = http.StatusForbidden
		}
		if status, body := raw(tt.body, tt.signed); status != want || !strings.HasPrefix(body, tt.want+" ") || !strings.Contains(body, `"__type":"`+tt.want) {
			t.Errorf("%s: %d %s", tt.body, status, body)
		}
	}
	if s.Calls() == 0 {
		t.Error("no calls counted")
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
