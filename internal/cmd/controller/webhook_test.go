package controller

import (
	"context"
	"encoding/pem"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

func TestWebhookRequiresItsInputs(t *testing.T) {
	for args, want := range map[string]string{
		"webhook":                          "--tls-cert and --tls-key are required",
		"webhook --tls-cert a --tls-key b": "--cluster-id is required",
		"webhook --tls-cert a --tls-key b --cluster-id c":                                                               "--webhook-client-ca-file is required",
		"webhook --tls-cert a --tls-key b --cluster-id c --webhook-client-ca-file ca --webhook-insecure-no-client-cert": "not both",
		"webhook --tls-cert a --tls-key b --cluster-id c --webhook-client-ca-file ca --webhook-max-in-flight 0":         "--webhook-max-in-flight 0",
		"webhook --tls-cert a --tls-key b --cluster-id c --webhook-client-ca-file ca":                                   "--inventory is required",
		"webhook --tls-cert a --tls-key b --cluster-id c --webhook-client-ca-file ca --inventory i":                     "give --region or --sts-host",
	} {
		var out strings.Builder
		if err := Run(t.Context(), strings.Fields(args), &out, &out); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// nodejoin-controller webhook behind the real kube-apiserver: a node's token
// authenticates as the node its instance is.
func TestWebhookCommand(t *testing.T) {
	dir := t.TempDir()
	sts := localaws.NewSTS("111122223333")
	stsSrv := httptest.NewTLSServer(sts)
	defer stsSrv.Close()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stsCA := write("sts-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: stsSrv.Certificate().Raw}))
	inv := write("inventory.json", []byte(`{"ip-198-18-0-11.local.internal": {"id": "i-0aaaaaaaaaaaaaaaa", "state": "running", "accountId": "111122223333", "role": "nodes", "privateDnsName": "ip-198-18-0-11.local.internal"}}`))

	ca, err := pki.NewCA("webhook-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "webhook", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: pki.ServerAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := kp.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	// kube-apiserver presents a client certificate of a CA of its own, which the webhook
	// requires (--webhook-client-ca-file).
	clientCA, err := pki.NewCA("webhook-client-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientCA.Issue(pki.Request{CommonName: "kube-apiserver", Usage: pki.ClientAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := client.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	clientCAFile := write("client-ca.pem", clientCA.CertPEM())
	webhookConfig := filepath.Join(dir, "webhook.kubeconfig")
	if err := controlplane.WriteWebhookClientConfig(webhookConfig, "https://"+addr+"/authenticate", ca.CertPEM(), client.CertPEM(), clientKey); err != nil {
		t.Fatal(err)
	}

	env := testenv.Start(t, func(o *controlplane.Options) { o.TokenWebhookConfigFile = webhookConfig })
	if _, err := env.Client.CoreV1().ConfigMaps("kube-system").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: "kube-system"},
		Data:       map[string]string{"mapRoles": "- rolearn: arn:aws:iam::111122223333:role/nodes\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs testenv.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"webhook", "--kubeconfig", env.Cluster.KubeconfigPath(), "--listen", addr, "--tls-cert", certFile, "--tls-key", keyFile, "--webhook-client-ca-file", clientCAFile,
			"--cluster-id", "demo", "--sts-host", strings.TrimPrefix(stsSrv.URL, "https://"), "--sts-ca-bundle", stsCA, "--inventory", inv}, &logs, &logs)
	}()

	creds, err := sts.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := identity.Mint(t.Context(), aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(stsSrv.URL), HTTPClient: stsSrv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.Token)}, "demo")
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAFile: env.Cluster.CAFile()}, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	var review *authenticationv1.SelfSubjectReview
	// The webhook may still be starting: kube-apiserver then answers Unauthorized.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		review, err = nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("node token never authenticated: %v\n%s", err, logs.String())
	}
	if got := review.Status.UserInfo.Username; got != "system:node:ip-198-18-0-11.local.internal" {
		t.Errorf("username = %q", got)
	}
	if strings.Contains(logs.String(), token[12:40]) {
		t.Error("the webhook logged the token")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("webhook: %v", err)
	}
}
