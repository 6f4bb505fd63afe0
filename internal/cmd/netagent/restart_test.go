package netagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netagent"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

// TestHelperIpamd is not a test: TestKilledAndRestarted runs the test binary as
// `nodejoin-netagent ipamd` through it.
func TestHelperIpamd(t *testing.T) {
	args := os.Getenv("NODEJOIN_TEST_IPAMD_ARGS")
	if args == "" {
		t.Skip("run by TestKilledAndRestarted")
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Run(ctx, argv, os.Stderr, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestKilledAndRestarted runs ipamd as its own process against the local cloud, kills
// it (SIGKILL) with pods holding addresses, and starts it again: the stale conflist is
// removed before anything else and stays away while EC2 is unreachable; once ipamd is
// ready again every pod gets its address back, nothing is assigned twice and nothing
// leaks; SIGTERM removes the conflist.
func TestKilledAndRestarted(t *testing.T) {
	e := localaws.NewEC2("111122223333")
	subnet := localaws.Subnet{ID: "subnet-00000000000000001", VPCID: "vpc-00000000000000001", AvailabilityZone: "us-west-2a", CIDR: netip.MustParsePrefix("198.18.0.0/16")}
	if err := e.AddSubnet(subnet); err != nil {
		t.Fatal(err)
	}
	inst := localaws.Instance{ID: "i-0000000000000000b", Type: "m5.large", AvailabilityZone: "us-west-2a", PrivateIPv4: "198.18.0.11",
		SubnetID: subnet.ID, VPCID: subnet.VPCID, VPCIPv4CIDRs: []string{"198.18.0.0/16"}}
	if err := localaws.InstanceDefaults(&inst); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(inst); err != nil {
		t.Fatal(err)
	}
	var ec2Down atomic.Bool
	ec2Srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ec2Down.Load() {
			http.Error(w, "unreachable", http.StatusServiceUnavailable)
			return
		}
		e.ServeHTTP(w, r)
	}))
	defer ec2Srv.Close()
	imdsSrv := httptest.NewServer(localaws.NewIMDS(inst, nil).WithEC2(e))
	defer imdsSrv.Close()

	dir := t.TempDir()
	bin, conf, state := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d"), filepath.Join(dir, "run")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, netagent.PluginName), []byte("plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	introspection := l.Addr().String()
	_ = l.Close()
	conflist := filepath.Join(conf, "10-aws.conflist")
	exists := func() bool { _, err := os.Stat(conflist); return err == nil }

	start := func(name string) *exec.Cmd {
		args := []string{"ipamd", "--cni-bin-dir", bin, "--cni-conf-dir", conf, "--state-dir", state, "--log-dir", dir,
			"--metrics-addr", "", "--introspection-addr", introspection}
		argv, _ := json.Marshal(args)
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperIpamd$", "-test.v=false")
		cmd.Env = append(os.Environ(),
			"NODEJOIN_TEST_IPAMD_ARGS="+string(argv),
			"AWS_EC2_METADATA_SERVICE_ENDPOINT="+imdsSrv.URL,
			"AWS_ENDPOINT_URL_EC2="+ec2Srv.URL,
			"AWS_ACCESS_KEY_ID=AKIDLOCALNODE0000000", "AWS_SECRET_ACCESS_KEY=local-node-secret",
			"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"),
			// The primary ENI only: 5 addresses, at least 1 free.
			"WARM_IP_TARGET=1", "MINIMUM_IP_TARGET=5")
		logFile, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = logFile.Close()
			if t.Failed() || os.Getenv("NODEJOIN_TEST_SHOW_LOGS") != "" {
				b, _ := os.ReadFile(logFile.Name())
				t.Logf("%s's log:\n%s", name, b)
			}
		})
		return cmd
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	healthz := func() int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+introspection+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	addAll := func(ids ...string) map[string]string {
		c, err := ipamrpc.Dial(filepath.Join(state, "ipamd.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		out := map[string]string{}
		for _, id := range ids {
			waitFor("an address for "+id, func() bool {
				r, err := c.AddNetwork(t.Context(), &ipamrpc.AddRequest{ContainerID: id, IfName: "eth0", NetworkName: "aws-cni", PodName: id, PodNamespace: "default"})
				if err != nil && !ipamrpc.IsPoolEmpty(err) {
					t.Fatalf("AddNetwork(%s): %v", id, err)
				}
				if err == nil {
					out[id] = r.IPv4Addr
				}
				return err == nil
			})
		}
		return out
	}

	first := start("first")
	waitFor("the conflist of the first ipamd", exists)
	before := addAll("p0", "p1", "p2", "p3", "p4")
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if !exists() {
		t.Fatal("the conflist went away with a killed ipamd; this test needs the stale one")
	}

	ec2Down.Store(true)
	second := start("second")
	waitFor("the stale conflist to be removed", func() bool { return !exists() })
	waitFor("the introspection server", func() bool { return healthz() != 0 })
	if code := healthz(); code != http.StatusServiceUnavailable || exists() {
		t.Fatalf("while EC2 is unreachable: /healthz %d, conflist present %v", code, exists())
	}
	ec2Down.Store(false)
	waitFor("the conflist of the second ipamd", exists)
	after := addAll("p0", "p1", "p2", "p3", "p4", "p5")
	held := map[string]string{}
	for id, ip := range after {
		if id != "p5" && ip != before[id] {
			t.Errorf("%s had %s before the kill, %s after", id, before[id], ip)
		}
		if other, dup := held[ip]; dup {
			t.Fatalf("%s assigned to %s and %s", ip, other, id)
		}
		held[ip] = id
	}
	// Nothing leaked: every secondary address EC2 lists is held or free in ipamd's
	// checkpointed view, and the six pods hold six of them.
	nics := e.InstanceNetworkInterfaces(inst.ID)
	if len(nics) != 1 {
		t.Fatalf("%d ENIs attached, want the primary only", len(nics))
	}
	for _, ip := range nics[0].PrivateIPv4s[1:] {
		delete(held, ip)
	}
	if len(held) != 0 {
		t.Errorf("addresses held by pods that EC2 does not list: %v", held)
	}

	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := second.Wait(); err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	} else if err != nil {
		t.Fatalf("ipamd exited with %v after SIGTERM", err)
	}
	if exists() {
		t.Fatal("the conflist outlived ipamd's SIGTERM")
	}
}
