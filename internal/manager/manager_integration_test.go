package manager_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/rbac"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

const (
	account = "111122223333"
	nodeA   = "ip-198-18-0-11.local.internal"
	nodeB   = "ip-198-18-0-12.local.internal"
	idA     = "i-0aaaaaaaaaaaaaaaa"
	idB     = "i-0bbbbbbbbbbbbbbbb"
)

// The whole controller as deployed: it runs as a user that holds only nodejoin's
// controller roles, behind the real kube-apiserver's token webhook configuration.
// A NodeAccessEntry admits its role's instances as nodes; the same role without an
// entry, or a session naming another role's instance, is refused; the leader approves
// and signs a serving CSR.
func TestManagerAsDeployed(t *testing.T) {
	env := testenv.Start(t, func(o *controlplane.Options) { o.TokenWebhook = true })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	admin := env.Client
	const controllerUser = "nodejoin-test-controller"
	subject := rbac.User(controllerUser)
	// What deploy/ installs, applied by the administrator.
	if err := rbac.Apply(ctx, admin, &subject, "test-admin"); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.ApplyCRD(ctx, dyn, nodejoinv1alpha1.NodeAccessEntryCRD); err != nil {
		t.Fatal(err)
	}
	// Twice: idempotent.
	if err := manager.ApplyCRD(ctx, dyn, nodejoinv1alpha1.NodeAccessEntryCRD); err != nil {
		t.Fatalf("second ApplyCRD: %v", err)
	}

	// The local cloud, as `nodejoin up` runs it: STS, EC2 and IAM behind aws-sdk-go-v2.
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cloud, err := localaws.StartCloud(ctx, account, env.Cluster.CA(), log)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []localaws.Instance{
		{ID: idA, PrivateIPv4: "198.18.0.11", PrivateDNSName: nodeA, Role: "workers"},
		{ID: idB, PrivateIPv4: "198.18.0.12", PrivateDNSName: nodeB, Role: "batch"},
	} {
		if err := cloud.EC2.Launch(inst); err != nil {
			t.Fatal(err)
		}
	}
	ec2 := inventory.NewEC2(cloud.ControllerConfig("us-west-2"), inventory.EC2Options{EC2Endpoint: cloud.EC2URL, IAMEndpoint: cloud.IAMURL, CacheTTL: time.Second})
	p := env.Cluster.PKI()
	cert, err := tls.LoadX509KeyPair(p.TokenWebhook.Cert, p.TokenWebhook.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Only kube-apiserver's client certificate for the webhook passes its TLS.
	clientCA, err := os.ReadFile(p.TokenWebhookClientCA)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(clientCA)
	wl, err := env.Cluster.ListenTokenWebhook()
	if err != nil {
		t.Fatal(err)
	}
	var hl net.ListenConfig
	health, err := hl.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	asController := rest.CopyConfig(env.Config)
	asController.Impersonate = rest.ImpersonationConfig{UserName: controllerUser}
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, manager.Config{
			REST:                 asController,
			Log:                  log,
			Signer:               &csr.Signer{CA: env.Cluster.CA()},
			Nodes:                ec2,
			Instances:            ec2,
			WebhookListener:      wl,
			WebhookTLS:           httpserver.MutualTLS(cert, clientCAs),
			Verifier:             &authn.Verifier{ClusterID: "demo", STSHosts: []string{strings.TrimPrefix(cloud.STSURL, "https://")}, HTTP: cloud.STSHTTPClient()},
			LeaderElection:       &manager.LeaderElection{Identity: "replica-1", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond},
			TokenCleanupInterval: -1, // kube-controller-manager's tokencleaner: the roles grant no Secrets
			HealthListener:       health,
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v\n%s", err, logs.String())
		}
		if err := cloud.Wait(); err != nil {
			t.Errorf("local cloud: %v", err)
		}
	}()

	// Ready once NodeAccessEntries are loaded.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+health.Addr().String()+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("never ready: %v\n%s", err, logs.String())
	}

	tokenOf := func(instanceID, role, cluster string) string {
		t.Helper()
		creds, err := cloud.STS.InstanceCredentials(instanceID, role)
		if err != nil {
			t.Fatal(err)
		}
		token, _, err := identity.Mint(ctx, aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(cloud.STSURL), HTTPClient: cloud.STSHTTPClient(),
			Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.Token)}, cluster)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	// whoami asks the API server who a token is; nil when it is refused.
	whoami := func(token string) *authenticationv1.UserInfo {
		t.Helper()
		c, err := kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAFile: env.Cluster.CAFile()}, BearerToken: token})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return &r.Status.UserInfo
	}

	tokenA := tokenOf(idA, "workers", "demo")
	if u := whoami(tokenA); u != nil {
		t.Fatalf("a role without an access entry authenticated as %+v", u)
	}
	if !strings.Contains(logs.String(), "role arn:aws:iam::111122223333:role/workers has no access entry or aws-auth mapping") {
		t.Errorf("the denial's reason is not in the log:\n%s", logs.String())
	}
	entries := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource)
	for name, arn := range map[string]string{"workers": "arn:aws:iam::111122223333:role/nodes/workers", "batch": "arn:aws:iam::111122223333:role/batch"} {
		if _, err := entries.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": nodejoinv1alpha1.APIVersion, "kind": nodejoinv1alpha1.NodeAccessEntryKind,
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"principalARN": arn},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The CRD's schema refuses what the controller would ignore.
	if _, err := entries.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion, "kind": nodejoinv1alpha1.NodeAccessEntryKind,
		"metadata": map[string]any{"name": "user"}, "spec": map[string]any{"principalARN": "arn:aws:iam::111122223333:user/alice"},
	}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a user ARN in a NodeAccessEntry: %v, want Invalid", err)
	}
	// kube-apiserver caches a refusal briefly; a fresh token is a fresh review.
	var userA *authenticationv1.UserInfo
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		userA = whoami(tokenOf(idA, "workers", "demo"))
		return userA != nil, nil
	}); err != nil {
		t.Fatalf("the access entry never admitted the node: %v\n%s", err, logs.String())
	}
	if userA.Username != "system:node:"+nodeA || strings.Join(userA.Groups, ",") != "system:bootstrappers,system:nodes,system:authenticated" {
		t.Errorf("node A authenticated as %+v", userA)
	}
	for what, token := range map[string]string{
		"session naming an instance of another role": tokenOf(idB, "workers", "demo"),
		"token bound to another cluster":             tokenOf(idA, "workers", "other"),
		"forged token":                               "k8s-aws-v1." + strings.Repeat("A", 200),
	} {
		if u := whoami(token); u != nil {
			t.Errorf("%s authenticated as %+v", what, u)
		}
	}
	// Credentials taken from an instance and replayed after it was terminated: refused.
	// A terminated instance holds its role no more; the role lives on in an instance
	// profile, so that STS still issues and takes the session and the webhook's own
	// check of the instance is what refuses it.
	if err := cloud.IAM.AddInstanceProfile("workers", "workers"); err != nil {
		t.Fatal(err)
	}
	if err := cloud.EC2.SetState(idA, "terminated"); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return whoami(tokenOf(idA, "workers", "demo")) == nil, nil
	}); err != nil {
		t.Errorf("a terminated instance's credentials still authenticate: %v", err)
	}
	if !strings.Contains(logs.String(), "instance "+idA+" is terminated, not running") {
		t.Errorf("the terminated instance's denial is not in the log:\n%s", logs.String())
	}
	if err := cloud.EC2.SetState(idA, "running"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), tokenA[12:60]) {
		t.Error("a token reached the log")
	}

	// The entry pinned its role's unique ID (IAM GetRole) on first use. The role deleted
	// and re-created under the same ARN has a new ID and is refused, until the pin is
	// removed; then the role as it is now is pinned.
	pinned := func() string {
		e, err := entries.Get(ctx, "workers", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e.GetAnnotations()[nodejoinv1alpha1.RoleIDAnnotation]
	}
	oldID, _ := cloud.IAM.RoleID("workers")
	if got := pinned(); got != oldID || oldID == "" {
		t.Fatalf("entry workers pinned role ID %q, IAM says %q", got, oldID)
	}
	cloud.IAM.DeleteRole("workers")
	if u := whoami(tokenOf(idA, "workers", "demo")); u != nil {
		t.Fatalf("the re-created role authenticated as %+v", u)
	}
	newID, _ := cloud.IAM.RoleID("workers")
	if want := "role arn:aws:iam::111122223333:role/workers has unique ID " + newID + ", not " + oldID + ", which NodeAccessEntry workers pinned"; !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs.String())
	}
	if _, err := entries.Patch(ctx, "workers", types.MergePatchType, []byte(`{"metadata":{"annotations":{"nodejoin.io/role-id":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return whoami(tokenOf(idA, "workers", "demo")) != nil, nil
	}); err != nil {
		t.Fatalf("the re-confirmed role never authenticated: %v\n%s", err, logs.String())
	}
	if got := pinned(); got != newID {
		t.Errorf("re-pinned role ID %q, want %q", got, newID)
	}

	// The leader approves and signs a serving CSR of node A, as the least-privileged user.
	kubelet := env.As(t, "system:node:"+nodeA, "system:nodes")
	testenv.CreateCSR(t, kubelet, "serving-a", certificatesv1.KubeletServingSignerName, testenv.CSR(t, "system:node:"+nodeA, []string{nodeA}, "198.18.0.11"), testenv.ServingUsages...)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "serving-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(c.Status.Certificate) > 0, nil
	}); err != nil {
		t.Fatalf("the serving CSR was not issued: %v\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the controller's roles lack a permission:\n%s", logs.String())
	}
}
