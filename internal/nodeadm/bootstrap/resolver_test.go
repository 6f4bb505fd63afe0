package bootstrap

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/nodejoin/nodejoin/internal/localaws"
)

// DescribeCluster goes through aws-sdk-go-v2 to the EKS emulator, retrying throttling.
func TestDescribeClusterThroughTheSDK(t *testing.T) {
	e := localaws.NewEKS(localaws.Cluster{
		Name: "demo", Endpoint: "https://demo.example", CertificatePEM: []byte(testCA),
		ServiceIPv4CIDR: "172.20.0.0/16", IPFamily: "ipv4", ID: "abc",
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_EKS", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var progress []string
	r := &CloudResolver{Metadata: &Metadata{Region: "us-west-2"}, Backoff: func(int) time.Duration { return 0 },
		Progress: func(format string, _ ...any) { progress = append(progress, format) }}

	e.Throttle(2)
	info, err := r.DescribeCluster(t.Context(), "demo", 3)
	if err != nil {
		t.Fatal(err)
	}
	if info.Endpoint != "https://demo.example" || string(info.CertificateData) != testCA || info.ServiceIPv4CIDR != "172.20.0.0/16" || info.ID != "abc" {
		t.Errorf("info = %+v", info)
	}
	if e.Calls() != 3 || len(progress) != 2 {
		t.Errorf("calls %d, progress lines %d; want 3 and 2", e.Calls(), len(progress))
	}

	e.Throttle(5)
	_, err = r.DescribeCluster(t.Context(), "demo", 2)
	if err == nil || !strings.Contains(err.Error(), "exhausted 3 attempts") || !strings.Contains(err.Error(), "TooManyRequestsException") {
		t.Errorf("throttled error = %v", err)
	}

	e.Throttle(0)
	before := e.Calls()
	_, err = r.DescribeCluster(t.Context(), "absent", 3)
	var nf *ekstypes.ResourceNotFoundException
	if !errors.As(err, &nf) || e.Calls() != before+1 {
		t.Errorf("missing cluster: err %v after %d calls; want ResourceNotFoundException at once", err, e.Calls()-before)
	}
}
