package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// A custom-DHCP-domain instance: IMDS local-hostname carries the VPC's domain, EC2's
// private DNS name does not. The node must be named as EC2 names it, the name the
// webhook gives the kubelet's identity (see internal/authn's test of the same instance).
const (
	customDomainInstance = "i-0123456789abcdef0"
	customDomainIMDSName = "ip-10-0-0-1.corp.example.com"
	customDomainEC2Name  = "ip-10-0-0-1.ec2.internal"
)

// fakeEC2 answers DescribeInstances with names in turn (the last one repeats), or err.
type fakeEC2 struct {
	names []string
	err   error
	calls int
}

func (f *fakeEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	name := f.names[min(f.calls, len(f.names))-1]
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{
		{InstanceId: aws.String(in.InstanceIds[0]), PrivateDnsName: aws.String(name)},
	}}}}, nil
}

func customDomainMetadata() *Metadata {
	md := *e2eInstance
	md.InstanceID, md.LocalHostname, md.PrivateDNSName = customDomainInstance, customDomainIMDSName, customDomainIMDSName
	return &md
}

// TestNodeNameIsEC2PrivateDNSName is the regression test of issue 14's third defect:
// with a custom DHCP domain, --hostname-override is EC2's private DNS name, not IMDS
// local-hostname.
func TestNodeNameIsEC2PrivateDNSName(t *testing.T) {
	md := customDomainMetadata()
	// A just-launched instance may have no name in EC2 yet: nodeadm waits for it.
	api := &fakeEC2{names: []string{"", "IP-10-0-0-1.EC2.INTERNAL"}}
	warning, err := ResolvePrivateDNSName(t.Context(), md, api, PrivateDNSOptions{Interval: time.Millisecond, Timeout: time.Minute})
	if err != nil || warning != "" {
		t.Fatalf("warning %q, error %v", warning, err)
	}
	if md.PrivateDNSName != customDomainEC2Name || api.calls != 2 {
		t.Fatalf("name %q after %d calls; want %s", md.PrivateDNSName, api.calls, customDomainEC2Name)
	}
	out, err := Render(mergedConfig(t, clusterDoc), md, Options{InstanceTypes: e2eTypes})
	if err != nil {
		t.Fatal(err)
	}
	env := string(file(t, out, KubeletEnvPath))
	if !strings.Contains(env, "--hostname-override="+customDomainEC2Name+" ") && !strings.Contains(env, "--hostname-override="+customDomainEC2Name+"\"") {
		t.Errorf("the kubelet is not named %s:\n%s", customDomainEC2Name, env)
	}
	if strings.Contains(env, customDomainIMDSName) {
		t.Errorf("the kubelet's arguments carry IMDS local-hostname:\n%s", env)
	}
}

func TestNodeNameFallsBackWithAWarning(t *testing.T) {
	md := customDomainMetadata()
	warning, err := ResolvePrivateDNSName(t.Context(), md, &fakeEC2{err: errors.New("UnauthorizedOperation: not allowed")}, PrivateDNSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if md.PrivateDNSName != customDomainIMDSName || !strings.Contains(warning, "UnauthorizedOperation") || !strings.Contains(warning, "custom domain") {
		t.Errorf("name %q, warning %q", md.PrivateDNSName, warning)
	}
	md = customDomainMetadata()
	if warning, err = ResolvePrivateDNSName(t.Context(), md, nil, PrivateDNSOptions{}); err != nil || !strings.Contains(warning, "AWS_ENDPOINT_URL_EC2") {
		t.Errorf("without EC2: warning %q, error %v", warning, err)
	}
	// EC2 answering without a name is an error, not a silent fallback.
	_, err = ResolvePrivateDNSName(t.Context(), customDomainMetadata(), &fakeEC2{names: []string{""}}, PrivateDNSOptions{Interval: time.Millisecond, Timeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrNoPrivateDNSName) {
		t.Errorf("error %v, want ErrNoPrivateDNSName", err)
	}
}

// TestEC2PrivateDNSNameThroughTheSDK calls DescribeInstances through aws-sdk-go-v2 on
// the EC2 Query protocol, at the endpoint AWS_ENDPOINT_URL_EC2 names.
func TestEC2PrivateDNSNameThroughTheSDK(t *testing.T) {
	var form string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Header.Get("Authorization") == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		form = r.PostForm.Encode()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r</requestId>`+
			`<reservationSet><item><reservationId>r-1</reservationId><instancesSet><item><instanceId>%s</instanceId>`+
			`<privateDnsName>%s</privateDnsName></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`, customDomainInstance, customDomainEC2Name)
	}))
	defer srv.Close()
	t.Setenv(EnvIMDSEndpoint, "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_EC2", "")
	if api, err := NewEC2Client(t.Context(), "us-west-2"); err != nil || api != nil {
		t.Fatalf("an IMDS emulator without an EC2 endpoint: client %v, %v; want none", api, err)
	}
	t.Setenv("AWS_ENDPOINT_URL_EC2", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	api, err := NewEC2Client(t.Context(), "us-west-2")
	if err != nil || api == nil {
		t.Fatalf("client %v, %v", api, err)
	}
	name, err := EC2PrivateDNSName(t.Context(), api, customDomainInstance, PrivateDNSOptions{})
	if err != nil || name != customDomainEC2Name {
		t.Fatalf("name %q, %v", name, err)
	}
	if !strings.Contains(form, "Action=DescribeInstances") || !strings.Contains(form, "InstanceId.1="+customDomainInstance) {
		t.Errorf("request %s", form)
	}
}
