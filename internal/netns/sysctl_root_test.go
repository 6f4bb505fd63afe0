package netns

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Sysctl changes the namespace's setting and not the host's.
func TestSysctlIsPerNamespace(t *testing.T) {
	requireRoot(t)
	ctx := t.Context()
	ns, err := Create(ctx, "nodejoin-test-sysctl")
	if err != nil {
		t.Fatal(err)
	}
	// t.Context() is canceled before cleanups run.
	t.Cleanup(func() { _ = Delete(context.Background(), ns.Name) })
	host, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		argv := ns.Wrap([]string{"cat", "/proc/sys/net/ipv4/ip_forward"})
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := read(); got != "0" {
		t.Fatalf("a new namespace forwards: ip_forward=%s", got)
	}
	if err := ns.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "1" {
		t.Errorf("ip_forward=%s in the namespace after setting it", got)
	}
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(after) != string(host) {
		t.Errorf("the host's ip_forward changed from %q to %q", host, after)
	}
	if err := ns.Sysctl("kernel.hostname", "x"); err == nil {
		t.Error("a non-network sysctl was accepted")
	}
}
