package hostsetup

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"
)

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestInstallPlugins(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "image"), filepath.Join(dir, "opt/cni/bin")
	write(t, filepath.Join(from, "nodejoin-cni"), "plugin v1", 0o755)
	write(t, filepath.Join(from, "portmap"), "portmap v1", 0o700)
	write(t, filepath.Join(from, "nodejoin-netagent"), "agent", 0o755)
	if err := os.Mkdir(filepath.Join(from, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}

	rep, err := InstallPlugins(from, to, "nodejoin-netagent")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Installed, []string{"nodejoin-cni", "portmap"}) || len(rep.Unchanged) != 0 {
		t.Fatalf("first install = %+v", rep)
	}
	for _, name := range []string{"nodejoin-cni", "portmap"} {
		fi, err := os.Stat(filepath.Join(to, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o555 != 0o555 {
			t.Errorf("%s has mode %v, want executable by all", name, fi.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(to, "nodejoin-netagent")); err == nil {
		t.Error("a skipped file was installed")
	}

	// Unchanged plugins are left alone (same inode).
	before := inode(t, filepath.Join(to, "nodejoin-cni"))
	rep, err = InstallPlugins(from, to, "nodejoin-netagent")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Installed) != 0 || len(rep.Unchanged) != 2 {
		t.Fatalf("second install = %+v, want everything unchanged", rep)
	}
	if inode(t, filepath.Join(to, "nodejoin-cni")) != before {
		t.Error("an identical plugin was rewritten")
	}

	// An upgrade replaces the file by rename: a runtime executing the old plugin keeps
	// reading the old, complete content; the old file is never truncated.
	running, err := os.Open(filepath.Join(to, "nodejoin-cni"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Close() }()
	write(t, filepath.Join(from, "nodejoin-cni"), "plugin v2, longer", 0o755)
	rep, err = InstallPlugins(from, to, "nodejoin-netagent")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Installed, []string{"nodejoin-cni"}) {
		t.Fatalf("upgrade = %+v", rep)
	}
	if inode(t, filepath.Join(to, "nodejoin-cni")) == before {
		t.Error("the upgrade wrote into the old plugin's inode")
	}
	old := make([]byte, 64)
	n, _ := running.ReadAt(old, 0)
	if string(old[:n]) != "plugin v1" {
		t.Errorf("the running plugin's file now reads %q", old[:n])
	}
	if b, _ := os.ReadFile(filepath.Join(to, "nodejoin-cni")); string(b) != "plugin v2, longer" {
		t.Errorf("installed plugin reads %q", b)
	}
	entries, _ := os.ReadDir(to)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	if _, err := InstallPlugins(filepath.Join(dir, "empty"), to); err == nil {
		t.Error("installing from a missing directory succeeded")
	}
}

func TestApplySysctls(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "net/ipv4/conf/eth0/rp_filter"), "1\n", 0o644)
	write(t, filepath.Join(root, "net/ipv4/ip_forward"), "1\n", 0o644)
	ps := ProcSys{Root: root}
	changed, err := ApplySysctls(ps, Sysctls("eth0", false))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changed, []string{"net/ipv4/conf/eth0/rp_filter"}) {
		t.Errorf("changed %v, want only rp_filter (ip_forward was right, tcp_early_demux absent)", changed)
	}
	if v, _ := ps.Get("net/ipv4/conf/eth0/rp_filter"); v != "2" {
		t.Errorf("rp_filter = %q", v)
	}
	if _, err := ApplySysctls(ps, Sysctls("ens5", false)); err == nil || !strings.Contains(err.Error(), "net.ipv4.conf.ens5.rp_filter") {
		t.Errorf("missing interface: err = %v", err)
	}
}

// TestSysctlsInNamespace sets the parameters for real, in a throwaway network namespace
// (a new one starts with ip_forward 0), and leaves the test's own namespace untouched.
func TestSysctlsInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	host, err := ProcSys{}.Get("net/ipv4/conf/lo/rp_filter")
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = orig.Close() }()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Close() }()
	changed, applyErr := ApplySysctls(ProcSys{}, Sysctls("lo", false))
	fwd, _ := ProcSys{}.Get("net/ipv4/ip_forward")
	rp, _ := ProcSys{}.Get("net/ipv4/conf/lo/rp_filter")
	if err := netns.Set(orig); err != nil {
		t.Fatalf("returning to the original namespace: %v", err) // the thread stays locked and dies
	}
	runtime.UnlockOSThread()
	if applyErr != nil {
		t.Fatal(applyErr)
	}
	if fwd != "1" || rp != "2" || !slices.Contains(changed, "net/ipv4/ip_forward") {
		t.Errorf("in the namespace: ip_forward=%s rp_filter=%s changed=%v", fwd, rp, changed)
	}
	if now, _ := (ProcSys{}).Get("net/ipv4/conf/lo/rp_filter"); now != host {
		t.Errorf("the test's own namespace changed: rp_filter %s -> %s", host, now)
	}
}
