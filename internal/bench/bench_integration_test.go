package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/controller"
	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// runAsEnv makes the test binary run as nodejoin-controller: the benchmark runs the
// controller as a child process, and the test gives it this binary.
const runAsEnv = "BENCH_TEST_RUN_AS"

func TestMain(m *testing.M) {
	switch os.Getenv(runAsEnv) {
	case "nodejoin-controller":
		os.Exit(cli.Main(controller.Run))
	case BaselineFloor:
		if err := FloorApproverArgs(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOptions runs n nodes with this binary as the controller.
func testOptions(t *testing.T, n int) Options {
	testenv.RequireIntegration(t)
	dir := testenv.BinDir(t, toolbin.Etcd, toolbin.KubeAPIServer, toolbin.KubeControllerManager, toolbin.KubeScheduler)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Nodes: n, BinDir: dir, ControllerBin: self, ControllerEnv: []string{runAsEnv + "=nodejoin-controller"},
		FloorCommand: []string{self}, FloorEnv: []string{runAsEnv + "=" + BaselineFloor},
		StateDir: t.TempDir(), Timeout: 5 * time.Minute, Progress: testWriter{t}}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// checkJoined asserts correctness, never timing: every node joined, every CSR was
// issued once, none left pending or denied.
func checkJoined(t *testing.T, what string, r *Report, n int, clientCSRs bool) {
	t.Helper()
	wantCSRs := n
	if clientCSRs {
		wantCSRs = 2 * n
	}
	switch {
	case r == nil:
		t.Fatalf("%s: no report", what)
	case r.Nodes != n || len(r.JoinedSeconds) != n:
		t.Errorf("%s: %d nodes, %d join times; want %d", what, r.Nodes, len(r.JoinedSeconds), n)
	case r.LeftPending != 0 || r.Denied != 0 || r.IssuedTwice != 0:
		t.Errorf("%s: %d left pending, %d denied, %d issued twice; want none", what, r.LeftPending, r.Denied, r.IssuedTwice)
	case r.CSRs < wantCSRs || r.CSRCreateToIssuedMS.N < wantCSRs:
		t.Errorf("%s: %d CSRs, %d issued; want at least %d", what, r.CSRs, r.CSRCreateToIssuedMS.N, wantCSRs)
	case r.AllIssuedSeconds <= 0 || r.AllIssuedSeconds < r.JoinedSeconds[0]:
		t.Errorf("%s: all issued at %vs, first join at %vs", what, r.AllIssuedSeconds, r.JoinedSeconds[0])
	case r.ControllerPeakRSSMiB <= 0 || r.APIRequestsPerNode <= 0:
		t.Errorf("%s: controller peak %v MiB, %v API requests per node: not measured", what, r.ControllerPeakRSSMiB, r.APIRequestsPerNode)
	}
}

// Both baselines in one run: each joins every node on its own cluster, the floor
// with nodejoin-controller stopped, and the report has a ratio and CPU time per
// process for each.
func TestBurstWithBaselines(t *testing.T) {
	o := testOptions(t, 5)
	o.Baseline = "kcm,floor"
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkJoined(t, "nodejoin", r, 5, true)
	if len(r.Baselines) != 2 {
		t.Fatalf("%d baselines, want kcm and floor", len(r.Baselines))
	}
	kcm, floor := r.Baselines[0], r.Baselines[1]
	checkJoined(t, "kcm", kcm, 5, true)
	checkJoined(t, "floor", floor, 5, true)
	if r.Approver != "nodejoin" || kcm.Approver != BaselineKCM || floor.Approver != BaselineFloor || r.RatioAllIssuedKCM <= 0 || r.RatioAllIssuedFloor <= 0 {
		t.Errorf("approvers %q, %q and %q, ratios %v and %v", r.Approver, kcm.Approver, floor.Approver, r.RatioAllIssuedKCM, r.RatioAllIssuedFloor)
	}
	for _, c := range []struct {
		r    *Report
		want []string
		not  string
	}{
		{r, []string{"kube-apiserver", "etcd", procController, procKubelets}, procFloor},
		{floor, []string{"kube-apiserver", "etcd", procFloor, procKubelets}, procController},
	} {
		for _, p := range c.want {
			if _, ok := c.r.CPUSeconds[p]; !ok {
				t.Errorf("%s run: no CPU seconds of %s in %v", c.r.Approver, p, c.r.CPUSeconds)
			}
		}
		if _, ok := c.r.CPUSeconds[c.not]; ok {
			t.Errorf("%s run: %s ran during the burst: %v", c.r.Approver, c.not, c.r.CPUSeconds)
		}
	}
}

// Sizes run in turn, each with its own point.
func TestGrowth(t *testing.T) {
	o := testOptions(t, 0)
	o.Sizes = []int{2, 4}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkJoined(t, "last size", r, 4, true)
	if len(r.Growth) != 2 || r.Growth[0].Nodes != 2 || r.Growth[1].Nodes != 4 || r.Growth[0].SecondsPerNode <= 0 || r.Growth[1].APIRequestsPerNode <= 0 {
		t.Errorf("growth %+v, want a measured point for 2 and for 4 nodes", r.Growth)
	}
}

func TestBurstAWSIAM(t *testing.T) {
	o := testOptions(t, 5)
	o.Identity = IdentityAWSIAM
	o.ProfileDir = t.TempDir()
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkJoined(t, "aws-iam", r, 5, false)
	// --profile: CPU profiles of the controller, kube-apiserver and the simulated
	// kubelets, and the controller's heap, each one a profile pprof reads.
	for _, name := range []string{"nodejoin-a.cpu.pprof", "nodejoin-a.heap.pprof", "nodejoin-kube-apiserver.cpu.pprof", "nodejoin-kubelets.cpu.pprof"} {
		data, err := os.ReadFile(filepath.Join(o.ProfileDir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		p, err := profile.ParseData(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if len(p.SampleType) == 0 {
			t.Errorf("%s: no sample types", name)
		}
	}
	if r.TokenReviews < 5 || r.CloudCalls.STS < 5 {
		t.Errorf("%d token reviews and %d STS calls for 5 nodes: the webhook was not used", r.TokenReviews, r.CloudCalls.STS)
	}
}

func TestFaults(t *testing.T) {
	for _, fault := range []string{FaultAPIServerRestart, FaultLeaderKill} {
		t.Run(fault, func(t *testing.T) {
			o := testOptions(t, 6)
			o.Fault = fault
			r, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			checkJoined(t, "clean", r, 6, true)
			if r.Fault == nil || r.Fault.Kind != fault {
				t.Fatalf("no %s run in the report", fault)
			}
			checkJoined(t, fault, r.Fault.Run, 6, true)
		})
	}
}
