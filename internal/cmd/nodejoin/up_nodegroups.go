package nodejoin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/client"
	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

// nodeGroupTimeout bounds up's wait for the groups of --nodegroup-file.
const nodeGroupTimeout = 20 * time.Minute

// loadNodeGroupFile reads --nodegroup-file before anything starts, so that a bad file
// starts no cluster, and takes the cluster's name from an eksctl file's metadata.name
// when --name is not given.
func (o *upOptions) loadNodeGroupFile(cmd *cobra.Command) error {
	if o.nodeGroupFile == "" {
		return nil
	}
	l, err := load(cmd, o.nodeGroupFile)
	if err != nil {
		return fmt.Errorf("--nodegroup-file: %w", err)
	}
	o.name = clusterName(cmd, "name", o.name, l)
	o.groups = l
	return nil
}

// createNodeGroups creates the file's groups in the started cluster c and follows them
// until each is ACTIVE with its nodes Ready; the list of fields nodejoin ignores and
// the progress go to w.
func (o *upOptions) createNodeGroups(ctx context.Context, c sandbox.Cluster, w io.Writer) ([]v1alpha1.NodeGroup, error) {
	if o.groups == nil {
		return nil, nil
	}
	cl, err := connect(c.Name)
	if err != nil {
		return nil, err
	}
	l := o.groups
	fmt.Fprintf(w, "Creating %s from %s (%s)\n", printer.Plural(len(l.NodeGroups), "node group"), l.Source, l.Format)
	l.WriteIgnored(w)
	_, final, err := cl.CreateAndWait(ctx, l.NodeGroups, true, nodeGroupTimeout, w)
	return final, err
}

// upSummary is up's -o json|yaml summary with node groups.
type upSummary struct {
	sandbox.Cluster
	NodeGroups []client.Nodegroup `json:"nodeGroups,omitempty"`
}

// printUpNodeGroups prints up's summary with the groups of --nodegroup-file.
func (o *upOptions) printUpNodeGroups(w io.Writer, c sandbox.Cluster, detached bool, groups []v1alpha1.NodeGroup) error {
	if o.output != printer.Text {
		s := upSummary{Cluster: c}
		if cl, err := connect(c.Name); err == nil {
			acct := account(cl)()
			for i := range groups {
				s.NodeGroups = append(s.NodeGroups, client.Describe(&groups[i], acct).Nodegroup)
			}
		}
		return printer.Structured(w, o.output, s)
	}
	client.WriteTable(w, c.Name, groups)
	c.WriteSummary(w, detached)
	return nil
}
