package netagent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(t.Context(), args, &out, &out)
	return out.String(), err
}

func TestInit(t *testing.T) {
	dir := t.TempDir()
	from, bin, proc := filepath.Join(dir, "plugins"), filepath.Join(dir, "bin"), filepath.Join(dir, "proc")
	for path, content := range map[string]string{
		filepath.Join(from, "nodejoin-cni"):                    "cni",
		filepath.Join(from, "loopback"):                        "lo",
		filepath.Join(proc, "net/ipv4/conf/eth0/rp_filter"):    "1",
		filepath.Join(proc, "net/ipv4/ip_forward"):             "0",
		filepath.Join(proc, "net/ipv4/tcp_early_demux"):        "1",
		filepath.Join(proc, "net/ipv4/conf/eth0/unrelated"):    "x",
		filepath.Join(proc, "net/ipv4/conf/default/rp_filter"): "1",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DISABLE_TCP_EARLY_DEMUX", "true")
	if out, err := run(t, "init", "--plugins-from", from, "--cni-bin-dir", bin, "--primary-interface", "eth0", "--proc-sys", proc); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	for _, name := range []string{"nodejoin-cni", "loopback"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Errorf("plugin %s not installed: %v", name, err)
		}
	}
	for key, want := range map[string]string{"net/ipv4/conf/eth0/rp_filter": "2", "net/ipv4/ip_forward": "1", "net/ipv4/tcp_early_demux": "0"} {
		if b, _ := os.ReadFile(filepath.Join(proc, key)); strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q, want %s", key, b, want)
		}
	}
	if _, err := run(t, "init", "--cni-bin-dir", bin); err == nil || !strings.Contains(err.Error(), "--plugins-from") {
		t.Errorf("init without --plugins-from: %v", err)
	}
}

func TestIpamdNeedsThePlugin(t *testing.T) {
	dir := t.TempDir()
	_, err := run(t, "ipamd", "--cni-bin-dir", dir, "--cni-conf-dir", dir, "--state-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "nodejoin-netagent init") {
		t.Fatalf("ipamd without the plugin installed: err = %v", err)
	}
	t.Setenv("WARM_IP_TARGET", "many")
	if _, err := run(t, "ipamd", "--cni-bin-dir", dir); err == nil || !strings.Contains(err.Error(), "WARM_IP_TARGET") {
		t.Fatalf("ipamd with a bad knob: err = %v", err)
	}
}
