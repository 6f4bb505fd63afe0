package nodejoin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/client"
	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
)

// ngTarget is the cluster a nodegroup command works on.
type ngTarget struct {
	name    string
	cluster sandbox.Cluster
	client  *client.Client
}

func connect(name string) (*ngTarget, error) {
	c, err := sandbox.Get(name)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(c.Kubeconfig, name)
	if err != nil {
		return nil, err
	}
	return &ngTarget{name: name, cluster: c, client: cl}, nil
}

// account says where the cluster's groups live, for describe.
func (t *ngTarget) account() client.Account {
	a := client.Account{Cluster: t.name, Region: controller.DefaultRegion, AccountID: controller.DefaultAccountID,
		NodeRole: sandbox.NodeRoleName(t.name)}
	if cfg, err := clientcmd.BuildConfigFromFlags("", t.cluster.Kubeconfig); err == nil {
		if dc, err := discovery.NewDiscoveryClientForConfig(cfg); err == nil {
			if v, err := dc.ServerVersion(); err == nil {
				a.Version = v.Major + "." + v.Minor
			}
		}
	}
	return a
}

// readInput reads -f: a path, or - for standard input.
func readInput(cmd *cobra.Command, path string) ([]byte, string, error) {
	if path == "" {
		return nil, "", errors.New("-f: give the file holding the node groups (an eksctl ClusterConfig or NodeGroup manifests), or - for standard input")
	}
	if path == "-" {
		data, err := io.ReadAll(cmd.InOrStdin())
		return data, "standard input", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("-f %s: %w", path, err)
	}
	return data, path, nil
}

// clusterName is --name, or the eksctl file's metadata.name when --name is not given.
func clusterName(cmd *cobra.Command, name string, l *client.Loaded) string {
	if !cmd.Flags().Changed("name") && l.Cluster != "" {
		return l.Cluster
	}
	return name
}

func createCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create something in a running cluster: node groups",
		Example: "  nodejoin create nodegroup -f cluster.yaml",
	}
	cmd.AddCommand(createNodeGroupCommand())
	return cmd
}

type createOptions struct {
	name, file, output string
	dryRun, wait       bool
	timeout            time.Duration
}

func createNodeGroupCommand() *cobra.Command {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:     "nodegroup",
		Aliases: []string{"nodegroups", "ng"},
		Short:   "Create node groups from an eksctl ClusterConfig or NodeGroup manifests",
		Long: "create nodegroup reads -f: an eksctl ClusterConfig (eksctl.io/v1alpha5), whose nodeGroups and\n" +
			"managedNodeGroups become NodeGroup objects, or NodeGroup manifests (nodejoin.io/v1alpha1). It\n" +
			"lists every field of an eksctl file that nodejoin does not use, creates the groups, and shows\n" +
			"their progress until each is ACTIVE with its nodes Ready (--wait=false returns at once).\n\n" +
			"The cluster is --name or, when --name is not given, the eksctl file's metadata.name.\n" +
			"--dry-run prints the NodeGroup objects instead of creating them.",
		Example: "  nodejoin create nodegroup -f cluster.yaml\n" +
			"  nodejoin create nodegroup -f cluster.yaml --dry-run > nodegroups.yaml\n" +
			"  nodejoin create nodegroup -f nodegroups.yaml --name demo",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	nameFlag(cmd, &o.name)
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "eksctl ClusterConfig or NodeGroup manifests (- for standard input)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the NodeGroup objects (-o yaml, the default here, or json) and create nothing")
	f.BoolVar(&o.wait, "wait", true, "wait until every group is ACTIVE with its nodes Ready")
	f.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long to wait")
	outputFlag(cmd, &o.output)
	return cmd
}

func (o *createOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	data, source, err := readInput(cmd, o.file)
	if err != nil {
		return err
	}
	l, err := client.Load(data, source)
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if o.dryRun {
		printIgnored(errOut, l)
		format := o.output
		if format == outputText {
			format = outputYAML
		}
		return printManifests(out, format, l.NodeGroups, false)
	}
	name := clusterName(cmd, o.name, l)
	t, err := connect(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Creating %s in cluster %s from %s (%s)\n", plural(len(l.NodeGroups), "node group"), name, l.Source, l.Format)
	printIgnored(out, l)
	return createGroups(cmd.Context(), t, l.NodeGroups, o.wait, o.timeout, o.output, out, errOut)
}

// createGroups creates groups, follows them until ACTIVE (when wait), and prints the
// summary. up --nodegroup-file uses it too.
func createGroups(ctx context.Context, t *ngTarget, groups []v1alpha1.NodeGroup, wait bool, timeout time.Duration, output string, out, errOut io.Writer) error {
	start := time.Now()
	created, err := t.client.Create(ctx, groups)
	for _, n := range created {
		for i := range groups {
			if groups[i].Name == n {
				fmt.Fprintln(errOut, " ✓ created "+groupLine(&groups[i]))
			}
		}
	}
	if err != nil {
		return err
	}
	if !wait {
		fmt.Fprintf(out, "Created %s; follow them with: nodejoin get nodegroup --name %s\n", plural(len(created), "node group"), t.name)
		return nil
	}
	final, err := waitAll(ctx, t, created, client.Created, 0, timeout, errOut)
	if err != nil {
		return err
	}
	return printGroupsSummary(out, output, t, final, fmt.Sprintf("Created %s in %s.", plural(len(final), "node group"), round(time.Since(start))))
}

// waitAll follows the groups until each reaches goal, printing their progress.
func waitAll(ctx context.Context, t *ngTarget, names []string, goal client.Goal, gen int64, timeout time.Duration, w io.Writer) ([]v1alpha1.NodeGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	final := make([]v1alpha1.NodeGroup, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			watch := &progressWatch{start: time.Now()}
			last, err := t.client.Wait(gctx, name,
				func(ng *v1alpha1.NodeGroup) (bool, error) { return client.Reached(goal, gen, ng) },
				func(ng *v1alpha1.NodeGroup) {
					mu.Lock()
					defer mu.Unlock()
					for _, line := range watch.lines(name, ng) {
						fmt.Fprintln(w, line)
					}
				})
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
					return timeoutError(name, t.name, goal, timeout, watch.last)
				}
				return err
			}
			mu.Lock()
			fmt.Fprintf(w, " ✓ %s: %s (%s)\n", name, reachedText(goal, last), round(time.Since(watch.start)))
			mu.Unlock()
			if last != nil {
				final[i] = *last
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return final, nil
}

func timeoutError(name, cluster string, goal client.Goal, timeout time.Duration, last *v1alpha1.NodeGroup) error {
	state := "never read"
	if last != nil {
		state = stateText(last) + "; " + client.IssuesText(last)
	}
	what := map[client.Goal]string{client.Created: "become ACTIVE", client.Scaled: "reach its size",
		client.Upgraded: "finish its update", client.Deleted: "be deleted"}[goal]
	return fmt.Errorf("node group %s did not %s within %s (last seen: %s); the controller keeps working on it: follow it with `nodejoin describe nodegroup %s --name %s`, see why a node does not join with `nodejoin diagnose node --name %s NODE`, or wait longer with --timeout",
		name, what, timeout, state, name, cluster, cluster)
}

func getNodeGroupCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:     "nodegroup [NAME]",
		Aliases: []string{"nodegroups", "ng"},
		Short:   "List a cluster's node groups (the table of `eksctl get nodegroup`)",
		Example: "  nodejoin get nodegroup --name demo\n" +
			"  nodejoin get nodegroup ng-1 --name demo -o yaml",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			t, err := connect(name)
			if err != nil {
				return err
			}
			var groups []v1alpha1.NodeGroup
			if len(args) == 1 {
				ng, err := t.client.Get(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				groups = []v1alpha1.NodeGroup{*ng}
			} else if groups, err = t.client.List(cmd.Context()); err != nil {
				return err
			}
			if output != outputText {
				return printManifests(cmd.OutOrStdout(), output, groups, true)
			}
			printNodeGroups(cmd.OutOrStdout(), name, groups)
			return nil
		},
	}
	nameFlag(cmd, &name)
	outputFlag(cmd, &output)
	return cmd
}

func describeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "describe",
		Short:   "Describe something in a running cluster: a node group",
		Example: "  nodejoin describe nodegroup ng-1 -o json",
	}
	cmd.AddCommand(describeNodeGroupCommand())
	return cmd
}

func describeNodeGroupCommand() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:     "nodegroup NAME",
		Aliases: []string{"ng"},
		Short:   "Describe a node group; -o json prints the shape of `aws eks describe-nodegroup`",
		Long: "describe nodegroup prints the group's sizes, template, launch template, Auto Scaling group,\n" +
			"update in progress and health issues (with the EKS codes and the instances they name).\n" +
			"With -o json or -o yaml the output is the object `aws eks describe-nodegroup` prints:\n" +
			"{\"nodegroup\": {nodegroupName, nodegroupArn, clusterName, version, status, scalingConfig, …}}.",
		Example: "  nodejoin describe nodegroup ng-1 --name demo\n" +
			"  nodejoin describe nodegroup ng-1 --name demo -o json | jq .nodegroup.health",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			t, err := connect(name)
			if err != nil {
				return err
			}
			ng, err := t.client.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			d := client.Describe(ng, t.account())
			if output != outputText {
				return printStructured(cmd.OutOrStdout(), output, d)
			}
			printDescription(cmd.OutOrStdout(), ng, d)
			return nil
		},
	}
	nameFlag(cmd, &name)
	outputFlag(cmd, &output)
	return cmd
}

func scaleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "scale",
		Short:   "Scale something in a running cluster: a node group",
		Example: "  nodejoin scale nodegroup ng-1 --nodes 4",
	}
	cmd.AddCommand(scaleNodeGroupCommand())
	return cmd
}

func scaleNodeGroupCommand() *cobra.Command {
	var (
		name, output              string
		nodes, nodesMin, nodesMax int32
		wait                      bool
		timeout                   time.Duration
	)
	cmd := &cobra.Command{
		Use:     "nodegroup NAME",
		Aliases: []string{"ng"},
		Short:   "Change a node group's size and wait until it has that many Ready nodes",
		Long: "scale nodegroup sets the group's desired size (--nodes) and, when given, its bounds\n" +
			"(--nodes-min, --nodes-max). A size outside the bounds is refused, naming the flag to add.\n" +
			"It then shows nodes joining or leaving until the group holds exactly --nodes Ready nodes\n" +
			"(--wait=false returns at once).",
		Example: "  nodejoin scale nodegroup ng-1 --name demo --nodes 4\n" +
			"  nodejoin scale nodegroup ng-1 --name demo --nodes 10 --nodes-max 10",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var s client.Sizes
			flags := cmd.Flags()
			if flags.Changed("nodes") {
				s.Desired = &nodes
			}
			if flags.Changed("nodes-min") {
				s.Min = &nodesMin
			}
			if flags.Changed("nodes-max") {
				s.Max = &nodesMax
			}
			if s.Desired == nil && s.Min == nil && s.Max == nil {
				return errors.New("give the new size with --nodes N (and --nodes-min, --nodes-max to change the bounds)")
			}
			t, err := connect(name)
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := t.client.Scale(cmd.Context(), args[0], s)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Scaling node group %s of cluster %s: %s\n", args[0], name, scalingChange(res.Before, res.After))
			if !wait {
				return nil
			}
			final, err := waitAll(cmd.Context(), t, []string{args[0]}, client.Scaled, res.Generation, timeout, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return printGroupsSummary(out, output, t, final, fmt.Sprintf("Node group %s scaled to %s in %s.", args[0], plural(int(client.DesiredSize(&final[0])), "Ready node"), round(time.Since(start))))
		},
	}
	nameFlag(cmd, &name)
	f := cmd.Flags()
	f.Int32VarP(&nodes, "nodes", "N", 0, "desired number of nodes")
	f.Int32VarP(&nodesMin, "nodes-min", "m", 0, "minimum number of nodes")
	f.Int32VarP(&nodesMax, "nodes-max", "M", 0, "maximum number of nodes")
	f.BoolVar(&wait, "wait", true, "wait until the group holds the desired number of Ready nodes")
	f.DurationVar(&timeout, "timeout", 20*time.Minute, "how long to wait")
	outputFlag(cmd, &output)
	return cmd
}

func upgradeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "upgrade",
		Short:   "Upgrade something in a running cluster: a node group",
		Example: "  nodejoin upgrade nodegroup ng-1 -f nodegroups.yaml",
	}
	cmd.AddCommand(upgradeNodeGroupCommand())
	return cmd
}

func upgradeNodeGroupCommand() *cobra.Command {
	var (
		name, file, output string
		force, wait        bool
		timeout            time.Duration
	)
	cmd := &cobra.Command{
		Use:     "nodegroup NAME",
		Aliases: []string{"ng"},
		Short:   "Roll a node group onto a new template: new nodes first, old ones drained honouring PodDisruptionBudgets",
		Long: "upgrade nodegroup takes the group's new template from -f (the group of that name in an eksctl\n" +
			"ClusterConfig or a NodeGroup manifest; its sizes are left alone) and lets the controller roll\n" +
			"the group as EKS rolls a managed node group: a new launch template version, new nodes first\n" +
			"(updateStrategy DEFAULT), then at most maxUnavailable old nodes at a time cordoned, drained\n" +
			"through the Eviction API honouring PodDisruptionBudgets, and terminated. It shows each\n" +
			"phase and node until every node runs the new version (--wait=false returns at once).\n\n" +
			"A drain that a PodDisruptionBudget blocks past the drain timeout fails the update with\n" +
			"PodEvictionFailure, naming the pods; --force deletes them instead. Without -f, upgrade\n" +
			"resumes a failed update (with --force) or says the group is up to date.",
		Example: "  nodejoin upgrade nodegroup ng-1 --name demo -f nodegroups.yaml\n" +
			"  nodejoin upgrade nodegroup ng-1 --name demo --force",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var template *v1alpha1.NodeTemplate
			if file != "" {
				data, source, err := readInput(cmd, file)
				if err != nil {
					return err
				}
				l, err := client.Load(data, source)
				if err != nil {
					return err
				}
				ng, err := l.Group(args[0])
				if err != nil {
					return err
				}
				printIgnored(cmd.OutOrStdout(), l)
				template = &ng.Spec.Template
			}
			t, err := connect(name)
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := t.client.Upgrade(cmd.Context(), args[0], template, force)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !res.TemplateChanged && res.Outdated == 0 {
				fmt.Fprintf(out, "Node group %s is up to date (launch template version %s); give its new template with -f.\n", args[0], dash(res.FromVersion))
				return nil
			}
			if res.TemplateChanged {
				fmt.Fprintf(out, "Upgrading node group %s of cluster %s from launch template version %s\n", args[0], name, dash(res.FromVersion))
			} else {
				fmt.Fprintf(out, "Resuming the update of node group %s of cluster %s: %s not on launch template version %s (force: %v)\n", args[0], name, plural(res.Outdated, "instance"), dash(res.FromVersion), force)
			}
			if !wait {
				return nil
			}
			final, err := waitAll(cmd.Context(), t, []string{args[0]}, client.Upgraded, res.Generation, timeout, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			version := "-"
			if lt := final[0].Status.LaunchTemplate; lt != nil {
				version = lt.Version
			}
			return printGroupsSummary(out, output, t, final, fmt.Sprintf("Node group %s upgraded to launch template version %s in %s: %s on it.",
				args[0], version, round(time.Since(start)), plural(int(final[0].Status.UpdatedSize), "node")))
		},
	}
	nameFlag(cmd, &name)
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "eksctl ClusterConfig or NodeGroup manifests holding the group's new template")
	f.BoolVar(&force, "force", false, "delete the pods a PodDisruptionBudget keeps on a node once the drain timeout passes, instead of failing with PodEvictionFailure")
	f.BoolVar(&wait, "wait", true, "wait until every node runs the new launch template version")
	f.DurationVar(&timeout, "timeout", time.Hour, "how long to wait")
	outputFlag(cmd, &output)
	return cmd
}

func deleteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete",
		Short:   "Delete something from a running cluster: a node group",
		Example: "  nodejoin delete nodegroup ng-1",
	}
	cmd.AddCommand(deleteNodeGroupCommand())
	return cmd
}

func deleteNodeGroupCommand() *cobra.Command {
	var (
		name    string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:     "nodegroup NAME",
		Aliases: []string{"ng"},
		Short:   "Delete a node group: its nodes are drained, then its instances terminated",
		Example: "  nodejoin delete nodegroup ng-1 --name demo",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := connect(name)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := t.client.Delete(cmd.Context(), args[0]); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Deleting node group %s of cluster %s\n", args[0], name)
			if !wait {
				return nil
			}
			if _, err := waitAll(cmd.Context(), t, []string{args[0]}, client.Deleted, 0, timeout, cmd.ErrOrStderr()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "Node group %s deleted in %s.\n", args[0], round(time.Since(start)))
			return err
		},
	}
	nameFlag(cmd, &name)
	f := cmd.Flags()
	f.BoolVar(&wait, "wait", true, "wait until the group's nodes are gone and the object deleted")
	f.DurationVar(&timeout, "timeout", 20*time.Minute, "how long to wait")
	return cmd
}
