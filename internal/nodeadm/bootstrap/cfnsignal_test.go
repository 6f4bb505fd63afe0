package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	localcfn "github.com/nodejoin/nodejoin/internal/localaws/cloudformation"
	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/resource"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

func signalReq() *SignalRequest {
	return &SignalRequest{
		Signal:     userdata.Signal{Part: "user data part 2", Line: 2, Stack: "ng-stack", Resource: "NodeGroup", ExitCode: "$?"},
		InstanceID: "i-0123456789abcdef0", Region: "us-west-2", NodeName: "ip-10-0-0-5.us-west-2.compute.internal",
	}
}

// madeOnly is a resource type whose resources are made at once: what matters here is
// the stack engine's wait for the resource's signals, not what it is.
type madeOnly struct{}

func (madeOnly) Create(context.Context, *resource.Call) (resource.Result, error) {
	return resource.Result{PhysicalID: "lt-0123"}, nil
}

func (madeOnly) Update(_ context.Context, _ *resource.Call, old resource.Result, _ map[string]any) (resource.Result, error) {
	return old, nil
}

func (madeOnly) Delete(context.Context, *resource.Call, resource.Result) error { return nil }

// waitingTemplate is a stack whose NodeGroup waits for one signal, as a node group's
// CreationPolicy makes it.
const waitingTemplate = `
Resources:
  NodeGroup:
    Type: AWS::EC2::LaunchTemplate
    CreationPolicy:
      ResourceSignal: {Count: 1, Timeout: PT10M}
`

// waitingCFN serves the local CloudFormation, with stack ng-stack waiting for its
// NodeGroup's signal, behind fail (which may answer first), and returns its URL.
func waitingCFN(t *testing.T, fail func(w http.ResponseWriter) bool) (*localcfn.CloudFormation, string) {
	t.Helper()
	cf := localcfn.New().WithEngine(t.Context(), localcfn.EngineConfig{Provisioners: map[string]resource.Provisioner{"AWS::EC2::LaunchTemplate": madeOnly{}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("Action") == "SignalResource" && fail != nil && fail(w) {
			return
		}
		cf.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	client := cloudformation.New(cloudformation.Options{Region: "us-west-2", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	if _, err := client.CreateStack(t.Context(), &cloudformation.CreateStackInput{StackName: aws.String("ng-stack"), TemplateBody: aws.String(waitingTemplate)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, _ := cf.Stacks().Get("ng-stack")
		if len(st.Resources) == 1 && st.Resources[0].PhysicalID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stack's NodeGroup never waited for signals")
		}
	}
	return cf, srv.URL
}

// localCFN is waitingCFN and an SDK client of it, as nodeadm makes one.
func localCFN(t *testing.T, fail func(w http.ResponseWriter) bool) (*localcfn.CloudFormation, SignalAPI) {
	t.Helper()
	cf, url := waitingCFN(t, fail)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDINSTANCEROLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "token")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	req := signalReq()
	req.Signal.URL = url
	api, err := NewSignalAPI(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return cf, api
}

func TestSignalSuccessAfterReady(t *testing.T) {
	cf, api := localCFN(t, nil)
	var out bytes.Buffer
	s := &Signaller{Root: t.TempDir(), API: api, Out: &out}
	ready := func(context.Context) error { return nil }
	if err := s.WaitAndSend(context.Background(), signalReq(), ready, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := cf.Signals()
	if len(got) != 1 || got[0].Status != "SUCCESS" || got[0].UniqueID != "i-0123456789abcdef0" || got[0].StackName != "ng-stack" || got[0].LogicalResourceID != "NodeGroup" {
		t.Fatalf("signals %+v", got)
	}
	// Once per boot: a second send is refused by the marker.
	if err := s.Send(context.Background(), signalReq(), errors.New("late")); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "SUCCESS" {
		t.Fatalf("signals after a second send %+v", got)
	}
	if !strings.Contains(out.String(), "already sent this boot") {
		t.Errorf("output %q", out.String())
	}
}

func TestSignalFailureWhenNotReady(t *testing.T) {
	cf, api := localCFN(t, nil)
	var out bytes.Buffer
	s := &Signaller{Root: t.TempDir(), API: api, Out: &out}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: signalReq().NodeName},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}}}})
	ready := func(ctx context.Context) error {
		for {
			ok, why := NodeReady(ctx, client, signalReq().NodeName)
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return errors.New(why)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if err := s.WaitAndSend(context.Background(), signalReq(), ready, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "FAILURE" {
		t.Fatalf("signals %+v", got)
	}
	want := "cfn-signal: FAILURE: node ip-10-0-0-5.us-west-2.compute.internal not Ready within 100ms: Node ip-10-0-0-5.us-west-2.compute.internal Ready=False: KubeletNotReady container runtime network not ready\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output %q, want the line %q", out.String(), want)
	}
}

func TestSignalRetries5xx(t *testing.T) {
	var calls atomic.Int32
	cf, api := localCFN(t, func(w http.ResponseWriter) bool {
		if calls.Add(1) > 2 {
			return false
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	s := &Signaller{Root: t.TempDir(), API: api, Out: &bytes.Buffer{}}
	if err := s.Send(context.Background(), signalReq(), nil); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3 (two 503s retried)", n)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "SUCCESS" {
		t.Fatalf("signals %+v", got)
	}
}

func TestInitFailureSignalsFailure(t *testing.T) {
	cf, api := localCFN(t, nil)
	var out bytes.Buffer
	req := signalReq()
	st := &initState{
		loaded: &Loaded{Results: []*userdata.Result{{Signal: &req.Signal}}},
		md:     &Metadata{InstanceID: req.InstanceID, Region: "us-west-2", PrivateDNSName: req.NodeName},
	}
	o := &SignalOptions{Mode: SignalDetach, Timeout: time.Minute, API: api}
	root := t.TempDir()
	initErr := errors.New("files rendered: kubelet config:\n  maxPods: must be positive")
	if err := o.after(context.Background(), root, st, initErr, false, &out); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "FAILURE" {
		t.Fatalf("signals %+v", got)
	}
	if want := "cfn-signal: FAILURE: files rendered: kubelet config: maxPods: must be positive\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestDetachThenSignalCommand(t *testing.T) {
	cf, api := localCFN(t, nil)
	var out bytes.Buffer
	req := signalReq()
	st := &initState{
		loaded: &Loaded{Results: []*userdata.Result{{Signal: &req.Signal}}},
		md:     &Metadata{InstanceID: req.InstanceID, Region: "us-west-2", PrivateDNSName: req.NodeName},
	}
	root := t.TempDir()
	if err := (&SignalOptions{Mode: SignalDetach, Timeout: time.Minute, API: api}).after(context.Background(), root, st, nil, false, &out); err != nil {
		t.Fatal(err)
	}
	if len(cf.Signals()) != 0 {
		t.Fatal("detach sent a signal")
	}
	var name string
	cmd := &SignalCommand{Root: root, Timeout: time.Minute, API: api, Ready: func(context.Context) error { name = "called"; return nil }}
	if err := cmd.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "SUCCESS" || name == "" {
		t.Fatalf("signals %+v", got)
	}
	// Nothing saved: nothing to send, and no error.
	out.Reset()
	if err := (&SignalCommand{Root: t.TempDir(), Timeout: time.Minute, API: api}).Run(context.Background(), &out); err != nil || !strings.Contains(out.String(), "nothing to send") {
		t.Fatalf("err %v, output %q", err, out.String())
	}
}

func TestNodeReady(t *testing.T) {
	node := func(status corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	}
	tests := []struct {
		name string
		objs []*corev1.Node
		ok   bool
		why  string
	}{
		{"ready", []*corev1.Node{node(corev1.ConditionTrue)}, true, ""},
		{"not ready", []*corev1.Node{node(corev1.ConditionFalse)}, false, "Node n1 Ready=False"},
		{"not registered", nil, false, "reading Node n1"},
		{"no condition", []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, false, "no Ready condition yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, n := range tt.objs {
				_, _ = client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
			}
			ok, why := NodeReady(context.Background(), client, "n1")
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Errorf("NodeReady = %v, %q; want %v, %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}

func TestOneLineReason(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct{ in, want string }{
		{"a\n  b\tc", "a b c"},
		{"", "the join failed"},
	}
	for _, tt := range tests {
		if got := OneLineReason(tt.in); got != tt.want {
			t.Errorf("OneLineReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := OneLineReason(long); len(got) > maxReason || !strings.HasSuffix(got, "…") || !utf8Valid(got) {
		t.Errorf("long reason: %d bytes", len(got))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// TestBrokenUserDataSignalsFailure: user data whose bootstrap.sh call does not
// translate still names the resource to signal, so the stack hears why.
func TestBrokenUserDataSignalsFailure(t *testing.T) {
	cf, api := localCFN(t, nil)
	path := filepath.Join(t.TempDir(), "user-data.sh")
	script := "#!/bin/bash\n/etc/eks/bootstrap.sh c1 --no-such-flag x\n/opt/aws/bin/cfn-signal --exit-code $? --stack ng-stack --resource NodeGroup --region us-west-2\n"
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	sources := []string{"file://" + path}
	loaded, loadErr := Load(context.Background(), sources, Environment{})
	if loadErr == nil || loaded != nil {
		t.Fatalf("Load = %v, %v; want a failure", loaded, loadErr)
	}
	req := signalReq()
	st := &initState{sources: sources, md: &Metadata{InstanceID: req.InstanceID, Region: "us-west-2", PrivateDNSName: req.NodeName}}
	var out bytes.Buffer
	if err := (&SignalOptions{Mode: SignalDetach, Timeout: time.Minute, API: api}).after(context.Background(), t.TempDir(), st, loadErr, false, &out); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "FAILURE" || got[0].StackName != "ng-stack" {
		t.Fatalf("signals %+v", got)
	}
	if line, _, _ := strings.Cut(out.String(), "\n"); !strings.HasPrefix(line, FailurePrefix) || !strings.Contains(line, "--no-such-flag") {
		t.Errorf("first line %q, want the FAILURE line with the reason", line)
	}
}

func TestNoSignalWithoutAJoin(t *testing.T) {
	cf, api := localCFN(t, nil)
	req := signalReq()
	st := &initState{
		loaded: &Loaded{Results: []*userdata.Result{{Signal: &req.Signal}}},
		md:     &Metadata{InstanceID: req.InstanceID, Region: "us-west-2", PrivateDNSName: req.NodeName},
	}
	called := false
	ready := func(context.Context) error { called = true; return errors.New("not expected") }
	tests := []struct {
		name    string
		mode    string
		skipRun bool
		sent    bool
		want    string
	}{
		{"off", SignalOff, false, false, ""},
		{"run phase skipped", SignalWait, true, false, "init skipped the run phase"},
		{"already sent this boot", SignalWait, false, true, "already sent this boot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.sent {
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(SignalSentPath)), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, SignalSentPath), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			o := &SignalOptions{Mode: tt.mode, Timeout: time.Minute, API: api, Ready: ready}
			if err := o.after(context.Background(), root, st, nil, tt.skipRun, &out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output %q lacks %q", out.String(), tt.want)
			}
		})
	}
	if called || len(cf.Signals()) != 0 {
		t.Errorf("waited %v, signals %+v; want neither", called, cf.Signals())
	}
}

// TestSignalEndpointFromEnvironment: without --url, the SDK's
// AWS_ENDPOINT_URL_CLOUDFORMATION (which sandbox instances get as AWS_ENDPOINT_URL)
// names the endpoint.
func TestSignalEndpointFromEnvironment(t *testing.T) {
	cf, url := waitingCFN(t, nil)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDINSTANCEROLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", url)
	s := &Signaller{Root: t.TempDir(), Out: &bytes.Buffer{}}
	if err := s.Send(context.Background(), signalReq(), nil); err != nil {
		t.Fatal(err)
	}
	if got := cf.Signals(); len(got) != 1 || got[0].Status != "SUCCESS" {
		t.Fatalf("signals %+v", got)
	}
}
