package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Two nodejoin-controller processes against one API server; the leader is killed with
// SIGKILL (it cannot release its Lease) in the middle of a burst of serving CSRs. The
// other takes the Lease over when it expires: every CSR is issued, none twice.
func TestControllerProcessFailover(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	dir := t.TempDir()
	exe := filepath.Join(dir, "nodejoin-controller")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, "github.com/nodejoin/nodejoin/cmd/nodejoin-controller").CombinedOutput(); err != nil {
		t.Fatalf("building nodejoin-controller: %v\n%s", err, out)
	}
	const node = "ip-198-18-0-11.local.internal"
	inv := filepath.Join(dir, "inventory.json")
	if err := os.WriteFile(inv, []byte(`{"`+node+`": {"id": "i-0aaaaaaaaaaaaaaaa", "state": "running", "role": "nodes", "dnsNames": ["`+node+`"], "ips": ["198.18.0.11"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// Every certificate ever written to each CSR, seen through a watch.
	var mu sync.Mutex
	certs := map[string][][]byte{}
	w, err := env.Client.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok || ev.Type == watch.Deleted || len(c.Status.Certificate) == 0 {
				continue
			}
			mu.Lock()
			seen := certs[c.Name]
			if len(seen) == 0 || !bytes.Equal(seen[len(seen)-1], c.Status.Certificate) {
				certs[c.Name] = append(seen, c.Status.Certificate)
			}
			mu.Unlock()
		}
	}()

	p := env.Cluster.PKI()
	start := func(id string) *exec.Cmd {
		logf, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = logf.Close() })
		cmd := exec.CommandContext(ctx, exe, "run", "--kubeconfig", env.Cluster.KubeconfigPath(), "--ca-cert", p.CA.Cert, "--ca-key", p.CA.Key,
			"--inventory", inv, "--identity", id, "--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
			"--leader-election-retry-period=500ms",
			// The burst is 30 serving CSRs of one node, past the default cap of 10 an hour.
			"--max-serving-csrs-per-node=100")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
		return cmd
	}
	holder := func(ctx context.Context) string {
		l, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "nodejoin-controller", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	first := start("first")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return holder(ctx) == "first", nil
	}); err != nil {
		t.Fatalf("the first process never led: %v", err)
	}
	start("second")

	kubelet := env.As(t, "system:node:"+node, "system:nodes")
	const burst = 30
	var names []string
	for i := range burst {
		name := fmt.Sprintf("burst-%02d", i)
		names = append(names, name)
		testenv.CreateCSR(t, kubelet, name, certificatesv1.KubeletServingSignerName, testenv.CSR(t, "system:node:"+node, []string{node}, "198.18.0.11"), testenv.ServingUsages...)
		if i == burst/3 {
			if err := first.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range names {
		if c := testenv.Settled(t, env.Client, n); len(c.Status.Certificate) == 0 {
			t.Errorf("%s not issued: %+v", n, c.Status.Conditions)
		}
	}
	if h := holder(ctx); h != "second" {
		t.Errorf("Lease held by %q after the leader was killed, want second", h)
	}
	// Let late writes show up in the watch before counting.
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, n := range names {
		if len(certs[n]) != 1 {
			t.Errorf("%s: %d distinct certificates were written, want exactly 1", n, len(certs[n]))
		}
	}
}
