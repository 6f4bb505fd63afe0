package controller

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// --csr=approve needs no CA key (kube-controller-manager signs); --csr=sign, the
// default, does; other values are refused naming the three.
func TestRunCSRModeDecidesWhetherTheCAKeyIsNeeded(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--csr=sign"}, "--ca-cert and --ca-key are required with --csr=sign"},
		{nil, "--ca-cert and --ca-key are required with --csr=sign"},
		{[]string{"--csr=approve"}, "--inventory is required"},
		{[]string{"--csr=off"}, "--inventory is required"},
		{[]string{"--csr=trust"}, `--csr "trust": want sign, approve or off`},
		{[]string{"--csr=approve", "--leader-election-id="}, "--leader-election-id is empty"},
	} {
		var out bytes.Buffer
		err := Run(t.Context(), append([]string{"run"}, tc.args...), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v: error = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// nodejoin-controller run --csr=approve on a real control plane whose
// kube-controller-manager signs the kubelet signers: nodejoin approves a serving CSR,
// kube-controller-manager issues it, and the controller was given no CA key.
func TestRunApproveOnlyLeavesSigningToKubeControllerManager(t *testing.T) {
	env := testenv.Start(t, testenv.WholeControlPlane, func(o *controlplane.Options) { o.KubeletSigners = true })
	node := "ip-198-18-0-12.local.internal"
	inv := nodeInventory(t, node, "i-2", "198.18.0.12")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs testenv.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"run", "--csr=approve", "--kubeconfig", env.Cluster.KubeconfigPath(), "--inventory", inv, "--identity", "test"}, &logs, &logs)
	}()
	created := createServingCSR(ctx, t, env, node, "198.18.0.12")
	var got *certificatesv1.CertificateSigningRequest
	var err error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err = env.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, created.Name, metav1.GetOptions{})
		return err == nil && len(got.Status.Certificate) > 0, err
	})
	if err != nil {
		t.Fatalf("CSR not issued: %v\n%s", err, logs.String())
	}
	approved := false
	for _, c := range got.Status.Conditions {
		approved = approved || (c.Type == certificatesv1.CertificateApproved && c.Reason == "AutoApproved")
	}
	if !approved || strings.Contains(logs.String(), "CSR issued") {
		t.Errorf("conditions %+v; want nodejoin's approval and kube-controller-manager's certificate\n%s", got.Status.Conditions, logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
