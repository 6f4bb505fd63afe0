package bootstrap

import (
	"encoding/json"
	"fmt"

	"github.com/pelletier/go-toml/v2"

	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

// SandboxImage is the pause image. Nodes never pull it: local instances get it imported
// at launch (hack/images builds it), as EKS AMIs have it cached.
const SandboxImage = "registry.k8s.io/pause:3.10.2"

// containerd renders containerd's config.toml (schema version 2, which containerd 1.x
// reads), merges the user's TOML over it, and writes the base OCI runtime spec.
func (r *renderer) containerd() error {
	systemdCgroup := true
	if raw, ok := r.cfg.Spec.Kubelet.Config["cgroupDriver"]; ok {
		var driver string
		if err := json.Unmarshal(raw, &driver); err == nil && driver == "cgroupfs" {
			// containerd and the kubelet must agree on the cgroup driver.
			systemdCgroup = false
		}
	}
	runc := map[string]any{
		"runtime_type":      "io.containerd.runc.v2",
		"base_runtime_spec": r.p(BaseRuntimeSpecPath),
		"options":           map[string]any{"BinaryName": "/usr/sbin/runc", "SystemdCgroup": systemdCgroup},
	}
	base := map[string]any{
		"version": 2,
		"root":    r.p("/var/lib/containerd"),
		"state":   r.p("/run/containerd"),
		"grpc":    map[string]any{"address": r.p("/run/containerd/containerd.sock")},
		"plugins": map[string]any{
			"io.containerd.grpc.v1.cri": map[string]any{
				"sandbox_image": SandboxImage,
				"enable_cdi":    r.versionAtLeast("v1.32.0"),
				"containerd": map[string]any{
					"default_runtime_name":    "runc",
					"discard_unpacked_layers": true,
					"runtimes":                map[string]any{"runc": runc},
				},
				"cni":      map[string]any{"bin_dir": r.o.CNIBinDir, "conf_dir": r.p("/etc/cni/net.d")},
				"registry": map[string]any{"config_path": "/etc/containerd/certs.d:/etc/docker/certs.d"},
			},
		},
	}
	baseTOML, err := toml.Marshal(base)
	if err != nil {
		return fmt.Errorf("encoding containerd config: %w", err)
	}
	merged, err := nodeconfig.MergeTOML(string(baseTOML), r.cfg.Spec.Containerd.Config)
	if err != nil {
		return fmt.Errorf("spec.containerd.config: %w", err)
	}
	r.out.Files.add(ContainerdConfigPath, 0o644, []byte(merged))

	spec, err := nodeconfig.MergeDocuments(defaultRuntimeSpec(), r.cfg.Spec.Containerd.BaseRuntimeSpec)
	if err != nil {
		return fmt.Errorf("spec.containerd.baseRuntimeSpec: %w", err)
	}
	data, err := indentJSON(spec)
	if err != nil {
		return err
	}
	r.out.Files.add(BaseRuntimeSpecPath, 0o644, data)
	return nil
}

// defaultRuntimeSpec is the OCI spec every container starts from: containerd's
// defaults, with a higher open-files limit.
func defaultRuntimeSpec() map[string]json.RawMessage {
	caps := []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD", "CAP_NET_BIND_SERVICE",
		"CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE",
	}
	spec := map[string]any{
		"ociVersion": "1.1.0",
		"process": map[string]any{
			"user":            map[string]int{"uid": 0, "gid": 0},
			"cwd":             "/",
			"capabilities":    map[string][]string{"bounding": caps, "effective": caps, "permitted": caps},
			"rlimits":         []map[string]any{{"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576}},
			"noNewPrivileges": true,
		},
		"root": map[string]string{"path": "rootfs"},
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}},
			"maskedPaths": []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	out := map[string]json.RawMessage{}
	for k, v := range spec {
		raw, _ := json.Marshal(v)
		out[k] = raw
	}
	return out
}
