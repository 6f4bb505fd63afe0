package nodejoin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/nodegroup/client"
	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
)

// ngFlags are the flags every nodegroup command shares. As eksctl's, --cluster names
// the cluster and --name the node group.
type ngFlags struct {
	cluster, name string
	output        printer.Format
	wait          bool
	timeout       time.Duration
}

// ngCommand completes `nodejoin VERB nodegroup`: --cluster, --name, -o when output,
// --wait and --timeout (default wait) when waitHelp is given, and a RunE that connects
// to the cluster and calls run with the group (--name or the argument; "" if neither).
func ngCommand(sub *cobra.Command, o *ngFlags, waitHelp string, wait time.Duration, output bool,
	run func(cmd *cobra.Command, c *client.Client, group string) error,
) *cobra.Command {
	sub.Flags().StringVar(&o.cluster, "cluster", controlplane.DefaultName, "cluster name")
	sub.Flags().StringVarP(&o.name, "name", "n", "", "node group name (or give it as the argument)")
	if waitHelp != "" {
		sub.Flags().BoolVar(&o.wait, "wait", true, waitHelp)
		sub.Flags().DurationVar(&o.timeout, "timeout", wait, "how long to wait")
	}
	if output {
		printer.AddFlag(sub.Flags(), &o.output)
	}
	if run != nil {
		sub.RunE = func(cmd *cobra.Command, args []string) error {
			group, err := o.group(cmd, args)
			if err != nil {
				return err
			}
			c, err := connect(o.cluster)
			if rerr := o.refuseClusterAsName(cmd, c, args); rerr != nil {
				return rerr
			}
			if err != nil {
				return err
			}
			return run(cmd, c, group)
		}
	}
	if sub.Aliases == nil {
		sub.Aliases = []string{"ng"}
	}
	return sub
}

// group is the node group --name or the argument names; they must agree.
func (o *ngFlags) group(cmd *cobra.Command, args []string) (string, error) {
	switch {
	case len(args) == 0:
		return o.name, nil
	case cmd.Flags().Changed("name") && o.name != args[0]:
		if clusterExists(o.name) && !cmd.Flags().Changed("cluster") {
			return "", fmt.Errorf("--name %s names a cluster: --name is the node group (here %s); name the cluster with --cluster %s", o.name, args[0], o.name)
		}
		return "", fmt.Errorf("the argument %s and --name %s name two node groups: give one", args[0], o.name)
	}
	return args[0], nil
}

// refuseClusterAsName refuses --name used in its old meaning, the cluster: it names a
// running cluster, not a node group of the cluster --cluster (not given) names, or
// that cluster is not running (c is nil).
func (o *ngFlags) refuseClusterAsName(cmd *cobra.Command, c *client.Client, args []string) error {
	f := cmd.Flags()
	if !f.Changed("name") || f.Changed("cluster") || len(args) > 0 || o.name == o.cluster {
		return nil
	}
	if !clusterExists(o.name) {
		return nil
	}
	if c != nil {
		if _, err := c.Get(cmd.Context(), o.name); err == nil {
			return nil
		}
	}
	return fmt.Errorf("--name %s names a cluster, and cluster %s has no node group %s: --name is the node group; name the cluster with --cluster %s", o.name, o.cluster, o.name, o.name)
}

// groupArg is the Args of a command that needs its node group: --name or one argument.
func groupArg(cmd *cobra.Command, args []string) error {
	if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
		return err
	}
	if name, _ := cmd.Flags().GetString("name"); len(args) == 0 && name == "" {
		return errors.New("name the node group with --name NAME (or as the argument), and its cluster with --cluster")
	}
	return nil
}

// clusterExists tells whether a cluster of that name is running; tests replace it.
var clusterExists = func(name string) bool {
	_, err := sandbox.Get(name)
	return err == nil
}

// verbCommand is the parent of a nodegroup command: `nodejoin VERB`.
func verbCommand(verb, short, example string, sub *cobra.Command) *cobra.Command {
	parent := &cobra.Command{Use: verb, Short: short, Example: example}
	parent.AddCommand(sub)
	return parent
}

func connect(name string) (*client.Client, error) {
	c, err := sandbox.Get(name)
	if err != nil {
		return nil, err
	}
	return client.New(c.Kubeconfig, name)
}

// account says where the cluster's groups live, for describe.
func account(c *client.Client) func() client.Account {
	return func() client.Account {
		version := c.ServerVersion()
		releases, subnets := controller.AccountReleases(controller.DefaultRegion, version)
		return client.Account{Cluster: c.Cluster, Region: controller.DefaultRegion, AccountID: controller.DefaultAccountID,
			NodeRole: sandbox.NodeRoleName(c.Cluster), Version: version, Releases: releases, Subnets: subnets}
	}
}

// load reads -f (a path, or - for standard input) and the node groups in it.
func load(cmd *cobra.Command, path string) (*client.Loaded, error) {
	switch path {
	case "":
		return nil, errors.New("-f: give the file holding the node groups (an eksctl ClusterConfig or NodeGroup manifests), or - for standard input")
	case "-":
		data, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, err
		}
		return client.Load(data, "standard input")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	return client.Load(data, path)
}

// clusterName is the cluster flag's value, or the eksctl file's metadata.name when the
// flag (--cluster for node-group commands, --name for up) is not given.
func clusterName(cmd *cobra.Command, flag, name string, l *client.Loaded) string {
	if !cmd.Flags().Changed(flag) && l.Cluster != "" {
		return l.Cluster
	}
	return name
}

func since(start time.Time) time.Duration { return printer.Round(time.Since(start)) }

func createCommand() *cobra.Command {
	o, file, dryRun := &ngFlags{}, "", false
	sub := &cobra.Command{
		Use:     "nodegroup",
		Aliases: []string{"nodegroups", "ng"},
		Short:   "Create node groups from an eksctl ClusterConfig or NodeGroup manifests",
		Long: "create nodegroup reads -f: an eksctl ClusterConfig (eksctl.io/v1alpha5), whose nodeGroups and\n" +
			"managedNodeGroups become NodeGroup objects, or NodeGroup manifests (nodejoin.io/v1alpha1). It\n" +
			"lists every field of an eksctl file that nodejoin does not use, creates the groups, and shows\n" +
			"their progress until each is ACTIVE with its nodes Ready (--wait=false returns at once).\n\n" +
			"The cluster is --cluster or, when it is not given, the eksctl file's metadata.name;\n" +
			"--name creates only the file's group of that name. --dry-run prints the NodeGroup objects\n" +
			"instead of creating them.",
		Example: "  nodejoin create nodegroup -f cluster.yaml\n" +
			"  nodejoin create nodegroup -f cluster.yaml --name ng-1 --dry-run > nodegroups.yaml\n" +
			"  nodejoin create nodegroup -f nodegroups.yaml --cluster demo",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := load(cmd, file)
			if err != nil {
				return err
			}
			if o.name != "" {
				ng, err := l.Group(o.name)
				if err != nil {
					if clusterExists(o.name) && !cmd.Flags().Changed("cluster") {
						return fmt.Errorf("--name %s names a cluster: --name is the node group; name the cluster with --cluster %s", o.name, o.name)
					}
					return fmt.Errorf("--name: %w", err)
				}
				l.NodeGroups = []v1alpha1.NodeGroup{*ng}
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if dryRun {
				l.WriteIgnored(errOut)
				if o.output == printer.Text {
					return client.WriteManifests(out, printer.YAML, l.NodeGroups, false)
				}
				return client.WriteManifests(out, o.output, l.NodeGroups, false)
			}
			name := clusterName(cmd, "cluster", o.cluster, l)
			c, err := connect(name)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Creating %s in cluster %s from %s (%s)\n", printer.Plural(len(l.NodeGroups), "node group"), name, l.Source, l.Format)
			l.WriteIgnored(out)
			start := time.Now()
			created, final, err := c.CreateAndWait(cmd.Context(), l.NodeGroups, o.wait, o.timeout, errOut)
			if err != nil {
				return err
			}
			if !o.wait {
				fmt.Fprintf(out, "Created %s; follow them with: nodejoin get nodegroup --cluster %s\n", printer.Plural(len(created), "node group"), name)
				return nil
			}
			return client.WriteSummary(out, o.output, name, account(c), final, fmt.Sprintf("Created %s in %s.", printer.Plural(len(final), "node group"), since(start)))
		},
	}
	sub.Flags().StringVarP(&file, "file", "f", "", "eksctl ClusterConfig or NodeGroup manifests (- for standard input)")
	sub.Flags().BoolVar(&dryRun, "dry-run", false, "print the NodeGroup objects (-o yaml, the default here, or json) and create nothing")
	return verbCommand("create", "Create something in a running cluster: node groups", "  nodejoin create nodegroup -f cluster.yaml",
		ngCommand(sub, o, "wait until every group is ACTIVE with its nodes Ready", 20*time.Minute, true, nil))
}

func getNodeGroupCommand() *cobra.Command {
	o := &ngFlags{}
	sub := &cobra.Command{
		Use:     "nodegroup [NAME]",
		Aliases: []string{"nodegroups", "ng"},
		Short:   "List a cluster's node groups (the table of `eksctl get nodegroup`)",
		Example: "  nodejoin get nodegroup --cluster demo\n" +
			"  nodejoin get nodegroup --cluster demo --name ng-1 -o yaml",
		Args: cobra.MaximumNArgs(1),
	}
	return ngCommand(sub, o, "", 0, true, func(cmd *cobra.Command, c *client.Client, group string) error {
		var groups []v1alpha1.NodeGroup
		var err error
		if group != "" {
			var ng *v1alpha1.NodeGroup
			if ng, err = c.Get(cmd.Context(), group); err == nil {
				groups = []v1alpha1.NodeGroup{*ng}
			}
		} else {
			groups, err = c.List(cmd.Context())
		}
		if err != nil {
			return err
		}
		if o.output != printer.Text {
			return client.WriteManifests(cmd.OutOrStdout(), o.output, groups, true)
		}
		client.WriteTable(cmd.OutOrStdout(), o.cluster, groups)
		return nil
	})
}

func describeCommand() *cobra.Command {
	o := &ngFlags{}
	sub := &cobra.Command{
		Use:   "nodegroup [NAME]",
		Short: "Describe a node group; -o json prints the shape of `aws eks describe-nodegroup`",
		Long: "describe nodegroup prints the group's sizes, template, launch template, Auto Scaling group,\n" +
			"update in progress and health issues (with the EKS codes and the instances they name).\n" +
			"With -o json or -o yaml the output is the object `aws eks describe-nodegroup` prints:\n" +
			"{\"nodegroup\": {nodegroupName, nodegroupArn, clusterName, version, status, scalingConfig, …}}.",
		Example: "  nodejoin describe nodegroup --cluster demo --name ng-1\n" +
			"  nodejoin describe nodegroup --cluster demo --name ng-1 -o json | jq .nodegroup.health",
		Args: groupArg,
	}
	return verbCommand("describe", "Describe something in a running cluster: a node group", "  nodejoin describe nodegroup --name ng-1 -o json",
		ngCommand(sub, o, "", 0, true, func(cmd *cobra.Command, c *client.Client, group string) error {
			ng, err := c.Get(cmd.Context(), group)
			if err != nil {
				return err
			}
			d := client.Describe(ng, account(c)())
			return printer.Print(cmd.OutOrStdout(), o.output, d, func(w io.Writer) { d.WriteText(w, ng) })
		}))
}

func scaleCommand() *cobra.Command {
	o := &ngFlags{}
	var nodes, nodesMin, nodesMax int32
	sub := &cobra.Command{
		Use:   "nodegroup [NAME]",
		Short: "Change a node group's size and wait until it has that many Ready nodes",
		Long: "scale nodegroup sets the group's desired size (--nodes) and, when given, its bounds\n" +
			"(--nodes-min, --nodes-max). A size outside the bounds is refused, naming the flag to add.\n" +
			"It then shows nodes joining or leaving until the group holds exactly --nodes Ready nodes\n" +
			"(--wait=false returns at once).",
		Example: "  nodejoin scale nodegroup --cluster demo --name ng-1 --nodes 4\n" +
			"  nodejoin scale nodegroup --nodes=10 --nodes-max=10 --name=ng-1 --cluster=demo",
		Args: groupArg,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if f := cmd.Flags(); !f.Changed("nodes") && !f.Changed("nodes-min") && !f.Changed("nodes-max") {
				return errors.New("give the new size with --nodes N (and --nodes-min, --nodes-max to change the bounds)")
			}
			return nil
		},
	}
	f := sub.Flags()
	f.Int32VarP(&nodes, "nodes", "N", 0, "desired number of nodes")
	f.Int32VarP(&nodesMin, "nodes-min", "m", 0, "minimum number of nodes")
	f.Int32VarP(&nodesMax, "nodes-max", "M", 0, "maximum number of nodes")
	return verbCommand("scale", "Scale something in a running cluster: a node group", "  nodejoin scale nodegroup --name ng-1 --nodes 4",
		ngCommand(sub, o, "wait until the group holds the desired number of Ready nodes", 20*time.Minute, true, func(cmd *cobra.Command, c *client.Client, group string) error {
			given := func(flag string, v *int32) *int32 {
				if cmd.Flags().Changed(flag) {
					return v
				}
				return nil
			}
			s := client.Sizes{Desired: given("nodes", &nodes), Min: given("nodes-min", &nodesMin), Max: given("nodes-max", &nodesMax)}
			start := time.Now()
			res, err := c.Scale(cmd.Context(), group, s)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Scaling node group %s of cluster %s: %s\n", group, o.cluster, client.ScalingChange(res.Before, res.After))
			return o.finish(cmd, c, group, client.Scaled, res.Generation, start, func(ng *v1alpha1.NodeGroup, took time.Duration) string {
				return fmt.Sprintf("Node group %s scaled to %s in %s.", group, printer.Plural(int(client.DesiredSize(ng)), "Ready node"), took)
			})
		}))
}

// finish waits, unless --wait=false, until the group reaches goal and prints the
// summary that sentence ends (no summary for a deleted group).
func (o *ngFlags) finish(cmd *cobra.Command, c *client.Client, name string, goal client.Goal, gen int64, start time.Time,
	sentence func(ng *v1alpha1.NodeGroup, took time.Duration) string,
) error {
	if !o.wait {
		return nil
	}
	final, err := c.WaitAll(cmd.Context(), []string{name}, goal, gen, o.timeout, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if goal == client.Deleted {
		_, err = fmt.Fprintln(cmd.OutOrStdout(), sentence(nil, since(start)))
		return err
	}
	return client.WriteSummary(cmd.OutOrStdout(), o.output, o.cluster, account(c), final, sentence(&final[0], since(start)))
}

func upgradeCommand() *cobra.Command {
	o := &ngFlags{}
	var file string
	var force bool
	sub := &cobra.Command{
		Use:   "nodegroup [NAME]",
		Short: "Roll a node group onto a new template: new nodes first, old ones drained honouring PodDisruptionBudgets",
		Long: "upgrade nodegroup takes the group's new template from -f (the group of that name in an eksctl\n" +
			"ClusterConfig or a NodeGroup manifest; its sizes are left alone) and lets the controller roll\n" +
			"the group as EKS rolls a managed node group: a new launch template version, new nodes first\n" +
			"(updateStrategy DEFAULT), then at most maxUnavailable old nodes at a time cordoned, drained\n" +
			"through the Eviction API honouring PodDisruptionBudgets, and terminated. It shows each\n" +
			"phase and node until every node runs the new version (--wait=false returns at once).\n\n" +
			"A drain that a PodDisruptionBudget blocks past the drain timeout fails the update with\n" +
			"PodEvictionFailure, naming the pods; --force deletes them instead. Without -f, upgrade\n" +
			"resumes a failed update (with --force) or says the group is up to date.",
		Example: "  nodejoin upgrade nodegroup --cluster demo --name ng-1 -f nodegroups.yaml\n" +
			"  nodejoin upgrade nodegroup --cluster demo --name ng-1 --force",
		Args: groupArg,
	}
	sub.Flags().StringVarP(&file, "file", "f", "", "eksctl ClusterConfig or NodeGroup manifests holding the group's new template")
	sub.Flags().BoolVar(&force, "force", false, "delete the pods a PodDisruptionBudget keeps on a node once the drain timeout passes, instead of failing with PodEvictionFailure")
	var template *v1alpha1.NodeTemplate
	sub.PreRunE = func(cmd *cobra.Command, args []string) error {
		group, err := o.group(cmd, args)
		if err != nil || file == "" {
			return err
		}
		l, err := load(cmd, file)
		if err != nil {
			return err
		}
		ng, err := l.Group(group)
		if err != nil {
			return err
		}
		l.WriteIgnored(cmd.OutOrStdout())
		template = &ng.Spec.Template
		return nil
	}
	return verbCommand("upgrade", "Upgrade something in a running cluster: a node group", "  nodejoin upgrade nodegroup --name ng-1 -f nodegroups.yaml",
		ngCommand(sub, o, "wait until every node runs the new launch template version", time.Hour, true, func(cmd *cobra.Command, c *client.Client, name string) error {
			start, out := time.Now(), cmd.OutOrStdout()
			res, err := c.Upgrade(cmd.Context(), name, template, force)
			if err != nil {
				return err
			}
			switch {
			case !res.TemplateChanged && res.Outdated == 0:
				fmt.Fprintf(out, "Node group %s is up to date (launch template version %s); give its new template with -f.\n", name, printer.Dash(res.FromVersion))
				return nil
			case res.TemplateChanged:
				fmt.Fprintf(out, "Upgrading node group %s of cluster %s from launch template version %s\n", name, o.cluster, printer.Dash(res.FromVersion))
			default:
				fmt.Fprintf(out, "Resuming the update of node group %s of cluster %s: %s not on launch template version %s (force: %v)\n", name, o.cluster, printer.Plural(res.Outdated, "instance"), printer.Dash(res.FromVersion), force)
			}
			return o.finish(cmd, c, name, client.Upgraded, res.Generation, start, func(ng *v1alpha1.NodeGroup, took time.Duration) string {
				version := "-"
				if lt := ng.Status.LaunchTemplate; lt != nil {
					version = lt.Version
				}
				return fmt.Sprintf("Node group %s upgraded to launch template version %s in %s: %s on it.", name, version, took, printer.Plural(int(ng.Status.UpdatedSize), "node"))
			})
		}))
}

func deleteCommand() *cobra.Command {
	o := &ngFlags{}
	sub := &cobra.Command{
		Use:     "nodegroup [NAME]",
		Short:   "Delete a node group: its nodes are drained, then its instances terminated",
		Example: "  nodejoin delete nodegroup --cluster demo --name ng-1",
		Args:    groupArg,
	}
	return verbCommand("delete", "Delete something from a running cluster: a node group", "  nodejoin delete nodegroup --name ng-1",
		ngCommand(sub, o, "wait until the group's nodes are gone and the object deleted", 20*time.Minute, false, func(cmd *cobra.Command, c *client.Client, group string) error {
			start := time.Now()
			if err := c.Delete(cmd.Context(), group); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleting node group %s of cluster %s\n", group, o.cluster)
			return o.finish(cmd, c, group, client.Deleted, 0, start, func(_ *v1alpha1.NodeGroup, took time.Duration) string {
				return fmt.Sprintf("Node group %s deleted in %s.", group, took)
			})
		}))
}
