// Package cli holds what nodejoin's commands share: the signal-aware Main that
// their one-line mains call, the logging flags, and the version subcommand.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/logging"
	"github.com/nodejoin/nodejoin/internal/version"
)

// RunFunc is a command's testable entry point.
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments and streams, cancelling its context on
// SIGINT or SIGTERM, and returns the exit code.
func Main(run RunFunc) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// Execute runs root with args and streams; errors are returned, not printed. It adds the
// logging flags (-v, --log-format) to every command: before a command runs, the logger
// they describe, writing to stderr, is klog's and is in the command's context
// (logging.FromContext). A subcommand's own PersistentPreRunE would replace the root's
// (cobra runs only the nearest), so subcommands use PreRunE.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) error {
	var lo logging.Options
	lo.Bind(root.PersistentFlags())
	next := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		l, err := lo.Setup(stderr)
		if err != nil {
			return err
		}
		cmd.SetContext(logging.NewContext(cmd.Context(), l))
		if next != nil {
			return next(cmd, args)
		}
		return nil
	}
	root.SetFlagErrorFunc(flagError)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.AddCommand(versionCommand(root.Name()))
	return root.ExecuteContext(ctx)
}

func versionCommand(rootName string) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  " + rootName + " version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Root().Name(), version.Get())
			return err
		},
	}
}

// flagError says which flag has an invalid value as options' own checks do:
// --output "xml": want text, json or yaml.
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if errors.As(err, &ive) {
		return fmt.Errorf("--%s %q: %w", ive.GetFlag().Name, ive.GetValue(), errors.Unwrap(ive))
	}
	return err
}
