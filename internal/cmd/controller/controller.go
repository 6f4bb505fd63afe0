// Package controller is the command line of nodejoin-controller, the control-plane
// side of node joining.
package controller

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
)

// Run runs nodejoin-controller with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin-controller",
		Short: "Authenticate joining nodes, approve and sign their certificates",
	}
	return cli.Execute(ctx, root, args, stdout, stderr)
}
