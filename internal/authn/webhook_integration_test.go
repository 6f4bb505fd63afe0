package authn_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

type instances map[string]*inventory.Instance

func (i instances) Instance(_ context.Context, id string) (*inventory.Instance, error) {
	if inst, ok := i[id]; ok {
		return inst, nil
	}
	return nil, inventory.ErrNotFound
}

const awsAuth = `- rolearn: arn:aws:iam::111122223333:role/nodes
  username: system:node:{{EC2PrivateDNSName}}
  groups:
  - system:bootstrappers
  - system:nodes
`

// serveWebhook serves w over TLS on loopback and returns a kubeconfig-format webhook
// configuration for kube-apiserver.
func serveWebhook(t *testing.T, w http.Handler) string {
	t.Helper()
	ca, err := pki.NewCA("webhook-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "nodejoin-webhook", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: pki.ServerAuth, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := kp.KeyPEM()
	cert, err := tls.X509KeyPair(kp.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(w)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return testenv.WebhookConfig(t, srv.URL+"/authenticate", ca.CertPEM())
}

// kube-apiserver authenticates node identity tokens through the webhook: the real
// apiserver, the SDK's presigned tokens, the local STS.
func TestWebhookAuthenticatesNodes(t *testing.T) {
	sts := localaws.NewSTS("111122223333")
	stsSrv := httptest.NewTLSServer(sts)
	defer stsSrv.Close()
	stsClient := stsSrv.Client()
	stsClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	var client kubernetes.Interface
	reg := prometheus.NewRegistry()
	w := &authn.Webhook{
		Metrics:  authn.NewMetrics(reg),
		Verifier: &authn.Verifier{ClusterID: "demo", STSHosts: []string{strings.TrimPrefix(stsSrv.URL, "https://")}, HTTP: stsClient},
		Mappings: authn.AWSAuth{Get: func(ctx context.Context) (*corev1.ConfigMap, error) {
			return client.CoreV1().ConfigMaps("kube-system").Get(ctx, "aws-auth", metav1.GetOptions{})
		}}.Mappings,
		Instances: instances{
			"i-0aaaaaaaaaaaaaaaa": {ID: "i-0aaaaaaaaaaaaaaaa", State: "running", PrivateDNSName: "ip-198-18-0-11.us-west-2.compute.internal", Role: "nodes", AccountID: "111122223333"},
			"i-0bbbbbbbbbbbbbbbb": {ID: "i-0bbbbbbbbbbbbbbbb", State: "stopped", PrivateDNSName: "ip-198-18-0-12.us-west-2.compute.internal", Role: "nodes", AccountID: "111122223333"},
			"i-0cccccccccccccccc": {ID: "i-0cccccccccccccccc", State: "running", PrivateDNSName: "ip-198-18-0-13.us-west-2.compute.internal", Role: "batch", AccountID: "111122223333"},
		},
	}
	webhookConfig := serveWebhook(t, w)
	env := testenv.Start(t, func(o *controlplane.Options) { o.TokenWebhookConfigFile = webhookConfig })
	client = env.Client
	if _, err := env.Client.CoreV1().ConfigMaps("kube-system").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: "kube-system"}, Data: map[string]string{"mapRoles": awsAuth},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	token := func(session, role, cluster string) string {
		c, err := sts.InstanceCredentials(session, role)
		if err != nil {
			t.Fatal(err)
		}
		cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(stsSrv.URL), HTTPClient: stsSrv.Client(),
			Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}
		tok, _, err := identity.Mint(t.Context(), cfg, cluster)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	whoami := func(tok string) (*authenticationv1.SelfSubjectReview, error) {
		cfg := &rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAFile: env.Cluster.CAFile()}, BearerToken: tok}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	}

	review, err := whoami(token("i-0aaaaaaaaaaaaaaaa", "nodes", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.UserInfo
	if u.Username != "system:node:ip-198-18-0-11.us-west-2.compute.internal" || !strings.Contains(strings.Join(u.Groups, ","), "system:nodes") ||
		!strings.HasPrefix(u.UID, "aws-iam-authenticator:111122223333:") || u.Extra["sessionName"][0] != "i-0aaaaaaaaaaaaaaaa" {
		t.Errorf("user = %+v", u)
	}

	hostile := map[string]string{
		"another cluster's token":         token("i-0aaaaaaaaaaaaaaaa", "nodes", "other-cluster"),
		"a stopped instance":              token("i-0bbbbbbbbbbbbbbbb", "nodes", "demo"),
		"a session naming another role's": token("i-0cccccccccccccccc", "nodes", "demo"),
		"an unknown instance":             token("i-0dddddddddddddddd", "nodes", "demo"),
		"an unmapped role":                token("i-0aaaaaaaaaaaaaaaa", "admin", "demo"),
		"a forged token":                  identity.Prefix + "aHR0cHM6Ly9ldmlsLmV4YW1wbGUv",
	}
	for name, tok := range hostile {
		if _, err := whoami(tok); !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: %v, want Unauthorized", name, err)
		}
	}
	// Unit-level reasons for the same cases.
	for want, tok := range map[string]string{
		"STS refused the token (HTTP 403, SignatureDoesNotMatch)":                           hostile["another cluster's token"],
		"instance i-0bbbbbbbbbbbbbbbb is stopped, not running":                              hostile["a stopped instance"],
		`instance i-0cccccccccccccccc has role "batch", not the token's role "nodes"`:       hostile["a session naming another role's"],
		"role arn:aws:iam::111122223333:role/admin has no access entry or aws-auth mapping": hostile["an unmapped role"],
		`unexpected hostname "evil.example"`:                                                hostile["a forged token"],
	} {
		if _, err := w.Authenticate(t.Context(), tok); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Authenticate = %v, want %q", err, want)
		}
	}
	if hits, total := w.CacheHitRate(); total == 0 {
		t.Errorf("cache: %d hits of %d", hits, total)
	}
	if got := testutil.ToFloat64(w.Metrics.Reviews.WithLabelValues("authenticated")); got < 1 {
		t.Errorf("authenticated reviews = %v", got)
	}
	if got := testutil.ToFloat64(w.Metrics.Reviews.WithLabelValues("denied")); got < float64(len(hostile)) {
		t.Errorf("denied reviews = %v, want at least %d", got, len(hostile))
	}
}
