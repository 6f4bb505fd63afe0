package manager_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

// Fifty nodes ask for serving certificates at once; four workers settle them. Each CSR
// is approved once and issued once, and the metrics endpoint serves controller-runtime's
// workqueue, reconcile, client, Go and process metrics next to nodejoin's.
func TestWorkersSettleEachCSROnce(t *testing.T) {
	const nodes, workers = 50, 4
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	inv := map[string]*inventory.Instance{}
	name := func(i int) string { return fmt.Sprintf("ip-198-18-1-%d.local.internal", i) }
	ip := func(i int) string { return fmt.Sprintf("198.18.1.%d", i) }
	for i := range nodes {
		inv[name(i)] = &inventory.Instance{ID: fmt.Sprintf("i-%017d", i), State: "running", PrivateDNSName: name(i), DNSNames: []string{name(i)},
			IPs: []netip.Addr{netip.MustParseAddr(ip(i))}}
	}
	data, err := inventory.Encode(inv)
	if err != nil {
		t.Fatal(err)
	}
	invPath := filepath.Join(t.TempDir(), "inventory.json")
	if err := os.WriteFile(invPath, data, 0o600); err != nil {
		t.Fatal(err)
	}

	var lc net.ListenConfig
	ml, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	issued := map[string]int{}
	var logs testenv.SyncBuffer
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, manager.Config{
			REST:                 env.Config,
			Log:                  slog.New(slog.NewTextHandler(&logs, nil)),
			Signer:               &csr.Signer{CA: env.Cluster.CA()},
			Nodes:                &inventory.File{Path: invPath},
			CSRWorkers:           workers,
			InstallRBAC:          true,
			TokenCleanupInterval: -1,
			MetricsListener:      ml,
			OnIssued:             func(n string) { mu.Lock(); issued[n]++; mu.Unlock() },
			OnStarted:            func() { close(started) },
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v\n%s", err, logs.String())
		}
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("manager: %v\n%s", err, logs.String())
	}

	var wg sync.WaitGroup
	for i := range nodes {
		kubelet := env.As(t, "system:node:"+name(i), "system:nodes")
		req := testenv.CSR(t, "system:node:"+name(i), []string{name(i)}, ip(i))
		wg.Go(func() {
			testenv.CreateCSR(t, kubelet, fmt.Sprintf("serving-%02d", i), certificatesv1.KubeletServingSignerName, req, testenv.ServingUsages...)
		})
	}
	wg.Wait()
	for i := range nodes {
		n := fmt.Sprintf("serving-%02d", i)
		c := testenv.Settled(t, env.Client, n)
		approvals := 0
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved {
				approvals++
			}
		}
		if approvals != 1 || len(c.Status.Certificate) == 0 {
			t.Errorf("%s: %d approvals, certificate %t: %+v", n, approvals, len(c.Status.Certificate) > 0, c.Status.Conditions)
		}
	}
	// OnIssued runs after the write returned; give the last ones a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		count := len(issued)
		mu.Unlock()
		if count == nodes || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	for n, count := range issued {
		if count != 1 {
			t.Errorf("%s issued %d times", n, count)
		}
	}
	if len(issued) != nodes {
		t.Errorf("%d CSRs issued, want %d", len(issued), nodes)
	}
	mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ml.Addr().String()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	metrics := string(body)
	for _, want := range []string{
		// nodejoin's: every CSR decided exactly once.
		fmt.Sprintf(`nodejoin_csr_decisions_total{decision="approved",reason="%s",signer="kubernetes.io/kubelet-serving"} %d`, csr.ReasonApproved, nodes),
		"nodejoin_csr_approve_to_issue_seconds_count",
		// controller-runtime's.
		fmt.Sprintf(`controller_runtime_max_concurrent_reconciles{controller="certificatesigningrequest"} %d`, workers),
		`workqueue_adds_total{controller="certificatesigningrequest",name="certificatesigningrequest"}`,
		`workqueue_queue_duration_seconds_bucket{controller="certificatesigningrequest"`,
		`controller_runtime_reconcile_total{controller="certificatesigningrequest",result="success"}`,
		"rest_client_requests_total{",
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s\nlog:\n%s", metrics, logs.String())
	}
}
