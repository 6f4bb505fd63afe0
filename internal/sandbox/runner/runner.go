// Package runner runs a local cluster for `nodejoin up`: in this process until it is
// interrupted (Foreground), or in a background process of its own (--detach): Start
// runs the child and relays its progress until it reports the cluster ready, and Child,
// in the child, runs the cluster until stopped.
package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodejoin/nodejoin/internal/sandbox"
)

// Start runs this executable again with args as a background process in a session of
// its own, relays its progress to w, and returns once it reports the cluster name
// ready. Cancelling ctx before then stops the background process too. args make the
// child call Child with the descriptor 3.
func Start(ctx context.Context, name string, args []string, w io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable to run in the background: %w", err)
	}
	logf, err := OpenLog(name)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	r, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()

	//nolint:noctx // the child outlives this process; ctx ends only the wait for it to be ready
	child := exec.Command(exe, args...)
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{pw}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		_ = pw.Close()
		return fmt.Errorf("starting the background process: %w", err)
	}
	_ = pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	// Relay the background process's progress until it reports ready or gives up.
	relayed := make(chan bool, 1)
	go func() {
		ready := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if sc.Text() == readyMarker {
				ready = true
				continue
			}
			fmt.Fprintln(w, sc.Text())
		}
		relayed <- ready
	}()
	var ready bool
	select {
	case ready = <-relayed:
	case <-ctx.Done():
		_ = child.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			return fmt.Errorf("cluster %s: start interrupted; the background process ended with %w", name, err)
		}
		return fmt.Errorf("cluster %s: start interrupted", name)
	}
	if !ready {
		// The background process reported its failure and is now stopping what it
		// started, which removes the cluster's state and its logs with it: wait for it,
		// so that the cluster is gone when this command returns and the error does not
		// point at a log file that is about to disappear.
		select {
		case err := <-exited:
			return fmt.Errorf("cluster %s did not start (%w); see the messages above", name, err)
		case <-time.After(stopWait):
			return fmt.Errorf("the background process of cluster %s closed its progress pipe without reporting ready and has not exited after %s; see %s", name, stopWait, logf.Name())
		}
	}
	return nil
}

// stopWait bounds the wait for a background process that failed to start a
// cluster to stop it: its daemons get 30 s each to exit.
const stopWait = 2 * time.Minute

// readyMarker is the last line the background process sends before closing the pipe.
const readyMarker = "nodejoin: cluster ready"

// Child is the background process Start starts: it starts the cluster of opts,
// reports progress on the descriptor fd, closes it once ready, and keeps the cluster
// running until ctx ends (SIGTERM, sent by `nodejoin down`).
func Child(ctx context.Context, fd int, opts sandbox.Options) error {
	// The daemons this process starts must not inherit the pipe, or the waiting parent
	// would never see it close.
	syscall.CloseOnExec(fd)
	ready := os.NewFile(uintptr(fd), "ready")
	if ready == nil {
		return fmt.Errorf("--internal-ready-fd %d is not open", fd)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts.Progress, opts.Log = sandbox.ProgressTo(io.MultiWriter(ready, os.Stderr)), log
	sb, err := sandbox.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(ready, "error: %v\n", sandbox.FlagError(err))
		_ = ready.Close()
		return err
	}
	fmt.Fprintln(ready, readyMarker)
	_ = ready.Close()
	log.Info("cluster ready", "name", opts.Name, "endpoint", sb.Info().Endpoint)
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping cluster", "name", opts.Name)
	case <-sb.Failed():
		runErr = sb.Err()
		log.Error("cluster failed, stopping it", "name", opts.Name, "err", runErr)
	}
	// `nodejoin down` removes the state directory once this process has exited; on a
	// failure the directory stays for its logs until then.
	return errors.Join(runErr, sb.Stop(context.WithoutCancel(ctx)))
}

// OpenLog opens the log of the process that runs the cluster name.
func OpenLog(name string) (*os.File, error) {
	dir, err := sandbox.StateDir(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	path := filepath.Join(dir, "logs", "nodejoin.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return f, nil
}

// Foreground starts the cluster of opts, reporting progress on w, and calls ready with
// it; it then runs the cluster until ctx ends or the cluster fails, and stops and
// removes it. When ready fails, the cluster is stopped and removed at once.
func Foreground(ctx context.Context, opts sandbox.Options, w io.Writer, ready func(sandbox.Cluster) error) error {
	opts.Log, opts.Progress = slog.New(slog.DiscardHandler), sandbox.ProgressTo(w)
	if logf, err := OpenLog(opts.Name); err == nil {
		defer func() { _ = logf.Close() }()
		opts.Log = slog.New(slog.NewTextHandler(logf, nil))
	}
	fmt.Fprintf(w, "Starting cluster %s\n", opts.Name)
	sb, err := sandbox.Start(ctx, opts)
	if err != nil {
		return err
	}
	stopCtx := context.WithoutCancel(ctx)
	if err := ready(sb.Info()); err != nil {
		_, derr := sandbox.Delete(stopCtx, opts.Name)
		return errors.Join(err, sb.Stop(stopCtx), derr)
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop the cluster and remove it.")
	var runErr error
	select {
	case <-ctx.Done():
		fmt.Fprintf(w, "Stopping cluster %s\n", opts.Name)
	case <-sb.Failed():
		runErr = sb.Err()
		fmt.Fprintf(w, "Cluster %s failed, stopping it: %v\n", opts.Name, runErr)
	}
	if err := sb.Stop(stopCtx); err != nil {
		return errors.Join(runErr, err)
	}
	_, err = sandbox.Delete(stopCtx, opts.Name)
	return errors.Join(runErr, err)
}
