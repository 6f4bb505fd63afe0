package controller

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

func TestRunRequiresCAAndInventory(t *testing.T) {
	var out bytes.Buffer
	err := Run(t.Context(), []string{"run"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--ca-cert and --ca-key are required") {
		t.Errorf("error = %v", err)
	}
	err = Run(t.Context(), []string{"run", "--ca-cert", "x", "--ca-key", "y"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--inventory is required") {
		t.Errorf("error = %v", err)
	}
}

// nodejoin-controller run against a real API server: a kubelet's serving CSR is
// approved and issued.
func TestRunIssuesAServingCertificate(t *testing.T) {
	env := testenv.Start(t)
	node := "ip-198-18-0-11.local.internal"
	inv := nodeInventory(t, node, "i-1", "198.18.0.11")
	p := env.Cluster.PKI()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs testenv.SyncBuffer
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	_ = l.Close()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"run", "--kubeconfig", env.Cluster.KubeconfigPath(), "--ca-cert", p.CA.Cert, "--ca-key", p.CA.Key,
			"--inventory", inv, "--identity", "test", "--metrics-bind-address", metricsAddr}, &logs, &logs)
	}()

	createServingCSR(ctx, t, env, node, "198.18.0.11")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := env.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		return len(list.Items[0].Status.Certificate) > 0, nil
	})
	if err != nil {
		t.Fatalf("CSR not issued: %v\n%s", err, logs.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), `nodejoin_csr_decisions_total{decision="approved",reason="AutoApproved",signer="kubernetes.io/kubelet-serving"} 1`) {
		t.Errorf("metrics lack the approval:\n%s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// nodeInventory writes a file inventory of one running instance, id, whose node is
// named node at ip, and returns its path.
func nodeInventory(t *testing.T, node, id, ip string) string {
	t.Helper()
	inv := filepath.Join(t.TempDir(), "inventory.json")
	if err := os.WriteFile(inv, []byte(`{"`+node+`": {"id": "`+id+`", "state": "running", "dnsNames": ["`+node+`"], "ips": ["`+ip+`"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return inv
}

// createServingCSR creates, as node's kubelet, a kubelet-serving CSR for its name and ip.
func createServingCSR(ctx context.Context, t *testing.T, env *testenv.Env, node, ip string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, DNSNames: []string{node}, IPAddresses: []net.IP{net.ParseIP(ip)},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	kubelet := env.As(t, "system:node:"+node, "system:nodes")
	created, err := kubelet.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// testenv.SyncBuffer is a bytes.Buffer safe for the controller's goroutines.

func TestRunAddonFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--addons", "kube-proxy,vpc-cni"}, `--addons: unknown add-on "vpc-cni"`},
		{[]string{"--addons", "aws-node", "--aws-node-ec2-endpoint", "198.18.0.1:8081"}, "aws-node EC2 endpoint"},
		{[]string{"--addons", "kube-proxy"}, "kube-proxy needs the API server's address"},
		{[]string{"--addons", "coredns", "--service-cidr", "10.100.0.0"}, `--service-cidr "10.100.0.0": want an address range`},
		{[]string{"--addons", "coredns", "--cluster-dns-ip", "10.0.0.10"}, "outside the service range"},
		{[]string{"--addons", "kube-proxy", "--addons-apiserver-endpoint", "https://10.100.0.1"}, "in the service range"},
	} {
		var out bytes.Buffer
		args := append([]string{"run", "--ca-cert", "x", "--ca-key", "y", "--inventory", "none.json"}, tc.args...)
		err := Run(t.Context(), args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error = %v, want %q", tc.args, err, tc.want)
		}
	}
}
