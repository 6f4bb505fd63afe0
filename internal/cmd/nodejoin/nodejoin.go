// Package nodejoin is the operator CLI: it starts and stops local clusters whose nodes
// really join.
package nodejoin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// Run runs nodejoin with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin",
		Short: "Run local Kubernetes clusters whose nodes join the way EKS nodes do",
	}
	root.AddCommand(upCommand(), downCommand(), kubeconfigCommand(), nodeCommand(), diagnoseCommand(), imdsCommand())
	return cli.Execute(ctx, root, args, stdout, stderr)
}

// StateRoot is where clusters keep their state: $XDG_STATE_HOME/nodejoin, by default
// ~/.local/state/nodejoin.
func StateRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "nodejoin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the state directory: set XDG_STATE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".local", "state", "nodejoin"), nil
}

func stateDir(name string) (string, error) {
	root, err := StateRoot()
	if err != nil {
		return "", err
	}
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return "", fmt.Errorf("cluster name %q is not a plain name", name)
	}
	return filepath.Join(root, name), nil
}

func nameFlag(cmd *cobra.Command, name *string) {
	cmd.Flags().StringVar(name, "name", controlplane.DefaultName, "cluster name")
}

func kubeconfigCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of a running cluster's admin kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, s, err := runningCluster(name)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), s.Kubeconfig)
			return err
		},
	}
	nameFlag(cmd, &name)
	return cmd
}

// runningCluster returns the state directory and state of the running cluster name, or
// an error that says what to do.
func runningCluster(name string) (string, *controlplane.State, error) {
	dir, err := stateDir(name)
	if err != nil {
		return "", nil, err
	}
	s, err := controlplane.ReadState(dir)
	if errors.Is(err, controlplane.ErrNoCluster) {
		return "", nil, fmt.Errorf("no cluster named %s (nothing in %s); start one with `nodejoin up --name %s`", name, dir, name)
	}
	if err != nil {
		return "", nil, err
	}
	if !s.Running() || !s.Ready {
		return "", nil, fmt.Errorf("cluster %s is not running; clean it up with `nodejoin down --name %s` and start it again", name, name)
	}
	return dir, s, nil
}

func downCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop a cluster and remove everything it left: processes, network namespace, state",
		Long: "down stops the named cluster and removes its state directory. It also cleans up after a\n" +
			"cluster whose `up` crashed or was killed. Removing a cluster that does not exist is not an error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := stateDir(name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			_, statErr := os.Stat(dir)
			leftNS := controlplane.LeftoverNamespace(name)
			if os.IsNotExist(statErr) && leftNS == "" {
				_, err := fmt.Fprintf(out, "cluster %s: nothing to remove\n", name)
				return err
			}
			if s, err := controlplane.ReadState(dir); err == nil && s.Running() {
				fmt.Fprintf(out, "stopping cluster %s (pid %d)\n", name, s.Owner.PID)
			}
			if err := destroyCluster(cmd.Context(), dir, name); err != nil {
				return fmt.Errorf("removing cluster %s: %w", name, err)
			}
			if err := controlplane.DeleteLeftoverNamespace(cmd.Context(), name); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "cluster %s removed\n", name)
			return err
		},
	}
	nameFlag(cmd, &name)
	return cmd
}

// destroyCluster stops the cluster in dir and removes everything it made: first its
// owner process (which stops its instances and daemons in order), then whatever a
// crashed owner left — instance processes, mounts, cgroups, namespaces — then the
// control plane's leftovers and the state directory.
func destroyCluster(ctx context.Context, dir, name string) error {
	if s, err := controlplane.ReadState(dir); err == nil && s.Running() && s.Owner.PID != os.Getpid() {
		process.Terminate(s.Owner, 90*time.Second)
	}
	if err := instance.Cleanup(ctx, filepath.Join(dir, "instances"), name); err != nil {
		return err
	}
	return controlplane.Destroy(ctx, dir)
}
