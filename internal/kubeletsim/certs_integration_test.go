package kubeletsim

import (
	"context"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/rbac"
)

// Three nodes join with a node group's bootstrap token, as kubelets do with TLS
// bootstrapping, against the real kube-apiserver and nodejoin's approver and signer.
func TestJoinWithBootstrapTokens(t *testing.T) {
	cp := startControlPlane(t)
	admin := cp.env.Client
	ctx := t.Context()
	nodes := []instance{simNode(1), simNode(2), simNode(3)}
	// Node 4, started later, is a running instance too: every client CSR needs one.
	writeInventory(t, cp.inventory, append(slices.Clone(nodes), simNode(4))...)
	token, err := bootstraptoken.Mint(ctx, admin, "workers", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tokenID := strings.SplitN(token, ".", 2)[0]
	s := newSims(t)
	var ks []*Kubelet
	for _, in := range nodes {
		ks = append(ks, s.start(cp, in, func(c *Config) { c.BootstrapToken = token; c.LeaseDuration = 4 * time.Second }))
	}
	for _, k := range ks {
		eventually(t, "node "+k.Name()+" joined", func() (bool, error) { return joined(k), nil })
	}

	for i, k := range ks {
		in := nodes[i]
		st := k.Status()
		if !st.Authenticated || st.ClientCertificate.State != CSRIssued || st.ClientCertificate.Issued != 1 || st.ServingCertificate.Issued != 1 || st.LastError != "" {
			t.Errorf("%s status = %+v", in.node, st)
		}
		// The Node, as the kubelet registers it.
		node, err := admin.CoreV1().Nodes().Get(ctx, in.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]string{
			corev1.LabelHostname: in.node, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", corev1.LabelInstanceTypeStable: "m5.large",
			corev1.LabelTopologyZone: "us-west-2a", corev1.LabelTopologyRegion: "us-west-2", "eks.amazonaws.com/nodegroup": "workers",
			addons.SimulatedNodeLabel: "true",
		} {
			if node.Labels[key] != want {
				t.Errorf("%s label %s = %q", in.node, key, node.Labels[key])
			}
		}
		// The node adds no taint; kube-apiserver's TaintNodesByCondition admission adds
		// not-ready, which kube-controller-manager (not running here) would lift.
		if node.Spec.ProviderID != "aws:///us-west-2a/"+in.id || node.Spec.PodCIDR != "" || node.Status.NodeInfo.KubeletVersion != "v1.37.1" ||
			slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key != corev1.TaintNodeNotReady }) {
			t.Errorf("%s spec %+v, kubelet %s", in.node, node.Spec, node.Status.NodeInfo.KubeletVersion)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady")
		}
		if !ready || node.Status.Addresses[0].Address != in.ip || node.Status.Capacity.Pods().Value() != 110 {
			t.Errorf("%s status = %+v", in.node, node.Status)
		}

		// Its Lease, owned by the Node and renewed.
		lease, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, in.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *lease.Spec.HolderIdentity != in.node || *lease.Spec.LeaseDurationSeconds != 4 || len(lease.OwnerReferences) != 1 ||
			lease.OwnerReferences[0].Kind != "Node" || lease.OwnerReferences[0].UID != node.UID {
			t.Errorf("%s lease = %+v", in.node, lease)
		}
		first := lease.Spec.RenewTime.Time
		eventually(t, in.node+" lease renewed", func() (bool, error) {
			l, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, in.node, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime.After(first), err
		})

		// The client certificate: requested with the bootstrap token, approved as a
		// first kubelet client certificate, issued.
		clients := csrsOf(t, admin, in.node, certificatesv1.KubeAPIServerClientKubeletSignerName)
		if len(clients) != 1 {
			t.Fatalf("%s: %d client CSRs", in.node, len(clients))
		}
		cc := clients[0]
		if !strings.HasPrefix(cc.Name, "node-csr-") || cc.Spec.Username != "system:bootstrap:"+tokenID || !slices.Contains(cc.Spec.Groups, "system:bootstrappers:workers") ||
			!slices.Equal(cc.Spec.Usages, []certificatesv1.KeyUsage{"digital signature", "client auth"}) || cc.Name != st.ClientCertificate.CSR {
			t.Errorf("%s client CSR = %s %+v", in.node, cc.Name, cc.Spec)
		}
		if a := condition(&cc, certificatesv1.CertificateApproved); a == nil || a.Message != csr.MessageClient || len(cc.Status.Certificate) == 0 {
			t.Errorf("%s client CSR status = %+v", in.node, cc.Status.Conditions)
		}
		if c := parseCert(t, cc.Status.Certificate); c.Subject.CommonName != "system:node:"+in.node || !slices.Equal(c.Subject.Organization, []string{"system:nodes"}) ||
			!slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
			t.Errorf("%s client certificate = %v %v", in.node, c.Subject, c.ExtKeyUsage)
		}

		// The serving certificate: requested by the node itself, exactly the kubelet's
		// request, approved after the inventory check, issued.
		servings := csrsOf(t, admin, in.node, certificatesv1.KubeletServingSignerName)
		if len(servings) != 1 {
			t.Fatalf("%s: %d serving CSRs", in.node, len(servings))
		}
		sc := servings[0]
		if sc.GenerateName != "csr-" || sc.Spec.Username != "system:node:"+in.node || !slices.Contains(sc.Spec.Groups, "system:nodes") ||
			!slices.Equal(sc.Spec.Usages, []certificatesv1.KeyUsage{"digital signature", "server auth"}) || sc.Spec.ExpirationSeconds != nil {
			t.Errorf("%s serving CSR = %s %+v", in.node, sc.Name, sc.Spec)
		}
		req, err := csr.ParseRequest(sc.Spec.Request)
		if err != nil {
			t.Fatal(err)
		}
		if req.PublicKeyAlgorithm != x509.ECDSA || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) ||
			!slices.Equal(req.DNSNames, []string{in.node}) || len(req.IPAddresses) != 1 || req.IPAddresses[0].String() != in.ip || len(req.EmailAddresses)+len(req.URIs) != 0 {
			t.Errorf("%s serving request = %v DNS %v IP %v", in.node, req.Subject, req.DNSNames, req.IPAddresses)
		}
		if a := condition(&sc, certificatesv1.CertificateApproved); a == nil || a.Reason != csr.ReasonApproved || a.Message != csr.MessageServing {
			t.Errorf("%s serving CSR conditions = %+v", in.node, sc.Status.Conditions)
		}
		cert := parseCert(t, sc.Status.Certificate)
		roots := x509.NewCertPool()
		roots.AddCert(cp.env.Cluster.CA().Cert)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: in.node}); err != nil {
			t.Errorf("%s serving certificate: %v", in.node, err)
		}
		if cert.Subject.CommonName != "system:node:"+in.node || !slices.Equal(cert.DNSNames, []string{in.node}) || cert.IPAddresses[0].String() != in.ip ||
			!slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || !st.ServingCertificate.NotAfter.Equal(cert.NotAfter) {
			t.Errorf("%s serving certificate = %v %v %v %v", in.node, cert.Subject, cert.DNSNames, cert.IPAddresses, cert.ExtKeyUsage)
		}

		// The node acts with its client certificate, as system:node:<name>, and the
		// Node authorizer holds it to its own objects.
		u := whoami(t, k.RESTConfig())
		if u.Username != "system:node:"+in.node || !slices.Contains(u.Groups, "system:nodes") {
			t.Errorf("%s acts as %+v", in.node, u)
		}
		asNode, err := kubernetes.NewForConfig(k.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		other := nodes[(i+1)%len(nodes)].node
		if _, err := asNode.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, other, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s reading %s's lease: %v, want Forbidden", in.node, other, err)
		}
	}

	// A label a kubelet may not set: NodeRestriction forbids the registration, and the
	// node keeps trying, saying why.
	barred := s.start(cp, simNode(4), func(c *Config) {
		c.BootstrapToken = token
		c.Labels = map[string]string{"node-restriction.kubernetes.io/trusted": "true"}
	})
	eventually(t, "forbidden registration reported", func() (bool, error) {
		st := barred.Status()
		return st.Phase == PhaseRegistering && strings.Contains(st.LastError, "registering the node was forbidden, retrying") &&
			strings.Contains(st.LastError, "node-restriction.kubernetes.io/"), nil
	})
	if st := barred.Status(); st.Registered || !strings.Contains(s.logs.String(), "registering the node was forbidden") {
		t.Errorf("barred node = %+v", st)
	}

	if strings.Contains(s.logs.String(), strings.SplitN(token, ".", 2)[1]) {
		t.Error("the bootstrap token's secret reached the log")
	}
}

// A node that claims another instance's address registers and runs, but its serving
// CSR is denied; its status says why, and it keeps running and asking, as a kubelet
// does. A denied bootstrap CSR ends the node with the reason.
func TestDeniedCSRs(t *testing.T) {
	cp := startControlPlane(t)
	ctx := t.Context()
	honest := simNode(1)
	impostor := simNode(2)
	impostor.inventoryIP, impostor.ip = impostor.ip, honest.ip
	writeInventory(t, cp.inventory, honest, impostor)
	token, err := bootstraptoken.Mint(ctx, cp.env.Client, "workers", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := newSims(t)
	k := s.start(cp, impostor, func(c *Config) { c.BootstrapToken = token })
	eventually(t, "serving CSR denied", func() (bool, error) { return k.Status().ServingCertificate.State == CSRDenied, nil })
	st := k.Status()
	want := "IP SAN " + honest.ip + " is not an address of instance " + impostor.id
	if st.ServingCertificate.Reason != csr.ReasonSANs || st.ServingCertificate.Message != want {
		t.Errorf("serving certificate = %+v, want reason %s, message %q", st.ServingCertificate, csr.ReasonSANs, want)
	}
	if st.Phase != PhaseRunning || !st.Registered || !st.Ready || st.ClientCertificate.State != CSRIssued {
		t.Errorf("status = %+v", st)
	}
	// The kubelet retries with a new CSR, which is denied again.
	eventually(t, "a second serving CSR", func() (bool, error) {
		return len(csrsOf(t, cp.env.Client, impostor.node, certificatesv1.KubeletServingSignerName)) >= 2, nil
	})
	for _, c := range csrsOf(t, cp.env.Client, impostor.node, certificatesv1.KubeletServingSignerName) {
		if len(c.Status.Certificate) > 0 {
			t.Errorf("CSR %s was issued", c.Name)
		}
	}
	select {
	case <-k.Done():
		t.Fatalf("a denied serving CSR stopped the node: %v", k.Wait())
	default:
	}
	if !strings.Contains(k.Status().LastError, csr.ReasonSANs) {
		t.Errorf("last error = %q", k.Status().LastError)
	}

	// A denied bootstrap CSR, by contrast, ends the node, as it ends a kubelet: here
	// bootstrappers lose the right to ask for client certificates.
	if err := cp.env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, rbac.NodeGroupBindingName("workers"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := simNode(3)
	writeInventory(t, cp.inventory, honest, impostor, third)
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = Run(runCtx, Config{NodeName: third.node, InternalIP: third.ip, Server: cp.env.Config.Host, CAData: cp.caPEM, BootstrapToken: token})
	var denied *CSRError
	if !errors.As(err, &denied) || denied.State != CSRDenied || denied.Reason != csr.ReasonAccessReview ||
		denied.Signer != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(denied.CSR, "node-csr-") {
		t.Errorf("Run with a denied bootstrap CSR: %v", err)
	}
}

// Both certificates rotate at their deadline: the client certificate is renewed with a
// CSR that the node makes with its current certificate (approved as a self client
// certificate), the node keeps working with the new one, and the serving certificate
// is replaced by a fresh CSR.
func TestCertificateRotation(t *testing.T) {
	cp, in, token := startWithOneNode(t)
	admin := cp.env.Client
	// Rotate each kind of certificate once, two seconds after it arrives, then at the
	// kubelet's own deadline.
	var mu sync.Mutex
	rotated := map[x509.ExtKeyUsage]bool{}
	s := newSims(t)
	k := s.start(cp, in, func(c *Config) {
		c.BootstrapToken = token
		c.LeaseDuration = 4 * time.Second
		c.rotationDeadline = func(cert *x509.Certificate) time.Time {
			mu.Lock()
			defer mu.Unlock()
			if !rotated[cert.ExtKeyUsage[0]] {
				rotated[cert.ExtKeyUsage[0]] = true
				return time.Now().Add(2 * time.Second)
			}
			return jitteredDeadline(cert)
		}
	})
	eventually(t, "both certificates rotated", func() (bool, error) {
		st := k.Status()
		return st.ClientCertificate.Issued == 2 && st.ServingCertificate.Issued == 2 && st.ServingCertificate.State == CSRIssued && st.ClientCertificate.State == CSRIssued, nil
	})
	clients := csrsOf(t, admin, in.node, certificatesv1.KubeAPIServerClientKubeletSignerName)
	if len(clients) != 2 {
		t.Fatalf("%d client CSRs", len(clients))
	}
	slices.SortFunc(clients, func(a, b certificatesv1.CertificateSigningRequest) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	renewal := clients[1]
	if !strings.HasPrefix(renewal.Name, "csr-") || renewal.Spec.Username != "system:node:"+in.node {
		t.Errorf("renewal CSR %s by %s", renewal.Name, renewal.Spec.Username)
	}
	if a := condition(&renewal, certificatesv1.CertificateApproved); a == nil || a.Message != csr.MessageSelfClient {
		t.Errorf("renewal conditions = %+v", renewal.Status.Conditions)
	}
	// At least two serving CSRs: the client rotation closes every connection, and a
	// serving CSR whose create was cut by that is asked for again with a new CSR, as
	// the kubelet does (the node's status above counts two issued to it).
	if n := len(csrsOf(t, admin, in.node, certificatesv1.KubeletServingSignerName)); n < 2 {
		t.Errorf("%d serving CSRs", n)
	}
	// The node goes on with the renewed certificate: its Lease is renewed again, and
	// it presents the new certificate.
	renewals := k.Status().LeaseRenewals
	eventually(t, "lease renewed after the rotation", func() (bool, error) { return k.Status().LeaseRenewals > renewals+1, nil })
	if u := whoami(t, k.RESTConfig()); u.Username != "system:node:"+in.node {
		t.Errorf("after rotation the node acts as %+v", u)
	}
	current := k.creds.cert.Load().Leaf
	if !current.Equal(parseCert(t, renewal.Status.Certificate)) {
		t.Error("the node does not present its renewed client certificate")
	}
	// Closing the connections at the switch may fail a request in flight, as it does for
	// the kubelet; that request is retried. Nothing else may have failed.
	if st := k.Status(); st.LastError != "" && !cutByConnectionClose(st.LastError) {
		t.Errorf("last error = %q", st.LastError)
	}
}

// cutByConnectionClose reports whether an error is what a request in flight gets when
// the node closes its connections at a certificate switch: the TCP connection's error
// over HTTP/1.1, or the HTTP/2 client connection's when the request was multiplexed on
// it (seen in CI: a Lease renewal cut this way).
func cutByConnectionClose(msg string) bool {
	return strings.Contains(msg, "use of closed network connection") ||
		strings.Contains(msg, "client connection force closed via ClientConn.Close")
}
