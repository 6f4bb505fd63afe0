// Package process starts the daemons of a local cluster (etcd, kube-apiserver, later
// kubelets and containerd) as child processes, logs each to its own file, and stops
// them so that none outlives its parent.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec describes a daemon to start.
type Spec struct {
	// Name identifies the daemon in messages, such as "etcd".
	Name string
	// Argv is the command line; Argv[0] is looked up in PATH unless it holds a slash.
	Argv []string
	// Env is added to the parent's environment.
	Env []string
	// LogFile receives stdout and stderr; it is appended to, so restarts keep history.
	LogFile string
}

// Process is a running daemon.
type Process struct {
	spec Spec
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// ErrExited reports that a daemon ended while it was expected to run.
var ErrExited = errors.New("process exited")

// Start launches the daemon. The child gets SIGKILL when the parent dies (even by
// SIGKILL or a panic), and runs in a process group of its own so that Ctrl-C in a
// terminal reaches only the parent, which then stops its children in order.
func Start(spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("starting %s: empty command line", spec.Name)
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log file for %s: %w", spec.Name, err)
	}
	defer func() { _ = logf.Close() }() // the child holds its own descriptor
	fmt.Fprintf(logf, "\n=== %s: starting %s\n", time.Now().UTC().Format(time.RFC3339), spec.Name)

	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Argv[0], err)
	}
	p := &Process{spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = fmt.Errorf("%w: %s ended with status 0", ErrExited, spec.Name)
		} else {
			err = fmt.Errorf("%w: %s: %w", ErrExited, spec.Name, err)
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Name is the daemon's name.
func (p *Process) Name() string { return p.spec.Name }

// PID is the daemon's process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogFile is the path of the daemon's log.
func (p *Process) LogFile() string { return p.spec.LogFile }

// Done is closed when the daemon has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err reports why the daemon exited; it is nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits up to grace for the daemon to exit, then sends SIGKILL to
// its whole process group. It returns once the daemon has exited.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
	// Children that the daemon left in its group go too.
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
}

// Kill ends the daemon at once with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Wait blocks until the daemon exits or ctx ends.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LogTail returns the last n lines of the daemon's log, for error messages.
func (p *Process) LogTail(n int) string { return Tail(p.spec.LogFile, n) }

// Tail returns the last n lines of a file, or a note when it cannot be read.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Identity names one process for its whole life: its PID together with its start
// time, so that a PID recorded in a state file is never confused with an unrelated
// process that reused it.
type Identity struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// IdentityOf reads the identity of a running process.
func IdentityOf(pid int) (Identity, error) {
	start, zombie, err := stat(pid)
	if err != nil {
		return Identity{}, err
	}
	if zombie {
		return Identity{}, fmt.Errorf("process %d has exited", pid)
	}
	return Identity{PID: pid, Start: start}, nil
}

// Identity returns the daemon's identity.
func (p *Process) Identity() Identity {
	id, err := IdentityOf(p.PID())
	if err != nil {
		return Identity{PID: p.PID()}
	}
	return id
}

// Alive reports whether the process is still running (and not a zombie).
func (id Identity) Alive() bool {
	if id.PID <= 0 {
		return false
	}
	start, zombie, err := stat(id.PID)
	return err == nil && !zombie && (id.Start == 0 || start == id.Start)
}

// stat reads the start time (field 22 of /proc/PID/stat, in clock ticks since boot) and
// whether the process is a zombie.
func stat(pid int) (start uint64, zombie bool, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) may hold spaces and parentheses: skip past its last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("malformed start time in /proc/%d/stat: %w", pid, err)
	}
	return start, fields[0] == "Z", nil
}

// Terminate stops a process that this process did not start (one recorded in a state
// file by an earlier run): SIGTERM, up to grace to exit, then SIGKILL. It does nothing
// when the process is gone already.
func Terminate(id Identity, grace time.Duration) {
	if !id.Alive() {
		return
	}
	_ = syscall.Kill(id.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !id.Alive() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(id.PID, syscall.SIGKILL)
	for i := 0; i < 100 && id.Alive(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}
