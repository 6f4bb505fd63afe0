package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Clean(dir)))
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	// Later mounts sit on earlier ones: undo them in reverse order.
	slices.Reverse(out)
	return out, nil
}

// unmountAll detaches every mount at or below dir (the kubelet bind-mounts its root
// directory and pod volumes).
func unmountAll(dir string) error {
	points, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts lists the mount points of the host's cgroup hierarchies (v1 controllers
// and the unified v2 one).
func cgroupMounts() ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out, nil
}

// createCgroup makes the cgroup path (such as /nodejoin/demo/i-0abc) in every hierarchy,
// as the kubelet's --cgroup-root must exist in each. In the cpuset hierarchy a new group
// has no CPUs or memory nodes until given its parent's.
func createCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := m
		for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(parent, f))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				cur, _ := os.ReadFile(filepath.Join(dir, f))
				if strings.TrimSpace(string(cur)) != "" {
					continue
				}
				//nolint:gosec // G703: dir is under a cgroup mount point of the host, named by this cluster.
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o600); err != nil {
					return fmt.Errorf("setting %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroup kills what still runs in the cgroup path in any hierarchy and removes it
// with everything below it (the kubelet's kubepods groups), deepest first.
func removeCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, path)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := rmdirCgroup(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func rmdirCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		// Processes left inside: kill them and retry.
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeletSysctls are the kernel settings a kubelet that does not protect kernel
// defaults sets on the host; local instances share the host's kernel, so they are saved
// before the first kubelet starts and put back when the cluster goes.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// devicePluginDir is where every kubelet puts its device-plugin socket, whatever its
// root directory: the path is compiled in.
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// hostState is what local kubelets change on the host, as it was before.
type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
	// KubeletDirExisted is false when /var/lib/kubelet was made by local kubelets.
	KubeletDirExisted bool `json:"kubeletDirExisted"`
}

const sysctlFile = "host-sysctls.json"

// saveHostState records the host's state (kernel settings, /var/lib/kubelet) in dir once;
// later calls keep the first record.
func saveHostState(dir string) error {
	path := filepath.Join(dir, sysctlFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	st := hostState{Sysctls: map[string]string{}}
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		st.Sysctls[k] = strings.TrimSpace(string(v))
	}
	if _, err := os.Stat(filepath.Dir(devicePluginDir)); err == nil {
		st.KubeletDirExisted = true
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// restoreHostState puts back what saveHostState recorded in dir and forgets it.
func restoreHostState(dir string) error {
	path := filepath.Join(dir, sysctlFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st hostState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	var errs []error
	if !st.KubeletDirExisted {
		// Only what the kubelets made; anything else keeps the directory.
		_ = os.Remove(filepath.Join(devicePluginDir, "kubelet.sock"))
		_ = os.Remove(devicePluginDir)
		_ = os.Remove(filepath.Dir(devicePluginDir))
	}
	for k, v := range st.Sysctls {
		if !slices.Contains(kubeletSysctls, k) {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v+"\n"), 0o600); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", k, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(path)
	}
	return errors.Join(errs...)
}
