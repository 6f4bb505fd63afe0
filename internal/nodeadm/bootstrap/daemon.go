package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/dbus"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/process"
)

// The daemons nodeadm starts, in order.
const (
	Containerd = "containerd"
	Kubelet    = "kubelet"
)

// Daemons lists the daemons in start order.
var Daemons = []string{Containerd, Kubelet}

// DaemonManager (re)starts a node's daemons once their files are written.
type DaemonManager interface {
	// Restart starts the daemon, stopping a running one first, and returns once it runs.
	Restart(ctx context.Context, name string) error
}

// SystemdManager restarts systemd units over D-Bus, as on a real host.
type SystemdManager struct {
	// Timeout bounds the wait for a unit to become active. Default 5 minutes.
	Timeout time.Duration
}

// Restart reloads unit files, restarts NAME.service and waits until it is active.
func (m SystemdManager) Restart(ctx context.Context, name string) error {
	conn, err := dbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("connecting to systemd over D-Bus: %w", err)
	}
	defer conn.Close()
	if err := conn.ReloadContext(ctx); err != nil {
		return fmt.Errorf("systemctl daemon-reload: %w", err)
	}
	unit := name + ".service"
	done := make(chan string, 1)
	if _, err := conn.RestartUnitContext(ctx, unit, "replace", done); err != nil {
		return fmt.Errorf("restarting %s: %w", unit, err)
	}
	timeout := m.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("restarting %s: job %s (see journalctl -u %s)", unit, res, unit)
		}
	case <-ctx.Done():
		return fmt.Errorf("restarting %s: no result after %s", unit, timeout)
	}
	for {
		p, err := conn.GetUnitPropertyContext(ctx, unit, "ActiveState")
		if err != nil {
			return fmt.Errorf("reading the state of %s: %w", unit, err)
		}
		if state := strings.Trim(p.Value.String(), `"`); state == "active" {
			return nil
		} else if state == "failed" {
			return fmt.Errorf("%s failed to start (see journalctl -u %s)", unit, unit)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not active after %s (see journalctl -u %s)", unit, timeout, unit)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ProcessManager runs the daemons as processes of their own session, for local
// instances whose host has no systemd for them. Each daemon logs to
// ROOT/var/log/NAME.log and is recorded in ROOT/run/nodeadm/NAME.pid (PID and start
// time), which the next restart uses to stop it.
type ProcessManager struct {
	Root string
	// Binaries maps a daemon to its executable; missing ones are looked up in PATH.
	Binaries map[string]string
	// Wrap, when set, prefixes every command line (such as nsenter into a namespace).
	Wrap func(argv []string) []string
}

// PIDFile is where the manager records daemon name's PID and start time.
func (m ProcessManager) PIDFile(name string) string {
	return filepath.Join(m.Root, "run", "nodeadm", name+".pid")
}

func (m ProcessManager) argv(name string) ([]string, error) {
	bin := m.Binaries[name]
	if bin == "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("%s not found in PATH: %w", name, err)
		}
		bin = p
	}
	switch name {
	case Containerd:
		return []string{bin, "--config", filepath.Join(m.Root, ContainerdConfigPath)}, nil
	case Kubelet:
		args, err := ReadKubeletArgs(filepath.Join(m.Root, KubeletEnvPath))
		if err != nil {
			return nil, err
		}
		return append([]string{bin}, args...), nil
	default:
		return nil, fmt.Errorf("unknown daemon %q", name)
	}
}

// kubeletStarts is how often Restart starts a kubelet that exits at once, a second
// apart, as systemd's kubelet.service (Restart=always) would: a kubelet started while
// containerd's CRI plugin is still initializing exits with "server is not initialized
// yet", and the next start finds it ready.
const kubeletStarts = 5

// errExited is a daemon that exited while Restart waited for it to run.
var errExited = errors.New("exited")

// Restart stops the recorded process, if it still runs, and starts a new one.
func (m ProcessManager) Restart(ctx context.Context, name string) error {
	argv, err := m.argv(name)
	if err != nil {
		return err
	}
	if old, err := ReadPIDFile(m.PIDFile(name)); err == nil {
		process.Terminate(old, 15*time.Second)
	}
	if m.Wrap != nil {
		argv = m.Wrap(argv)
	}
	logPath := filepath.Join(m.Root, "var", "log", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o750); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := m.start(ctx, name, argv, logPath)
		if err == nil || name != Kubelet || attempt == kubeletStarts || !errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// start starts one daemon process, records it, and waits until it runs.
func (m ProcessManager) start(ctx context.Context, name string, argv []string, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	id, err := process.IdentityOf(cmd.Process.Pid)
	if err != nil {
		// Gone before its identity could be read: the same exit waitRunning reports (so
		// a kubelet is started again), with its last lines, once it is reaped.
		_ = cmd.Wait()
		return fmt.Errorf("%s %w at once; last lines of %s:\n%s", name, errExited, logPath, process.Tail(logPath, 10))
	}
	if err := atomicfile.WriteFile(m.PIDFile(name), []byte(fmt.Sprintf("%d %d\n", id.PID, id.Start)), 0o644); err != nil {
		return err
	}
	_ = cmd.Process.Release()
	return m.waitRunning(ctx, name, id, logPath)
}

// waitRunning waits until containerd's socket answers, or the kubelet has stayed up
// for a second.
func (m ProcessManager) waitRunning(ctx context.Context, name string, id process.Identity, logPath string) error {
	deadline := time.Now().Add(30 * time.Second)
	socket := filepath.Join(m.Root, "run", "containerd", "containerd.sock")
	start := time.Now()
	for {
		if !id.Alive() {
			return fmt.Errorf("%s %w; last lines of %s:\n%s", name, errExited, logPath, process.Tail(logPath, 10))
		}
		switch name {
		case Containerd:
			if _, err := os.Stat(socket); err == nil {
				return nil
			}
		default:
			if time.Since(start) > time.Second {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 30s; see %s", name, logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ReadPIDFile reads a daemon's identity from the file PIDFile names.
func ReadPIDFile(path string) (process.Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return process.Identity{}, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return process.Identity{}, errors.New("malformed pid file")
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return process.Identity{}, errors.New("malformed pid file")
	}
	return process.Identity{PID: pid, Start: start}, nil
}

// ReadKubeletArgs reads the kubelet's flags from the environment file nodeadm writes.
func ReadKubeletArgs(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the kubelet's flags: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, KubeletArgsVar+"="); ok {
			return strings.Fields(v), nil
		}
	}
	return nil, fmt.Errorf("%s has no %s line", path, KubeletArgsVar)
}
