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

// SignalResource checks its input before anything else, and without a stack engine
// there is no stack to signal; cfn-signal's CFN_V1 authorization gets the same answer
// as SigV4, and an unsigned request none.
func TestCloudFormationSignalResourceWithoutStacks(t *testing.T) {
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
	err := send("i-0000000000000000a", cfntypes.ResourceSignalStatusSuccess)
	if code, status := awstest.APICode(t, err); code != "ValidationError" || status != http.StatusBadRequest || !strings.Contains(err.Error(), "Stack with id eksctl-c1-nodegroup-ng1 does not exist") {
		t.Errorf("a signal for no stack: %v", err)
	}
	err = send("i-0000000000000000c", "MAYBE")
	if code, status := awstest.APICode(t, err); code != "ValidationError" || status != http.StatusBadRequest || !strings.Contains(err.Error(), "[SUCCESS, FAILURE]") {
		t.Errorf("bad status: %v", err)
	}
	form := url.Values{"Action": {"SignalResource"}, "Version": {"2010-05-15"}, "StackName": {"s2"}, "LogicalResourceId": {"NodeGroup"},
		"UniqueId": {"i-0000000000000000d"}, "Status": {"SUCCESS"}}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "CFN_V1 ZG9j:c2ln")
	w := httptest.NewRecorder()
	cf.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Stack with id s2 does not exist") {
		t.Errorf("cfn-signal's request: %d %s", w.Code, w.Body)
	}
	req = httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	cf.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "<Code>InvalidClientTokenId</Code>") {
		t.Errorf("unsigned request: %d %s", w.Code, w.Body)
	}
	if got := cf.Signals(); len(got) != 0 {
		t.Errorf("signals taken: %+v", got)
	}
	if got := cf.RefusedSignals()["no-such-stack"]; got != 2 {
		t.Errorf("refusals counted: %d", got)
	}
}
