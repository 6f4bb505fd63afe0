package nodejoin

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

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
	var name, output string
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
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := sandbox.LoadImages(cmd.Context(), name, args)
			if output != outputText {
				if res != nil {
					if perr := printStructured(cmd.OutOrStdout(), output, res); perr != nil {
						return perr
					}
				}
				return err
			}
			if res != nil {
				printImageLoad(cmd.OutOrStdout(), name, args, res)
			}
			return err
		},
	}
	nameFlag(cmd, &name)
	outputFlag(cmd, &output)
	return cmd
}

func imageListCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the images each node of a running cluster holds",
		Example: "  nodejoin image list --name demo\n" +
			"  nodejoin image list --name demo -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := sandbox.ListImages(cmd.Context(), name)
			if err != nil {
				return err
			}
			if output != outputText {
				return printStructured(cmd.OutOrStdout(), output, res)
			}
			printImageList(cmd.OutOrStdout(), name, res)
			return nil
		},
	}
	nameFlag(cmd, &name)
	outputFlag(cmd, &output)
	return cmd
}

// printImageLoad prints one line per node: what it imported, why it was skipped, or
// its error.
func printImageLoad(w io.Writer, cluster string, archives []string, res []sandbox.NodeImages) {
	if len(res) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes yet; nodes added later import the archive(s).\n", cluster)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKUBELET\tRESULT")
	loaded := 0
	for _, n := range res {
		result := fmt.Sprintf("loaded %d archive(s)", len(n.Loaded))
		switch {
		case n.Error != "":
			result = "failed: " + n.Error
		case n.Skipped != "":
			result = "skipped: " + n.Skipped
		default:
			loaded++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Node, n.Kubelet, result)
	}
	_ = tw.Flush()
	names := make([]string, len(archives))
	for i, a := range archives {
		names[i] = filepath.Base(a)
	}
	fmt.Fprintf(w, "Loaded %v into %d node(s) of cluster %s; nodes added later get them too.\n", names, loaded, cluster)
}

// printImageList prints one line per node and image, then the nodes that were skipped
// or failed.
func printImageList(w io.Writer, cluster string, res []sandbox.NodeImages) {
	if len(res) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes. Add one with: nodejoin add node --name %s\n", cluster, cluster)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tIMAGE\tDIGEST\tSIZE")
	var notes []string
	for _, n := range res {
		switch {
		case n.Error != "":
			notes = append(notes, fmt.Sprintf("%s: failed: %s", n.Node, n.Error))
		case n.Skipped != "":
			notes = append(notes, fmt.Sprintf("%s: skipped (%s)", n.Node, n.Skipped))
		case len(n.Images) == 0:
			fmt.Fprintf(tw, "%s\t(none)\t-\t-\n", n.Node)
		}
		for _, img := range n.Images {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Node, img.Name, shortDigest(img.Digest), img.Size)
		}
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// shortDigest keeps a digest's algorithm and first 12 hex digits, as docker does.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
