package cloudformation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// SignalResource, as the SDK and as cfn-signal (CFN_V1 authorization) send it, records
// one signal per stack, resource and instance.
func TestCloudFormationSignalResource(t *testing.T) {
	ctx := context.Background()
	cf := New()
	srv := httptest.NewServer(cf)
	t.Cleanup(srv.Close)
	c := cloudformation.NewFromConfig(awstest.SDKConfig(), func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	send := func(id string, status cfntypes.ResourceSignalStatus) error {
		_, err := c.SignalResource(ctx, &cloudformation.SignalResourceInput{StackName: aws.String("eksctl-c1-nodegroup-ng1"),
			LogicalResourceId: aws.String("NodeGroup"), UniqueId: aws.String(id), Status: status})
		return err
	}
	if err := send("i-0000000000000000a", cfntypes.ResourceSignalStatusFailure); err != nil {
		t.Fatal(err)
	}
	if err := send("i-0000000000000000b", cfntypes.ResourceSignalStatusSuccess); err != nil {
		t.Fatal(err)
	}
	// The first instance's bootstrap ran again and succeeded.
	if err := send("i-0000000000000000a", cfntypes.ResourceSignalStatusSuccess); err != nil {
		t.Fatal(err)
	}
	err := send("i-0000000000000000c", "MAYBE")
	if code, status := awstest.APICode(t, err); code != "ValidationError" || status != http.StatusBadRequest || !strings.Contains(err.Error(), "[SUCCESS, FAILURE]") {
		t.Errorf("bad status: %v", err)
	}
	// cfn-signal without credentials signs with the instance identity document.
	form := url.Values{"Action": {"SignalResource"}, "Version": {"2010-05-15"}, "StackName": {"s2"}, "LogicalResourceId": {"NodeGroup"},
		"UniqueId": {"i-0000000000000000d"}, "Status": {"SUCCESS"}}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "CFN_V1 ZG9j:c2ln")
	w := httptest.NewRecorder()
	cf.ServeHTTP(w, req)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<SignalResourceResponse") {
		t.Errorf("cfn-signal's request: %d %s", w.Code, w.Body)
	}
	req = httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	cf.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "<Code>InvalidClientTokenId</Code>") {
		t.Errorf("unsigned request: %d %s", w.Code, w.Body)
	}

	got := cf.Signals()
	want := []Signal{
		{StackName: "eksctl-c1-nodegroup-ng1", LogicalResourceID: "NodeGroup", UniqueID: "i-0000000000000000a", Status: "SUCCESS"},
		{StackName: "eksctl-c1-nodegroup-ng1", LogicalResourceID: "NodeGroup", UniqueID: "i-0000000000000000b", Status: "SUCCESS"},
		{StackName: "s2", LogicalResourceID: "NodeGroup", UniqueID: "i-0000000000000000d", Status: "SUCCESS"},
	}
	if len(got) != len(want) {
		t.Fatalf("signals %+v", got)
	}
	for i := range want {
		g := got[i]
		if g.Time.IsZero() {
			t.Errorf("signal %d has no time", i)
		}
		g.Time = want[i].Time
		if g != want[i] {
			t.Errorf("signal %d = %+v, want %+v", i, g, want[i])
		}
	}
}
