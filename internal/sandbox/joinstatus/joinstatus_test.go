package joinstatus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodejoin/nodejoin/internal/cloudnode"
)

const node = "ip-198-18-0-11.local.internal"

func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func request(name, signer, user string, req []byte, conds ...certificatesv1.CertificateSigningRequestCondition) certificatesv1.CertificateSigningRequest {
	return certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Username: user, Request: req},
		Status:     certificatesv1.CertificateSigningRequestStatus{Conditions: conds},
	}
}

func states(st []Status) string {
	var b strings.Builder
	for _, s := range st {
		b.WriteString(string(s.Step) + "=" + string(s.State) + ";")
	}
	return b.String()
}

func TestNodeStepsFollowTheJoin(t *testing.T) {
	approved := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Message: "ok"}
	denied := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Reason: "SANNotOwned", Message: "IP SAN 198.18.0.12 is not an address of instance i-0aaa"}
	ready := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status"}}}}
	tainted := ready.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: cloudnode.TaintUninitialized}}
	serving := request("csr-1", certificatesv1.KubeletServingSignerName, "system:node:"+node, nil, approved)
	serving.Status.Certificate = []byte("cert")

	empty := &Snapshot{Nodes: map[string]*corev1.Node{}}
	if got := states(empty.NodeSteps(node, false, false)); got != "authenticated=pending;Node registered=pending;Node initialized=pending;serving CSR approved=pending;serving certificate issued=pending;network ready=pending;Ready=pending;" {
		t.Errorf("nothing yet: %s", got)
	}
	if got := states(empty.NodeSteps(node, false, true)); !strings.HasPrefix(got, "authenticated=done;") {
		t.Errorf("after the webhook accepted a token: %s", got)
	}
	all := &Snapshot{Nodes: map[string]*corev1.Node{node: ready}, CSRs: []certificatesv1.CertificateSigningRequest{serving}}
	for _, s := range all.NodeSteps(node, false, false) {
		if s.State != Done {
			t.Errorf("joined node: %s is %s", s.Step, s.State)
		}
	}
	deniedSnap := &Snapshot{Nodes: map[string]*corev1.Node{node: tainted}, CSRs: []certificatesv1.CertificateSigningRequest{
		request("csr-2", certificatesv1.KubeletServingSignerName, "system:node:"+node, nil, denied)},
		NotInitialized: map[string]string{node: "address 198.18.0.12 (InternalIP) that the kubelet reports is not an address of instance i-0aaa"}}
	st := deniedSnap.NodeSteps(node, false, false)
	if got := states(st); got != "authenticated=done;Node registered=done;Node initialized=failed;serving CSR approved=failed;serving certificate issued=pending;network ready=done;Ready=done;" {
		t.Errorf("refused node: %s", got)
	}
	if !strings.Contains(st[3].Detail, "CSR csr-2 denied: IP SAN 198.18.0.12 is not an address of instance i-0aaa") {
		t.Errorf("denial detail %q", st[3].Detail)
	}
	// Until the network add-on writes the CNI configuration, the runtime's network is
	// not ready, and neither is the Node.
	noNetwork := ready.DeepCopy()
	noNetwork.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}
	waiting := &Snapshot{Nodes: map[string]*corev1.Node{node: noNetwork}, CSRs: []certificatesv1.CertificateSigningRequest{serving}}
	if got := states(waiting.NodeSteps(node, false, false)); !strings.HasSuffix(got, "serving certificate issued=done;network ready=pending;Ready=pending;") {
		t.Errorf("no network yet: %s", got)
	}
	// An instance not yet running is a wait, not a failure.
	deniedSnap.NotInitialized[node] = "instance i-0aaa is pending, not running"
	if st := deniedSnap.NodeSteps(node, false, false); st[2].State != Pending {
		t.Errorf("pending instance: %s", st[2].State)
	}
}

// In bootstrap-token mode, the client CSR a bootstrap user sends for the node counts as
// the node's authentication; another node's does not.
func TestBootstrapClientCSRIsMatchedBySubject(t *testing.T) {
	approved := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved}
	mine := request("node-csr-a", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", csrPEM(t, "system:node:"+node), approved)
	mine.Status.Certificate = []byte("cert")
	other := request("node-csr-b", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", csrPEM(t, "system:node:ip-198-18-0-12.local.internal"))
	s := &Snapshot{Nodes: map[string]*corev1.Node{}, CSRs: []certificatesv1.CertificateSigningRequest{mine, other}}
	st := s.NodeSteps(node, true, false)
	if got := states(st[:2]); got != "authenticated=done;client certificate issued=done;" {
		t.Errorf("bootstrap steps: %s", got)
	}
	if !strings.Contains(st[0].Detail, "node-csr-a") {
		t.Errorf("matched %q", st[0].Detail)
	}
	s.CSRs = []certificatesv1.CertificateSigningRequest{other}
	if st := s.NodeSteps(node, true, false); st[0].State != Pending {
		t.Errorf("another node's client CSR counted: %+v", st[0])
	}
}

func TestTrackerKeepsTheFirstTime(t *testing.T) {
	tr := NewTracker()
	t0 := metav1.Now().Time
	if !tr.Mark(node, StepReady, t0) || tr.Mark(node, StepReady, t0.Add(1)) {
		t.Error("Mark reported the wrong first time")
	}
	if at, ok := tr.At(node, StepReady); !ok || !at.Equal(t0) {
		t.Errorf("At = %v, %v", at, ok)
	}
}

func TestNewestNotInitializedReasonWins(t *testing.T) {
	older := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	newer := older.Add(time.Minute)
	event := func(name, msg string, mutate func(*corev1.Event)) *corev1.Event {
		e := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node},
			Reason:         "NodeNotInitialized",
			Message:        msg,
		}
		mutate(e)
		return e
	}
	for name, events := range map[string][]*corev1.Event{
		// events.k8s.io writers leave LastTimestamp empty and set EventTime.
		"event time after last timestamp": {
			event("b", "new reason", func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(newer) }),
			event("a", "old reason", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(older) }),
		},
		"series observed later": {
			event("a", "new reason", func(e *corev1.Event) {
				e.EventTime = metav1.NewMicroTime(older.Add(-time.Hour))
				e.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(newer)}
			}),
			event("b", "old reason", func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(older) }),
		},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(events[0], events[1])
			s, err := Take(context.Background(), client)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.NotInitialized[node]; got != "new reason" {
				t.Errorf("reason = %q, want the newest event's", got)
			}
		})
	}
}

func TestInstanceIDFromProviderID(t *testing.T) {
	for _, tc := range []struct{ providerID, want string }{
		{"aws:///us-west-2a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws:///i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"", ""},
		{"kind://docker/kind/kind-worker", ""},
		{"aws:///us-west-2a/", ""},
	} {
		if got := InstanceID(tc.providerID); got != tc.want {
			t.Errorf("InstanceID(%q) = %q, want %q", tc.providerID, got, tc.want)
		}
	}
}

// A Node counts for the instance its providerID names: an instance that took over the
// name of a terminated one is not Ready because of the old instance's Node.
func TestInstanceStepsMatchTheNodeByProviderID(t *testing.T) {
	readyNode := func(providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	const ready = "authenticated=done;Node registered=done;Node initialized=done;serving CSR approved=pending;serving certificate issued=pending;network ready=done;Ready=done;"
	for _, tc := range []struct {
		name, providerID, instance, want, detail string
	}{
		{"its own Node", "aws:///us-west-2a/i-new", "i-new", ready, ""},
		{"no providerID: by name", "", "i-new", ready, ""},
		{"no instance given: by name", "aws:///us-west-2a/i-old", "", ready, ""},
		{"the old instance's Node", "aws:///us-west-2a/i-old", "i-new",
			"authenticated=pending;Node registered=pending;Node initialized=pending;serving CSR approved=pending;serving certificate issued=pending;network ready=pending;Ready=pending;",
			"Node " + node + " is instance i-old's (its providerID), not this instance's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Nodes: map[string]*corev1.Node{node: readyNode(tc.providerID)}}
			st := s.InstanceSteps(node, tc.instance, false, false)
			if got := states(st); got != tc.want {
				t.Errorf("steps: %s\nwant        %s", got, tc.want)
			}
			if tc.detail != "" && st[1].Detail != tc.detail {
				t.Errorf("registered step: %q, want %q", st[1].Detail, tc.detail)
			}
		})
	}
}
