// Package cli holds what nodejoin's three commands share: the signal-aware Main that
// their one-line mains call, and the version subcommand.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

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

// Execute runs root with args and streams; errors are returned, not printed.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) error {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceUsage = true
	root.SilenceErrors = true
	v := versionCommand()
	v.Example = "  " + root.Name() + " version"
	root.AddCommand(v)
	return root.ExecuteContext(ctx)
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Root().Name(), version.Get())
			return err
		},
	}
}
