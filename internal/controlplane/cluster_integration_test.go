package controlplane_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

func csrPEM(t *testing.T, cn string, orgs []string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func kubeletClientCSR(t *testing.T, name, cn string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM(t, cn, []string{"system:nodes"}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

// The API server records who asked for a certificate; the CSR approver trusts exactly
// these fields, so they must be the impersonated node's.
func TestCSRCarriesTheRequester(t *testing.T) {
	env := testenv.Start(t)
	node := env.As(t, "system:node:a", "system:nodes")
	created, err := node.CertificatesV1().CertificateSigningRequests().Create(t.Context(),
		kubeletClientCSR(t, "node-a-client", "system:node:a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node a creating its own client CSR: %v", err)
	}
	if created.Spec.Username != "system:node:a" {
		t.Errorf("spec.username = %q, want system:node:a", created.Spec.Username)
	}
	if !slices.Contains(created.Spec.Groups, "system:nodes") || !slices.Contains(created.Spec.Groups, "system:authenticated") {
		t.Errorf("spec.groups = %v, want system:nodes and system:authenticated", created.Spec.Groups)
	}
}

// NodeRestriction admission: a node may not ask for another node's client certificate.
func TestNodeRestrictionRejectsAnotherNodesCSR(t *testing.T) {
	env := testenv.Start(t)
	node := env.As(t, "system:node:a", "system:nodes")
	_, err := node.CertificatesV1().CertificateSigningRequests().Create(t.Context(),
		kubeletClientCSR(t, "node-a-asks-for-b", "system:node:b"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("create = %v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), "CN=system:node:a") {
		t.Errorf("denial %q does not name the only CN node a may ask for", err)
	}
	// The admin can see that nothing was created.
	if _, err := env.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), "node-a-asks-for-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get rejected CSR = %v, want NotFound", err)
	}
}

func TestAPIServerRestartsAndClientsReconnect(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Cluster.KillAPIServer()
	if _, err := env.Client.CoreV1().Namespaces().Get(ctx, "before-restart", metav1.GetOptions{}); err == nil {
		t.Fatal("API answered while kube-apiserver was down")
	}
	if err := env.Cluster.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	// The same client, unchanged, reaches the restarted server and sees data kept in etcd.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Namespaces().Get(ctx, "before-restart", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("client did not reconnect after restart: %v", err)
	}
	select {
	case err := <-env.Cluster.Failed():
		t.Errorf("deliberate restart reported as failure: %v", err)
	default:
	}
}
