package nodejoin

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/bench"
	"github.com/nodejoin/nodejoin/internal/printer"
)

func benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure how fast nodes join a local control plane",
		Example: "  # 100 nodes at once, then again with kube-controller-manager and with the floor as baselines\n" +
			"  nodejoin bench join --nodes 100 --baseline kcm,floor -o json > report.json\n" +
			"  nodejoin bench plot report.json > join.svg",
	}
	cmd.AddCommand(benchJoinCommand(), benchNodeCommand(), benchPlotCommand(), benchFloorApproverCommand())
	return cmd
}

func benchJoinCommand() *cobra.Command {
	var o bench.Options
	var plot string
	var output printer.Format
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Start N simulated kubelets at once against a fresh local control plane and report the join figures",
		Long: "join starts a fresh control plane on loopback (no root needed), runs nodejoin-controller as a\n" +
			"child process against it (so that its CPU time and memory are its own), starts N simulated\n" +
			"kubelets at once and waits until every node is Ready with every certificate issued. It reports\n" +
			"the times, CSR latencies, the webhook's latency and cache hit rate, API requests per node (from\n" +
			"kube-apiserver's apiserver_request_total), local cloud calls per node, the controller's CPU\n" +
			"seconds and peak resident memory, and the CSRs left pending, denied or issued twice.\n\n" +
			"--baseline takes a comma list; each baseline runs the same burst on a fresh cluster. kcm:\n" +
			"kube-controller-manager's csrapproving and csrsigning approve and sign the client certificates\n" +
			"(nodejoin-controller still approves serving certificates). floor: an approver of the benchmark's\n" +
			"own approves and signs every kubelet CSR (client and serving) at once with no check, and\n" +
			"nodejoin-controller does not run. peer (kube-controller-manager with kubelet-csr-approver) is\n" +
			"refused: its module cannot be fetched here. The report gives ours/baseline for each.\n" +
			"--nodes 100,500,1000 runs all of it at each size in turn and reports the growth. --fault runs the burst again with an API server\n" +
			"restart or a killed leader (two replicas) once half the nodes joined. --duration runs a soak\n" +
			"instead: nodes keep joining and leaving with short certificate lifetimes.",
		Example: `  # the short version (make bench)
  nodejoin bench join --nodes 100 --baseline kcm,floor

  # a thousand nodes, JSON, CPU profiles of the burst, and the plot
  nodejoin bench join --nodes 1000 --baseline kcm,floor -o json --profile /tmp/prof --plot join.svg

  # growth: each size in turn, ours against the floor
  nodejoin bench join --nodes 100,500,1000 --baseline floor --plot growth.svg

  # a killed leader mid-burst; a ten-minute soak
  nodejoin bench join --nodes 200 --fault leader-kill
  nodejoin bench join --nodes 100 --duration 15m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == printer.YAML {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			o.Progress = cmd.ErrOrStderr()
			r, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if plot != "" && r.Soak == nil {
				if err := r.WritePlotFile(plot); err != nil {
					return fmt.Errorf("--plot %s: %w", plot, err)
				}
			}
			return printer.Print(cmd.OutOrStdout(), output, r, r.WriteText)
		},
	}
	f := cmd.Flags()
	o.AddFlags(f)
	f.StringVar(&plot, "plot", "", "write an SVG plot of the nodes joined over time to FILE")
	printer.AddFlag(f, &output)
	f.Lookup("output").Usage = "output format: text or json"
	return cmd
}

// benchFloorApproverCommand is the floor baseline's approver, which `bench join
// --baseline floor` runs as its child process. Hidden: it approves every kubelet CSR
// with no check and is for a benchmark's throwaway cluster only.
func benchFloorApproverCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "floor-approver --kubeconfig FILE --ca-cert FILE --ca-key FILE",
		Short:              "Approve and sign every kubelet CSR with no check (the benchmark's floor; never for a real cluster)",
		Example:            "  # run by `nodejoin bench join --baseline floor` against its own throwaway cluster\n  nodejoin bench floor-approver --kubeconfig STATE/floor/cluster/kubeconfig --ca-cert CA.crt --ca-key CA.key",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return bench.FloorApproverArgs(args)
		},
	}
}

func benchPlotCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "plot REPORT.json",
		Short:   "Draw the nodes joined over time (SVG, on standard output) from `bench join -o json`",
		Example: "  nodejoin bench plot report.json > docs/bench-join.svg",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var r bench.Report
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("reading %s (the JSON of `nodejoin bench join -o json`): %w", args[0], err)
			}
			return bench.PlotSVG(cmd.OutOrStdout(), bench.PlotNodes(&r), bench.PlotSeries(&r))
		},
	}
}

func benchNodeCommand() *cobra.Command {
	var o bench.NodeOptions
	var output printer.Format
	cmd := &cobra.Command{
		Use:     "node",
		Short:   "Launch real nodes into a running cluster one at a time and time each step of their join",
		Long:    "node launches real-kubelet instances into a running cluster one at a time, as `add node` does, and times each step of each join from what recorded it (logs, files, Events, the Node): per step, the median and max seconds since the instance started and of the step itself.",
		Example: "  nodejoin up --name bench --nodes 1 --detach && nodejoin bench node --name bench --nodes 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Progress = cmd.ErrOrStderr()
			r, err := bench.RunNode(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printer.Print(cmd.OutOrStdout(), output, r, r.WriteText)
		},
	}
	nameFlag(cmd, &o.Cluster)
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10, "how many real nodes to launch, one after the other")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "how long each node may take to become Ready (default 5m)")
	printer.AddFlag(cmd.Flags(), &output)
	return cmd
}
