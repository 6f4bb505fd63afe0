package controlplane_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// until polls cond every half second until it holds, failing the test after timeout
// (a bound against hanging, not a performance assertion).
func until(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestWholeControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler once and checks, in order, what the last two add to a cluster.
func TestWholeControlPlane(t *testing.T) {
	var progress testenv.SyncBuffer
	env := testenv.Start(t, testenv.WholeControlPlane, func(o *controlplane.Options) { o.Progress = &progress })
	client := env.Client
	for _, step := range []string{"✓ starting kube-controller-manager", "✓ starting kube-scheduler"} {
		if !strings.Contains(progress.String(), step) {
			t.Errorf("progress lacks %q:\n%s", step, progress.String())
		}
	}

	t.Run("a new namespace gets its default service account and the root CA", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
		if _, err := client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		until(t, 2*time.Minute, "default service account in team-a", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts("team-a").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		var cm *corev1.ConfigMap
		until(t, 2*time.Minute, "kube-root-ca.crt in team-a", func(ctx context.Context) (bool, error) {
			var err error
			cm, err = client.CoreV1().ConfigMaps("team-a").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil, nil
		})
		if got := cm.Data["ca.crt"]; got != string(env.Cluster.CA().CertPEM()) {
			t.Errorf("kube-root-ca.crt holds %q, want the cluster CA", got)
		}
	})

	t.Run("kube-controller-manager signs approved kube-apiserver-client CSRs and no kubelet CSR", func(t *testing.T) {
		// The kubelet CSRs are valid for their signers and approved first, so that a
		// kubelet signer in KCM would sign them before the apiserver-client one.
		kubeletCSRs := []*certificatesv1.CertificateSigningRequest{
			csr(t, "kubelet-client", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:n1", nil,
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth),
			csr(t, "kubelet-serving", certificatesv1.KubeletServingSignerName, "system:node:n1", []net.IP{net.IPv4(198, 18, 0, 11)},
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth),
		}
		for _, c := range kubeletCSRs {
			approve(t, client, c)
		}
		approve(t, client, csr(t, "apiserver-client", certificatesv1.KubeAPIServerClientSignerName, "alice", nil,
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth))
		var issued []byte
		until(t, 2*time.Minute, "apiserver-client CSR signed", func(ctx context.Context) (bool, error) {
			got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "apiserver-client", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			issued = got.Status.Certificate
			return len(issued) > 0, nil
		})
		block, _ := pem.Decode(issued)
		if block == nil {
			t.Fatalf("issued certificate is not PEM: %q", issued)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := cert.CheckSignatureFrom(env.Cluster.CA().Cert); err != nil || cert.Subject.CommonName != "alice" {
			t.Errorf("issued certificate for %q: signature by the cluster CA: %v", cert.Subject.CommonName, err)
		}
		// The signing controller works its queue in order: the kubelet CSRs, approved
		// earlier, had their turn. Give any signer a further while before looking.
		time.Sleep(10 * time.Second)
		for _, c := range kubeletCSRs {
			got, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), c.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Certificate) > 0 {
				t.Errorf("kube-controller-manager signed %s CSR %s", got.Spec.SignerName, got.Name)
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == certificatesv1.CertificateFailed {
					t.Errorf("CSR %s failed (a signer in KCM looked at it): %s", got.Name, cond.Message)
				}
			}
		}
	})

	nodeName := "sim-node-1"
	stopHeartbeat := registerNode(t, client, nodeName)

	t.Run("a deployment's pods are created and scheduled", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10.2"}}},
				},
			},
		}
		// The deployment may only be created once the default service account exists
		// (ServiceAccount admission).
		until(t, 2*time.Minute, "default service account in default", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if _, err := client.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		until(t, 2*time.Minute, "a ReplicaSet of deployment web", func(ctx context.Context) (bool, error) {
			rss, err := client.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err
			}
			return len(rss.Items) == 1 && len(rss.Items[0].OwnerReferences) == 1 && rss.Items[0].OwnerReferences[0].Name == "web", nil
		})
		var pods []corev1.Pod
		until(t, 2*time.Minute, "2 pods bound to "+nodeName, func(ctx context.Context) (bool, error) {
			list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err
			}
			pods = list.Items
			bound := 0
			for _, p := range pods {
				if p.Spec.NodeName == nodeName {
					bound++
				}
			}
			return len(pods) == 2 && bound == 2, nil
		})
		for _, p := range pods {
			if !hasCondition(p.Status.Conditions, corev1.PodScheduled) {
				t.Errorf("pod %s has no PodScheduled=True condition: %+v", p.Name, p.Status.Conditions)
			}
		}
	})

	t.Run("a node that stops renewing its lease turns Unknown", func(t *testing.T) {
		stopHeartbeat()
		// The node-monitor grace period is 50s; the bound leaves room for a slow machine.
		until(t, 3*time.Minute, "node "+nodeName+" Ready=Unknown", func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionUnknown, nil
				}
			}
			return false, nil
		})
	})

	t.Run("a crashed kube-controller-manager is restarted and reported healthy", func(t *testing.T) {
		if err := env.Cluster.KillComponent(toolbin.KubeControllerManager); err != nil {
			t.Fatal(err)
		}
		until(t, 2*time.Minute, "kube-controller-manager restarted and healthy", func(ctx context.Context) (bool, error) {
			if env.Cluster.Restarts(toolbin.KubeControllerManager) != 1 {
				return false, nil
			}
			hs, err := controlplane.CheckHealth(ctx, env.Cluster.StateDir())
			if err != nil {
				return false, err
			}
			for _, h := range hs {
				if h.Name == toolbin.KubeControllerManager {
					return h.Healthy && h.Running && h.Restarts == 1, nil
				}
			}
			return false, nil
		})
		hs, err := controlplane.CheckHealth(t.Context(), env.Cluster.StateDir())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range hs {
			names = append(names, h.Name)
			if !h.Healthy || !h.Running || h.PID == 0 {
				t.Errorf("%s: %+v", h.Name, h)
			}
			if _, err := os.Stat(h.Log); err != nil {
				t.Errorf("%s: log: %v", h.Name, err)
			}
		}
		if got := strings.Join(names, ","); got != "etcd,kube-apiserver,kube-controller-manager,kube-scheduler" {
			t.Errorf("components = %s", got)
		}
		log, err := os.ReadFile(filepath.Join(env.Cluster.StateDir(), "logs", "kube-controller-manager.log"))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(log, []byte("starting kube-controller-manager")); n != 2 {
			t.Errorf("kube-controller-manager.log shows %d starts, want 2", n)
		}
		select {
		case err := <-env.Cluster.Failed():
			t.Errorf("a supervised component's crash failed the cluster: %v", err)
		default:
		}
	})
}

func hasCondition(conds []corev1.PodCondition, typ corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// csr builds a CSR that is valid for its signer.
func csr(t *testing.T, name, signer, cn string, ips []net.IP, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, IPAddresses: ips}
	if strings.HasPrefix(cn, "system:node:") {
		tmpl.Subject.Organization = []string{"system:nodes"}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer,
			Usages:     usages,
		},
	}
}

// approve creates c and approves it as the cluster admin.
func approve(t *testing.T, client kubernetes.Interface, c *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	created, err := client.CertificatesV1().CertificateSigningRequests().Create(t.Context(), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR %s: %v", c.Name, err)
	}
	created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "TestApproval", Message: "approved by the test",
	})
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), c.Name, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving CSR %s: %v", c.Name, err)
	}
}

// registerNode registers a Ready node as a kubelet would, and renews its Lease every
// few seconds until the returned function is called.
func registerNode(t *testing.T, client kubernetes.Interface, name string) (stop func()) {
	t.Helper()
	ctx := t.Context()
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager may write the new Node first (its pod CIDR, taints): read it
	// again on a conflict, as a kubelet does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now := metav1.Now()
		node.Status = corev1.NodeStatus{
			Capacity: resources, Allocatable: resources,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.0.11"}},
		}
		_, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				node = fresh
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	renew := func(ctx context.Context) error {
		leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime: &metav1.MicroTime{Time: time.Now()}},
			}, metav1.CreateOptions{})
			return err
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	if err := renew(ctx); err != nil {
		t.Fatal(err)
	}
	hbCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
				_ = renew(hbCtx) // a missed renewal is retried on the next tick
			}
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
