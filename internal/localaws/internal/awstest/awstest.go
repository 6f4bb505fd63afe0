// Package awstest holds what the local AWS's tests share: the SDK configuration they
// call the services with, and raw Query requests and checks of their answers.
package awstest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Account is the tests' account ID.
const Account = "111122223333"

// SDKConfig is the SDK configuration of the tests: static credentials, one attempt.
func SDKConfig() aws.Config {
	return aws.Config{
		Region:           "us-west-2",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       testenv.InMemoryBodies{Client: awshttp.NewBuildableClient()},
	}
}

// APICode returns an SDK error's AWS error code and HTTP status.
func APICode(t *testing.T, err error) (string, int) {
	t.Helper()
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("error %v is not an API error", err)
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return api.ErrorCode(), status
}

const authorization = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/ec2/aws4_request, SignedHeaders=host, Signature=00"

// Post sends a raw Query request, signed or not, and returns the status and body.
func Post(t *testing.T, h http.Handler, form string, signed bool) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if signed {
		r.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// FuzzRequest sends a signed raw Query request body.
func FuzzRequest(ctx context.Context, h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", authorization)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// CheckQueryAnswer asserts an answer is one well-formed XML document whose root is
// okRoot on success or errRoot otherwise.
func CheckQueryAnswer(t *testing.T, w *httptest.ResponseRecorder, okRoot, errRoot string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("malformed XML (%v): %s", err, w.Body.String())
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	want := errRoot
	if w.Code == http.StatusOK {
		want = okRoot
	}
	if root != want {
		t.Fatalf("status %d with root %q, want %q: %s", w.Code, root, want, w.Body.String())
	}
}

// NodeTemplateData is a node group's launch template data, with user data.
func NodeTemplateData(userData string) *ec2types.RequestLaunchTemplateData {
	return &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String("ami-0123456789abcdef0"),
		InstanceType:       ec2types.InstanceTypeM5Large,
		UserData:           aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("nodes")},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(2)},
		NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			{DeviceIndex: aws.Int32(0), Groups: []string{"sg-1", "sg-2"}}},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{
			ResourceType: ec2types.ResourceTypeInstance,
			Tags:         []ec2types.Tag{{Key: aws.String("eks:nodegroup-name"), Value: aws.String("ng1")}},
		}},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String("/dev/xvda"),
			Ebs:        &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3},
		}},
	}
}
