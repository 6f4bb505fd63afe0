package csr_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// run runs c in a controller-runtime manager with 4 workers until ctx ends; with an
// identity, only while that replica holds the kube-system/nodejoin-controller Lease.
func run(ctx context.Context, env *testenv.Env, c *csr.Controller, identity string) error {
	opts := ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if identity != "" {
		opts.LeaderElection, opts.LeaderElectionNamespace, opts.LeaderElectionID = true, "kube-system", rbac.LeaseName
		opts.LeaderElectionResourceLockInterface = &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: rbac.LeaseName},
			Client:     env.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		}
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(3*time.Second), ptr.To(2*time.Second), ptr.To(250*time.Millisecond)
		opts.LeaderElectionReleaseOnCancel = true
	}
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return err
	}
	c.Recorder = mgr.GetEventRecorder("nodejoin-controller")
	if err := c.SetupWithManager(mgr, 4); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

const node = "ip-198-18-0-11.us-west-2.compute.internal"

type staticInventory map[string]*inventory.Instance

// The instances of these tests are of node group "workers" of cluster "test", with a
// node role; webNode's is of group "web".
const (
	nodeRoleARN = "arn:aws:iam::111122223333:role/nodes"
	webNode     = "ip-198-18-0-20.us-west-2.compute.internal"
)

var workersTags = map[string]string{csr.NodeGroupTag: "workers", csr.ClusterTagPrefix + "test": "owned"}

// nodeRoles knows nodeRoleARN as a node role.
type nodeRoles struct{}

func (nodeRoles) NodeRole(_ context.Context, inst *inventory.Instance) (string, error) {
	if inst.RoleARN == nodeRoleARN {
		return "test", nil
	}
	return "", nil
}

func (i staticInventory) InstanceForNode(_ context.Context, n string) (*inventory.Instance, error) {
	if inst, ok := i[n]; ok {
		return inst, nil
	}
	return nil, inventory.ErrNotFound
}

func condition(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// The controller against a real kube-apiserver: requests are made by impersonating the
// node or the bootstrap token's user, so the API server fills in the requester.
func TestControllerDecidesAndIssues(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatalf("second rbac.Apply: %v", err)
	}
	c := &csr.Controller{
		Client: env.Client,
		Policy: &csr.Policy{Review: csr.NewAccessReview(env.Client), NodeRegistered: csr.NewNodeRegistered(env.Client), Issued: &csr.ConfigMapRecord{Client: env.Client}, Inventory: staticInventory{node: {
			ID: "i-0aaa", State: "running", DNSNames: []string{node}, IPs: []netip.Addr{netip.MustParseAddr("198.18.0.11")}, RoleARN: nodeRoleARN, Role: "nodes", Tags: workersTags,
		}}, ClusterName: "test", NodeRoles: nodeRoles{}},
		Signer: &csr.Signer{CA: env.Cluster.CA()},
		Log:    slog.New(slog.DiscardHandler),
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, c, "") }()

	kubelet := env.As(t, "system:node:"+node, "system:nodes")
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	testenv.CreateCSR(t, kubelet, "serving-good", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), serving...)
	testenv.CreateCSR(t, kubelet, "serving-other-ip", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.12"), serving...)
	testenv.CreateCSR(t, env.Client, "serving-by-admin", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), serving...)
	// A node cannot even ask for another node's serving certificate: NodeRestriction.
	if _, err := kubelet.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "serving-other-cn"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: testenv.CSR(t, "system:node:ip-198-18-0-12.us-west-2.compute.internal", nil, "198.18.0.12"),
			SignerName: csr.SignerKubeletServing, Usages: serving},
	}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("serving CSR for another node's CN: %v, want Forbidden", err)
	}
	// Bootstrap tokens may ask for a first client certificate per node group.
	if err := rbac.ApplyNodeGroup(ctx, env.Client, "workers", "test"); err != nil {
		t.Fatal(err)
	}
	bootstrap := env.As(t, "system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:workers")
	testenv.CreateCSR(t, bootstrap, "client-first", csr.SignerKubeletClient, testenv.CSR(t, "system:node:"+node, nil), certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)

	good := testenv.Settled(t, env.Client, "serving-good")
	if a := condition(good, certificatesv1.CertificateApproved); a == nil || a.Reason != csr.ReasonApproved || a.Message != csr.MessageServing {
		t.Errorf("serving-good conditions = %+v", good.Status.Conditions)
	}
	block, _ := pem.Decode(good.Status.Certificate)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(env.Cluster.CA().Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: node}); err != nil {
		t.Errorf("issued serving certificate does not verify: %v", err)
	}

	other := testenv.Settled(t, env.Client, "serving-other-ip")
	if d := condition(other, certificatesv1.CertificateDenied); d == nil || d.Reason != csr.ReasonSANs || d.Message != "IP SAN 198.18.0.12 is not an address of instance i-0aaa" || len(other.Status.Certificate) > 0 {
		t.Errorf("serving-other-ip = %+v", other.Status)
	}
	admin := testenv.Settled(t, env.Client, "serving-by-admin")
	if d := condition(admin, certificatesv1.CertificateDenied); d == nil || d.Reason != csr.ReasonNotANode {
		t.Errorf("serving-by-admin = %+v", admin.Status.Conditions)
	}
	client := testenv.Settled(t, env.Client, "client-first")
	if a := condition(client, certificatesv1.CertificateApproved); a == nil || a.Message != csr.MessageClient || len(client.Status.Certificate) == 0 {
		t.Errorf("client-first = %+v", client.Status.Conditions)
	}

	// Events are sent in the background.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := env.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=serving-other-ip"})
		return err == nil && len(events.Items) > 0 && events.Items[0].Reason == csr.ReasonSANs, err
	}); err != nil {
		t.Errorf("no event about the denied CSR: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("controller: %v", err)
	}
}

// Two elected replicas; the leader dies (its context ends without releasing the Lease)
// in the middle of a burst of CSRs. The other takes over: no CSR is left pending and
// none is issued twice.
func TestFailoverDuringABurst(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	issued := map[string]int{}
	newController := func() *csr.Controller {
		return &csr.Controller{
			OnIssued: func(name string) { mu.Lock(); issued[name]++; mu.Unlock() },
			Client:   env.Client,
			Policy: &csr.Policy{Review: csr.NewAccessReview(env.Client), NodeRegistered: csr.NewNodeRegistered(env.Client), Issued: &csr.ConfigMapRecord{Client: env.Client}, Inventory: staticInventory{node: {
				ID: "i-0aaa", State: "running", DNSNames: []string{node}, IPs: []netip.Addr{netip.MustParseAddr("198.18.0.11")}, RoleARN: nodeRoleARN, Role: "nodes", Tags: workersTags,
			}}, MaxServingPerNode: 100}, // one node's burst of 30
			Signer: &csr.Signer{CA: env.Cluster.CA()},
		}
	}
	firstCtx, killFirst := context.WithCancel(ctx)
	defer killFirst()
	first := newController()
	firstDone := make(chan struct{})
	go func() { _ = run(firstCtx, env, first, "first"); close(firstDone) }()
	// Let the first replica win the Lease before the second starts.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "nodejoin-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "first", nil
	}); err != nil {
		t.Fatalf("first replica never led: %v", err)
	}
	secondCtx, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	go func() { _ = run(secondCtx, env, newController(), "second") }()

	kubelet := env.As(t, "system:node:"+node, "system:nodes")
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	const burst = 30
	names := make([]string, burst)
	for i := range burst {
		names[i] = "burst-" + string(rune('a'+i/10)) + string(rune('0'+i%10))
		testenv.CreateCSR(t, kubelet, names[i], csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), serving...)
		if i == burst/3 {
			killFirst()
			<-firstDone
		}
	}
	for _, n := range names {
		c := testenv.Settled(t, env.Client, n)
		if len(c.Status.Certificate) == 0 {
			t.Errorf("%s not issued: %+v", n, c.Status.Conditions)
		}
		mu.Lock()
		count := issued[n]
		mu.Unlock()
		// A replica killed right after its write reached the API server never hears
		// the answer, so a CSR can be issued without a callback; never twice.
		if count > 1 {
			t.Errorf("%s issued %d times", n, count)
		}
	}
}

// approve approves a CSR as the test's administrator, as a person or another
// controller might.
func approve(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	c, err := env.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: "True", Reason: "AdminApproved", Message: "approved by hand",
	})
	if _, err := env.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), name, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The signer trusts no approval: CSRs an administrator approved before the controller
// saw them are decided again at signing. One the policy denies is never signed and ends
// Failed with the policy's reason; one it approves is signed.
func TestSignerRechecksForeignApprovals(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	kubelet := env.As(t, "system:node:"+node, "system:nodes")
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	testenv.CreateCSR(t, kubelet, "approved-other-ip", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.12"), serving...)
	testenv.CreateCSR(t, env.Client, "approved-not-a-node", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), serving...)
	testenv.CreateCSR(t, kubelet, "approved-good", csr.SignerKubeletServing, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), serving...)
	for _, n := range []string{"approved-other-ip", "approved-not-a-node", "approved-good"} {
		approve(t, env, n)
	}
	var mu sync.Mutex
	var issued []string
	c := &csr.Controller{
		Client: env.Client,
		Policy: &csr.Policy{Review: csr.NewAccessReview(env.Client), NodeRegistered: csr.NewNodeRegistered(env.Client), Issued: &csr.ConfigMapRecord{Client: env.Client}, Inventory: staticInventory{node: {
			ID: "i-0aaa", State: "running", DNSNames: []string{node}, IPs: []netip.Addr{netip.MustParseAddr("198.18.0.11")}, RoleARN: nodeRoleARN, Role: "nodes", Tags: workersTags,
		}}},
		Signer:   &csr.Signer{CA: env.Cluster.CA()},
		OnIssued: func(name string) { mu.Lock(); issued = append(issued, name); mu.Unlock() },
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, c, "") }()

	for _, tt := range []struct{ name, reason, msg string }{
		{"approved-other-ip", csr.ReasonSANs, "IP SAN 198.18.0.12 is not an address of instance i-0aaa"},
		{"approved-not-a-node", csr.ReasonNotANode, "is not a node (want system:node:<name> in group system:nodes)"},
	} {
		got := testenv.Settled(t, env.Client, tt.name)
		f := condition(got, certificatesv1.CertificateFailed)
		if f == nil || f.Reason != tt.reason || !strings.Contains(f.Message, tt.msg) || len(got.Status.Certificate) > 0 {
			t.Errorf("%s: status %+v, want Failed %s %q and no certificate", tt.name, got.Status.Conditions, tt.reason, tt.msg)
		}
	}
	if good := testenv.Settled(t, env.Client, "approved-good"); len(good.Status.Certificate) == 0 {
		t.Errorf("approved-good not issued: %+v", good.Status.Conditions)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("controller: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(issued) != 1 || issued[0] != "approved-good" {
		t.Errorf("issued %v, want only approved-good", issued)
	}
}

// A bootstrap token cannot take over a node: its client CSR is approved only for a
// running instance whose Node is not registered and that never got a client
// certificate through a bootstrap token before (recorded in a ConfigMap, so a restart
// keeps it).
func TestBootstrapTokenCannotTakeOverANode(t *testing.T) {
	if rbac.IssuedConfigMapName != csr.IssuedConfigMapName {
		t.Fatalf("rbac grants ConfigMap %s, the controller writes %s", rbac.IssuedConfigMapName, csr.IssuedConfigMapName)
	}
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := rbac.Apply(ctx, env.Client, nil, "test"); err != nil {
		t.Fatal(err)
	}
	const registered = "ip-198-18-0-12.us-west-2.compute.internal"
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: registered}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv := staticInventory{
		node:       {ID: "i-0aaa", State: "running", DNSNames: []string{node}, RoleARN: nodeRoleARN, Role: "nodes", Tags: workersTags},
		registered: {ID: "i-0bbb", State: "running", DNSNames: []string{registered}, RoleARN: nodeRoleARN, Role: "nodes", Tags: workersTags},
		webNode: {ID: "i-0web", State: "running", DNSNames: []string{webNode}, RoleARN: nodeRoleARN, Role: "nodes",
			Tags: map[string]string{csr.NodeGroupTag: "web", csr.ClusterTagPrefix + "test": "owned"}},
	}
	c := &csr.Controller{
		Client: env.Client,
		Policy: &csr.Policy{Review: csr.NewAccessReview(env.Client), NodeRegistered: csr.NewNodeRegistered(env.Client),
			Issued: &csr.ConfigMapRecord{Client: env.Client}, Inventory: inv, ClusterName: "test", NodeRoles: nodeRoles{}},
		Signer: &csr.Signer{CA: env.Cluster.CA()},
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, c, "") }()

	if err := rbac.ApplyNodeGroup(ctx, env.Client, "workers", "test"); err != nil {
		t.Fatal(err)
	}
	bootstrap := env.As(t, "system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:workers")
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	testenv.CreateCSR(t, bootstrap, "takeover-registered", csr.SignerKubeletClient, testenv.CSR(t, "system:node:"+registered, nil), usages...)
	testenv.CreateCSR(t, bootstrap, "first-join", csr.SignerKubeletClient, testenv.CSR(t, "system:node:"+node, nil), usages...)
	if got := testenv.Settled(t, env.Client, "first-join"); len(got.Status.Certificate) == 0 {
		t.Fatalf("first-join not issued: %+v", got.Status.Conditions)
	}
	testenv.CreateCSR(t, bootstrap, "second-join", csr.SignerKubeletClient, testenv.CSR(t, "system:node:"+node, nil), usages...)
	// The groups come from the API server, which read them from the token: a token of
	// group "workers" gets nothing for an instance of group "web".
	testenv.CreateCSR(t, bootstrap, "other-group", csr.SignerKubeletClient, testenv.CSR(t, "system:node:"+webNode, nil), usages...)
	for _, tt := range []struct{ name, reason, msg string }{
		{"takeover-registered", csr.ReasonAlreadyJoined, "node " + registered + " is already registered; a bootstrap token cannot take it over"},
		{"second-join", csr.ReasonAlreadyJoined, "instance i-0aaa of node " + node + " already got a client certificate through a bootstrap token (CSR first-join)"},
		{"other-group", csr.ReasonTokenGroup, `instance i-0web is tagged for node group "web", the token is for "workers"`},
	} {
		got := testenv.Settled(t, env.Client, tt.name)
		if d := condition(got, certificatesv1.CertificateDenied); d == nil || d.Reason != tt.reason || d.Message != tt.msg {
			t.Errorf("%s: %+v, want Denied %s %q", tt.name, got.Status.Conditions, tt.reason, tt.msg)
		}
	}
	cm, err := env.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, csr.IssuedConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data["i-0aaa"] != "first-join" {
		t.Errorf("issued record = %v, %v; want i-0aaa: first-join", cm, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("controller: %v", err)
	}
}
