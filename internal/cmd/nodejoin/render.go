package nodejoin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/sandbox"
)

// Output formats of -o.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

func outputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", outputText, "output format: text, json or yaml")
}

func checkOutput(format string) error {
	switch format {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output %q: want text, json or yaml", format)
}

// printStructured prints v as JSON or YAML.
func printStructured(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// flagError names a flag in an invalid option's message: "--identity" for the
// library's "identity".
func flagError(err error) error {
	var oe *sandbox.OptionError
	if err == nil || !errors.As(err, &oe) {
		return err
	}
	flagged := fmt.Sprintf("--%s %q: %s", oe.Option, oe.Value, oe.Want)
	return errors.New(strings.Replace(err.Error(), oe.Error(), flagged, 1))
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// eventText renders a progress event as a line.
func eventText(e sandbox.Event) string {
	switch e.Kind {
	case sandbox.StepStarted, sandbox.Note:
		if e.Kind == sandbox.Note {
			return " • " + e.Detail
		}
		return " • " + e.Step
	case sandbox.StepDone:
		return fmt.Sprintf(" ✓ %s (%s)", e.Step, round(e.Elapsed))
	case sandbox.StepFailed:
		return fmt.Sprintf(" ✗ %s failed after %s", e.Step, round(e.Elapsed))
	case sandbox.NodeStep:
		return fmt.Sprintf(" ✓ %-32s %-27s +%-6s %s", e.Node, e.Step, round(e.Elapsed), e.Detail)
	case sandbox.NodeFailed:
		return fmt.Sprintf(" ✗ %-32s %-27s %s", e.Node, e.Step, e.Detail)
	case sandbox.NodeCounts:
		parts := make([]string, 0, len(e.Counts))
		for _, c := range e.Counts {
			parts = append(parts, fmt.Sprintf("%s %d", c.Step, c.Nodes))
		}
		return fmt.Sprintf(" • %d nodes: %s", e.Total, strings.Join(parts, ", "))
	}
	return fmt.Sprintf(" • %s %s %s", e.Kind, e.Step, e.Detail)
}

// progressTo returns a Progress that writes each event as a line to w.
func progressTo(w io.Writer) sandbox.Progress {
	return func(e sandbox.Event) { fmt.Fprintln(w, eventText(e)) }
}

// printNodeTable prints the nodes a start or an add launched.
func printNodeTable(w io.Writer, nodes []sandbox.Node) {
	if len(nodes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tIP\tKUBELET\tREADY AFTER")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.InstanceID, n.IP, n.Kubelet, round(time.Duration(n.ReadySeconds*float64(time.Second))))
	}
	_ = tw.Flush()
}

// printUpText prints up's summary: the nodes, and where the cluster is.
func printUpText(w io.Writer, c sandbox.Cluster, detached bool) {
	printNodeTable(w, c.Nodes)
	if detached {
		fmt.Fprintf(w, "Cluster %s is ready and runs in the background (pid %d).\n", c.Name, c.PID)
	} else {
		fmt.Fprintf(w, "Cluster %s is ready.\n", c.Name)
	}
	fmt.Fprintf(w, "  API server:  %s\n", c.Endpoint)
	fmt.Fprintf(w, "  kubeconfig:  %s\n", c.Kubeconfig)
	fmt.Fprintf(w, "  logs:        %s\n", c.LogDir)
	if detached {
		fmt.Fprintf(w, "Stop it with: nodejoin down --name %s\n", c.Name)
	} else {
		fmt.Fprintf(w, "Try: kubectl --kubeconfig %s get --raw /readyz\n", c.Kubeconfig)
	}
}

var stateMarks = map[string]string{"done": "✓", "failed": "✗", "pending": "·"}

// printReport prints a diagnosis.
func printReport(w io.Writer, r *sandbox.Report) {
	fmt.Fprintf(w, "Node %s\n  instance %s, %s, %s kubelet, %s identity, %s user data\n",
		r.Node, r.InstanceID, r.IP, r.Kubelet, r.Identity, r.AMIFamily)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, s := range r.Steps {
		line := fmt.Sprintf("  %s %-27s %s", stateMarks[s.Status], s.Step, s.Status)
		if s.Reason != "" {
			line += ": " + s.Reason
		}
		fmt.Fprintln(w, line)
		for _, e := range s.Evidence {
			fmt.Fprintf(w, "      evidence: %s\n", e)
		}
	}
	if n := r.Network; n != nil {
		fmt.Fprintln(w, "Network (aws-node's ipamd):")
		fmt.Fprintf(w, "  ready %t, CNI config %s (%s)\n", n.Ready, map[bool]string{true: "written", false: "absent"}[n.Conflist], n.ConflistPath)
		fmt.Fprintf(w, "  pool: %d addresses, %d assigned, %d free; limits %d ENIs x %d IPv4, max pods %d\n",
			n.Pool.Total, n.Pool.Assigned, n.Pool.Free, n.Limits.ENIs, n.Limits.IPv4PerENI, n.Limits.MaxPods)
		for _, e := range n.ENIs {
			fmt.Fprintf(w, "  ENI %s: device %d, %d addresses\n", e.ID, e.DeviceNumber, len(e.IPs))
		}
		if e := n.LastEC2Error; e != nil {
			fmt.Fprintf(w, "  last EC2 error: %s %s: %s\n", e.Operation, e.Code, e.Message)
		}
		if n.LastPoolError != "" {
			fmt.Fprintf(w, "  last pool error: %s\n", n.LastPoolError)
		}
	}
	if len(r.ControlPlane) > 0 {
		fmt.Fprintln(w, "Control plane:")
		printControlPlane(w, r.ControlPlane)
	}
	if len(r.Logs) > 0 {
		fmt.Fprintln(w, "Logs:")
		for _, l := range r.Logs {
			fmt.Fprintf(w, "  %-11s %s\n", l.Name+":", l.Path)
		}
	}
}

// printClusterReport prints a diagnosis of a cluster's control plane.
func printClusterReport(w io.Writer, r *sandbox.ClusterReport) {
	fmt.Fprintf(w, "Control plane of cluster %s\n", r.Cluster)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	printControlPlane(w, r.ControlPlane)
}

// printControlPlane prints the control-plane daemons' health as an indented table,
// followed by what each unhealthy one answered.
func printControlPlane(w io.Writer, hs []sandbox.ComponentHealth) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    COMPONENT\tHEALTH\tPID\tRESTARTS\tLOG")
	for _, h := range hs {
		mark, health := "✓", "ok"
		if !h.Healthy {
			mark, health = "✗", "failed"
		}
		pid := dash("")
		if h.PID != 0 {
			pid = strconv.Itoa(h.PID)
			if !h.Running {
				pid += " (gone)"
			}
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%s\t%d\t%s\n", mark, h.Name, health, pid, h.Restarts, h.Log)
	}
	_ = tw.Flush()
	for _, h := range hs {
		if !h.Healthy {
			fmt.Fprintf(w, "  %s: %s\n", h.Name, h.Health)
		}
	}
}

// printClusters prints get clusters' table.
func printClusters(w io.Writer, cs []sandbox.Cluster) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "No clusters. Start one with: nodejoin up")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tNODES\tAPI SERVER\tKUBECONFIG")
	for _, c := range cs {
		status := "running"
		if !c.Running {
			status = "stopped"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", c.Name, status, len(c.Nodes), dash(c.Endpoint), dash(c.Kubeconfig))
	}
	_ = tw.Flush()
}

// printNodes prints get nodes' table.
func printNodes(w io.Writer, cluster string, ns []sandbox.NodeStatus) {
	if len(ns) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes. Add one with: nodejoin add node --name %s\n", cluster, cluster)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tINSTANCE\tIP\tKUBELET\tIDENTITY\tSTATE\tSTEP")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.InstanceID, n.IP, n.Kubelet, n.Identity, n.State, n.Step)
	}
	_ = tw.Flush()
}

// printExported prints what export logs wrote.
func printExported(w io.Writer, ex sandbox.Exported) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range ex.Files {
		fmt.Fprintf(tw, "%s\t%d bytes\n", f.Path, f.Bytes)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "Exported %d log file(s) of cluster %s to %s\n", len(ex.Files), ex.Cluster, ex.Dir)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
