package kubeletsim

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Nodes join with the credential plugin nodeadm writes into the kubelet's kubeconfig:
// `nodeadm get-token` (this test binary, run as nodeadm) presigns STS
// GetCallerIdentity with the instance role credentials its IMDS serves; kube-apiserver
// hands the token to nodejoin's webhook, which verifies it with the local STS and maps
// the role through aws-auth. A node whose role is not mapped is refused, and its status
// says so.
func TestJoinWithExecCredentials(t *testing.T) {
	const account = "111122223333"
	env := testenv.Start(t, func(o *controlplane.Options) { o.TokenWebhook = true })
	ctx := t.Context()
	// nodejoin-controller and the local cloud, as the sandbox runs them.
	var logs testenv.SyncBuffer
	ctl, err := controller.Start(ctx, controller.Config{Cluster: env.Cluster, AccountID: account, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctl.Stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})
	cloud := ctl.Cloud()
	clusterName := env.Cluster.Name()
	cp := &controlPlane{env: env, logs: &logs, caPEM: env.Cluster.CA().CertPEM()}
	if _, err := env.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: metav1.NamespaceSystem},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::" + account + ":role/workers\n" +
			"  username: system:node:{{EC2PrivateDNSName}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two instances, each with its own metadata service; only "workers" is mapped.
	none := filepath.Join(t.TempDir(), "none")
	launch := func(id, ip, role string) (localaws.Instance, *clientcmdapi.ExecConfig) {
		inst := localaws.Instance{ID: id, PrivateIPv4: ip, AvailabilityZone: "us-west-2a", Type: "m5.large", AccountID: account, Role: role}
		if err := localaws.InstanceDefaults(&inst); err != nil {
			t.Fatal(err)
		}
		if err := cloud.EC2.Launch(inst); err != nil {
			t.Fatal(err)
		}
		imds := httptest.NewServer(localaws.NewIMDS(inst, cloud.STS))
		t.Cleanup(imds.Close)
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		env := []clientcmdapi.ExecEnvVar{{Name: helperEnv, Value: "nodeadm"}, {Name: bootstrap.EnvIMDSEndpoint, Value: imds.URL},
			{Name: "AWS_ENDPOINT_URL_STS", Value: cloud.STSURL}, {Name: "AWS_CA_BUNDLE", Value: env.Cluster.CAFile()},
			{Name: "AWS_CONFIG_FILE", Value: none}, {Name: "AWS_SHARED_CREDENTIALS_FILE", Value: none}}
		for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"} {
			env = append(env, clientcmdapi.ExecEnvVar{Name: v})
		}
		return inst, &clientcmdapi.ExecConfig{
			APIVersion: "client.authentication.k8s.io/v1beta1", Command: self,
			Args: []string{"get-token", "--cluster-name", clusterName, "--region", "us-west-2"},
			Env:  env, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
	}
	worker, workerExec := launch("i-0aaaaaaaaaaaaaaaa", "198.18.0.21", "workers")
	stray, strayExec := launch("i-0bbbbbbbbbbbbbbbb", "198.18.0.22", "batch")

	s := newSims(t)
	start := func(inst localaws.Instance, exec *clientcmdapi.ExecConfig) *Kubelet {
		return s.start(cp, instance{node: inst.PrivateDNSName, id: inst.ID, ip: inst.PrivateIPv4}, func(c *Config) { c.Exec = exec })
	}
	k := start(worker, workerExec)
	refused := start(stray, strayExec)
	eventually(t, "the mapped node joined", func() (bool, error) { return joined(k), nil })
	st := k.Status()
	if !st.Authenticated || st.ClientCertificate != (Certificate{}) || st.ServingCertificate.Issued != 1 {
		t.Errorf("status = %+v", st)
	}
	u := whoami(t, k.RESTConfig())
	if u.Username != "system:node:"+worker.PrivateDNSName || !slices.Contains(u.Groups, "system:nodes") ||
		!strings.HasPrefix(u.UID, "aws-iam-authenticator:"+account+":") || !slices.Equal(u.Extra["sessionName"], []string{worker.ID}) {
		t.Errorf("the node acts as %+v", u)
	}
	servings := csrsOf(t, env.Client, worker.PrivateDNSName, certificatesv1.KubeletServingSignerName)
	if len(servings) != 1 || servings[0].Spec.Username != "system:node:"+worker.PrivateDNSName || len(servings[0].Status.Certificate) == 0 ||
		!slices.Equal(servings[0].Spec.Extra["sessionName"], certificatesv1.ExtraValue{worker.ID}) {
		t.Errorf("serving CSRs = %+v", servings)
	}
	if n := len(csrsOf(t, env.Client, worker.PrivateDNSName, certificatesv1.KubeAPIServerClientKubeletSignerName)); n != 0 {
		t.Errorf("%d client CSRs from a node with a credential plugin", n)
	}

	eventually(t, "the unmapped node's refusal recorded", func() (bool, error) { return strings.Contains(refused.Status().LastError, "Unauthorized"), nil })
	if st := refused.Status(); st.Authenticated || st.Registered || st.Phase != PhaseRegistering {
		t.Errorf("unmapped node status = %+v", st)
	}
	if !strings.Contains(cp.logs.String(), "role arn:aws:iam::"+account+":role/batch has no access entry or aws-auth mapping") {
		t.Errorf("the webhook's reason is not in the controller log:\n%s", cp.logs.String())
	}
	if _, err := env.Client.CoreV1().Nodes().Get(ctx, stray.PrivateDNSName, metav1.GetOptions{}); err == nil {
		t.Error("the unmapped node registered")
	}
	for _, l := range []string{s.logs.String(), cp.logs.String()} {
		if strings.Contains(l, "k8s-aws-v1.") {
			t.Error("a token reached a log")
		}
	}
}
