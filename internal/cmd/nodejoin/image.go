package nodejoin

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

func imageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "image",
		Aliases: []string{"images"},
		Short:   "Load image archives into a running cluster's nodes, and list their images",
		Long: "Nodes of a local cluster cannot pull images. Every real node imports the images `make images`\n" +
			"builds (bin/images/*.tar) at launch; `image load` imports your own archives into every node,\n" +
			"and into nodes added later. Use the images with imagePullPolicy IfNotPresent or Never.",
		Example: "  docker save -o app.tar example.com/app:v1   # or any docker-save / OCI archive\n" +
			"  nodejoin image load --name demo app.tar\n" +
			"  nodejoin image list --name demo",
	}
	cmd.AddCommand(imageLoadCommand(), imageListCommand())
	return cmd
}

func imageLoadCommand() *cobra.Command {
	var name string
	var output printer.Format
	cmd := &cobra.Command{
		Use:   "load ARCHIVE...",
		Short: "Import docker-save or OCI image archives into every node of a running cluster",
		Long: "load imports each archive into the containerd of every real node, nodes in parallel, under the\n" +
			"names the archive gives (docker-save RepoTags, or OCI ref.name annotations), and keeps a copy\n" +
			"in the cluster's state directory so that nodes added later import it at launch. Simulated\n" +
			"nodes have no containerd and are skipped.",
		Example: "  nodejoin image load --name demo app.tar\n" +
			"  nodejoin image load --name demo app.tar sidecar-oci.tar -o json",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := sandbox.LoadImages(cmd.Context(), name, args)
			if res != nil {
				if perr := printer.Print(cmd.OutOrStdout(), output, res, func(w io.Writer) { sandbox.WriteImageLoad(w, name, args, res) }); perr != nil {
					return perr
				}
			}
			return err
		},
	}
	nameFlag(cmd, &name)
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}

func imageListCommand() *cobra.Command {
	var name string
	var output printer.Format
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the images each node of a running cluster holds",
		Example: "  nodejoin image list --name demo\n" +
			"  nodejoin image list --name demo -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := sandbox.ListImages(cmd.Context(), name)
			if err != nil {
				return err
			}
			return printer.Print(cmd.OutOrStdout(), output, res, func(w io.Writer) { sandbox.WriteImageList(w, name, res) })
		},
	}
	nameFlag(cmd, &name)
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}
