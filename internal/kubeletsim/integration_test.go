package kubeletsim

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// instance is one simulated node and the instance the inventory knows behind it.
type instance struct {
	node, id, ip string
	// inventoryIP, when set, is the instance's address in the inventory; ip is the one
	// the node claims.
	inventoryIP string
}

func simNode(n int) instance {
	return instance{node: fmt.Sprintf("ip-198-18-%d-%d.local.internal", n/240, 10+n%240), id: fmt.Sprintf("i-0%016x", n), ip: fmt.Sprintf("198.18.%d.%d", n/240, 10+n%240)}
}

// simCluster is the cluster's name and simNodeRole the simulated instances' role, which
// a NodeAccessEntry maps (startControlPlane).
const (
	simCluster  = "sim"
	simNodeRole = "arn:aws:iam::111122223333:role/nodes"
)

// writeInventory writes the file inventory nodejoin-controller checks serving CSRs against.
func writeInventory(t testing.TB, path string, insts ...instance) {
	t.Helper()
	m := map[string]*inventory.Instance{}
	for _, in := range insts {
		ip := in.ip
		if in.inventoryIP != "" {
			ip = in.inventoryIP
		}
		// An instance of node group "workers" of cluster "sim" with a node role: a
		// bootstrap token of "workers" joins only such an instance.
		m[in.node] = &inventory.Instance{ID: in.id, State: "running", PrivateDNSName: in.node, DNSNames: []string{in.node}, IPs: []netip.Addr{netip.MustParseAddr(ip)},
			Role: "nodes", RoleARN: simNodeRole, Tags: map[string]string{csr.NodeGroupTag: "workers", csr.ClusterTagPrefix + simCluster: "owned"}}
	}
	data, err := inventory.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// controlPlane is a real kube-apiserver with nodejoin-controller's CSR approver and
// signer running in this process against a file inventory.
type controlPlane struct {
	env       *testenv.Env
	inventory string
	logs      *testenv.SyncBuffer
	caPEM     []byte
}

// startWithOneNode starts a control plane whose inventory holds one running instance,
// and mints a bootstrap token of node group "workers" for it.
func startWithOneNode(t *testing.T) (*controlPlane, instance, string) {
	t.Helper()
	cp := startControlPlane(t)
	in := simNode(1)
	writeInventory(t, cp.inventory, in)
	token, err := bootstraptoken.Mint(t.Context(), cp.env.Client, "workers", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp, in, token
}

// startControlPlane starts the API server and the manager: RBAC installed, CSRs
// approved against the file inventory and signed by the cluster CA.
func startControlPlane(t testing.TB) *controlPlane {
	t.Helper()
	env := testenv.Start(t)
	cp := &controlPlane{env: env, inventory: filepath.Join(t.TempDir(), "inventory.json"), logs: &testenv.SyncBuffer{}, caPEM: env.Cluster.CA().CertPEM()}
	writeInventory(t, cp.inventory)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	cfg := manager.Config{
		REST:                 env.Config,
		Log:                  slog.New(slog.NewTextHandler(cp.logs, nil)),
		Signer:               &csr.Signer{CA: env.Cluster.CA()},
		Nodes:                &inventory.File{Path: cp.inventory},
		ClusterName:          simCluster,
		InstallRBAC:          true,
		InstallCRDs:          true,
		TokenCleanupInterval: -1,
		OnStarted:            func() { close(started) },
	}
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", cp.logs.String())
		}
	})
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("manager: %v\n%s", err, cp.logs.String())
	}
	entry := &nodejoinv1alpha1.NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: "nodes"},
		Spec: nodejoinv1alpha1.NodeAccessEntrySpec{PrincipalARN: simNodeRole, Type: nodejoinv1alpha1.AccessEntryEC2Linux}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(entry)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(nodejoinv1alpha1.APIVersion)
	u.SetKind(nodejoinv1alpha1.NodeAccessEntryKind)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the nodes' NodeAccessEntry: %v", err)
	}
	return cp
}

// sims runs simulated nodes for a test and stops them when it ends.
type sims struct {
	t      testing.TB
	ctx    context.Context
	cancel context.CancelFunc
	logs   testenv.SyncBuffer
	mu     sync.Mutex
	all    []*Kubelet
}

func newSims(t testing.TB) *sims {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sims{t: t, ctx: ctx, cancel: cancel}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("kubelet log:\n%s", s.logs.String())
		}
	})
	return s
}

// stop stops every node and checks that each stopped cleanly.
func (s *sims) stop() {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.all {
		if err := k.Wait(); err != nil {
			s.t.Errorf("node %s: %v", k.Name(), err)
		}
		if st := k.Status(); st.Phase != PhaseStopped {
			s.t.Errorf("node %s ended in phase %s", k.Name(), st.Phase)
		}
	}
	s.all = nil
}

func (s *sims) start(cp *controlPlane, in instance, change func(*Config)) *Kubelet {
	s.t.Helper()
	cfg := Config{
		NodeName: in.node, InternalIP: in.ip, ProviderID: "aws:///us-west-2a/" + in.id,
		InstanceType: "m5.large", Zone: "us-west-2a", Region: "us-west-2",
		Labels: map[string]string{"eks.amazonaws.com/nodegroup": "workers"},
		Server: cp.env.Config.Host, CAData: cp.caPEM,
		Log: slog.New(slog.NewTextHandler(&s.logs, nil)),
	}
	if change != nil {
		change(&cfg)
	}
	k, err := Start(s.ctx, cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.all = append(s.all, k)
	s.mu.Unlock()
	return k
}

// eventually polls cond every 100ms until it holds, failing the test after a generous
// minute (a bound against hanging, not a performance assertion).
func eventually(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond() }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// joined reports whether the node is registered, Ready and has its serving certificate.
func joined(k *Kubelet) bool {
	st := k.Status()
	return st.Phase == PhaseRunning && st.Registered && st.Ready && st.ServingCertificate.State == CSRIssued
}

func condition(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

func parseCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// whoami asks the API server who a configuration's credentials are.
func whoami(t testing.TB, cfg *rest.Config) authenticationv1.UserInfo {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo
}

// csrsOf returns the CSRs of one signer whose request names the node.
func csrsOf(t testing.TB, client kubernetes.Interface, node, signer string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		req, err := csr.ParseRequest(c.Spec.Request)
		if err == nil && c.Spec.SignerName == signer && req.Subject.CommonName == "system:node:"+node {
			out = append(out, c)
		}
	}
	return out
}

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
