package controlplane_test

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// The control-plane node's kubelet joins with a certificate the cluster CA issues
// directly (the one first bootstrap): kube-apiserver must see it as exactly that node,
// held to the Node authorizer and NodeRestriction like any other, and the role label
// and taint must come from the administrator's MarkControlPlane.
func TestControlPlaneKubeletIsItsNodeOnly(t *testing.T) {
	env := testenv.Start(t)
	dir := t.TempDir()
	k := controlplane.KubeletClientCert{
		NodeName:        "control-plane-1",
		CertPath:        filepath.Join(dir, "pki", "kubelet-client-current.pem"),
		KubeconfigPath:  filepath.Join(dir, "kubelet.conf"),
		Server:          env.Cluster.Endpoint(),
		ServingCertPath: filepath.Join(dir, "pki", "kubelet-server-current.pem"),
		Addresses:       []netip.Addr{netip.MustParseAddr("198.18.0.1")},
	}
	if err := env.Cluster.WriteControlPlaneKubelet(k); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	who, err := kubelet.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the kubelet's kubeconfig does not authenticate: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != "system:node:control-plane-1" || !slices.Contains(u.Groups, "system:nodes") || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("kubelet authenticates as %q in %v, want system:node:control-plane-1 in system:nodes only", u.Username, u.Groups)
	}

	// Its first serving certificate: for its name and address, server use only, from
	// the cluster CA, with the subject a kubelet-serving CSR must carry.
	data, err := os.ReadFile(k.ServingCertPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	serving, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if serving.Subject.CommonName != "system:node:control-plane-1" || !slices.Equal(serving.DNSNames, []string{"control-plane-1"}) ||
		len(serving.IPAddresses) != 1 || serving.IPAddresses[0].String() != "198.18.0.1" ||
		!slices.Equal(serving.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("serving certificate %s for %v %v, usages %v", serving.Subject, serving.DNSNames, serving.IPAddresses, serving.ExtKeyUsage)
	}
	if err := serving.CheckSignatureFrom(env.Cluster.CA().Cert); err != nil {
		t.Errorf("serving certificate not from the cluster CA: %v", err)
	}

	// Registering as the kubelet does: its own Node, with the taint it registers.
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.NodeName}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{controlplane.ControlPlaneTaint}}}
	if _, err := kubelet.CoreV1().Nodes().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the control-plane kubelet cannot register its own Node: %v", err)
	}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	if _, err := kubelet.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the control-plane kubelet creating another Node: err = %v, want Forbidden", err)
	}
	if _, err := kubelet.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the control-plane kubelet listing Secrets: err = %v, want Forbidden", err)
	}

	// Twice: the second finds the taint and the label there and changes nothing.
	for range 2 {
		if err := controlplane.MarkControlPlane(ctx, env.Client, k.NodeName); err != nil {
			t.Fatal(err)
		}
	}
	node, err := env.Client.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := node.Labels[controlplane.ControlPlaneRoleLabel]; !ok || v != "" {
		t.Errorf("labels = %v, want %s=\"\"", node.Labels, controlplane.ControlPlaneRoleLabel)
	}
	// Admission adds node.kubernetes.io/not-ready to a new Node; the role taint must be
	// there once.
	n := 0
	for _, taint := range node.Spec.Taints {
		if taint.Key == controlplane.ControlPlaneTaint.Key {
			n++
			if taint != controlplane.ControlPlaneTaint {
				t.Errorf("taint %v, want %v", taint, controlplane.ControlPlaneTaint)
			}
		}
	}
	if n != 1 {
		t.Errorf("taints = %v, want %v once", node.Spec.Taints, controlplane.ControlPlaneTaint)
	}
}

func TestControlPlaneKubeletRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "Upper", "a b", "-lead", "trail-", "a/b", "system:masters"} {
		if err := controlplane.ValidNodeName(name); err == nil {
			t.Errorf("ValidNodeName(%q) = nil, want an error", name)
		}
	}
	for _, name := range []string{"control-plane", "ip-198-18-0-1.ec2.internal", "a"} {
		if err := controlplane.ValidNodeName(name); err != nil {
			t.Errorf("ValidNodeName(%q) = %v", name, err)
		}
	}
}
