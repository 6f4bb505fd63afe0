package instance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

// startSignal starts `nodeadm signal` inside the instance when init saved a cfn-signal
// request (init ran with --cfn-signal detach): the launcher waits for init to exit
// before it watches the node, so the wait for the Node to be Ready runs in a process
// of its own, which outlives Init and writes to the same console (nodeadm.log).
// Terminate ends it with the rest of the namespace's processes.
func (inst *Instance) startSignal(ctx context.Context, logPath string) error {
	if st, err := os.Stat(filepath.Join(inst.Root, bootstrap.SignalRequestPath)); err != nil || !st.Mode().IsRegular() {
		return nil //nolint:nilerr // no request saved: the user data has no cfn-signal call
	}
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	argv := (netns.NS{Name: inst.Namespace}).Wrap([]string{inst.p.cfg.NodeadmPath, "signal", "--root", inst.Root})
	cmd := exec.CommandContext(context.WithoutCancel(ctx), argv[0], argv[1:]...)
	cmd.Env = inst.instanceEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting nodeadm signal: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
	}()
	return nil
}
