package netns

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: skipped with -short")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("network namespace tests need root, and CI runs as root")
		}
		t.Skip("network namespaces need root")
	}
}

func TestForwardReachesAServerInsideTheNamespace(t *testing.T) {
	requireRoot(t)
	ctx := t.Context()
	name := fmt.Sprintf("nj-test-%d", os.Getpid())
	ns, err := Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Delete(context.Background(), name); err != nil {
			t.Errorf("deleting namespace: %v", err)
		}
		if ns.Exists() {
			t.Error("namespace still exists after Delete")
		}
	})
	if _, err := Create(ctx, name); err == nil {
		t.Error("Create of an existing namespace succeeded")
	}
	if users, err := ns.Users(); err != nil || len(users) != 0 {
		t.Errorf("Users of a new namespace = %v, %v; want none", users, err)
	}
	sleeper := exec.CommandContext(ctx, "nsenter", "--net="+ns.Path(), "--", "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	// nsenter enters the namespace just after it starts: wait for it.
	var users []int
	for range 250 {
		if users, err = ns.Users(); err != nil || slices.Contains(users, sleeper.Process.Pid) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if err != nil || !slices.Contains(users, sleeper.Process.Pid) {
		t.Errorf("Users = %v, %v; want it to contain %d", users, err, sleeper.Process.Pid)
	}
	if err := ns.AddBridge(ctx, "br-test", netip.MustParsePrefix("198.18.7.1/24")); err != nil {
		t.Fatal(err)
	}

	// A server on the bridge address inside the namespace, unreachable from the host.
	inner, err := ns.Listen("tcp", "198.18.7.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inner.Close() }()
	go func() {
		for {
			c, err := inner.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "echo %s", line)
			}()
		}
	}()
	d := net.Dialer{Timeout: time.Second}
	if c, err := d.DialContext(ctx, "tcp", inner.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatalf("the namespace's address %s is reachable from the host namespace", inner.Addr())
	}

	var lc net.ListenConfig
	outer, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fwdCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ns.Forward(fwdCtx, outer, inner.Addr().String(), slog.New(slog.DiscardHandler)) }()

	c, err := d.DialContext(ctx, "tcp", outer.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "hello\n")
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if reply != "echo hello\n" {
		t.Errorf("reply = %q", reply)
	}
	_ = c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Forward: %v", err)
	}
}
