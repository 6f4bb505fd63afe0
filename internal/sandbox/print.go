package sandbox

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/printer"
)

// ProgressTo returns a Progress that writes each event as a line to w.
func ProgressTo(w io.Writer) Progress {
	return func(e Event) { fmt.Fprintln(w, e.Line()) }
}

// WriteNodeTable prints the nodes a start or an add launched.
func WriteNodeTable(w io.Writer, nodes []Node) {
	if len(nodes) == 0 {
		return
	}
	tw := printer.Table(w)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tIP\tKUBELET\tREADY AFTER")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, n.InstanceID, n.IP, n.Kubelet, printer.Round(time.Duration(n.ReadySeconds*float64(time.Second))))
	}
	_ = tw.Flush()
}

// WriteSummary prints a started cluster: its nodes, and where it is.
func (c Cluster) WriteSummary(w io.Writer, detached bool) {
	WriteNodeTable(w, c.Nodes)
	if detached {
		fmt.Fprintf(w, "Cluster %s is ready and runs in the background (pid %d).\n", c.Name, c.PID)
	} else {
		fmt.Fprintf(w, "Cluster %s is ready.\n", c.Name)
	}
	fmt.Fprintf(w, "  API server:  %s\n", c.Endpoint)
	fmt.Fprintf(w, "  kubeconfig:  %s\n", c.Kubeconfig)
	fmt.Fprintf(w, "  logs:        %s\n", c.LogDir)
	if k := c.NodeGroupKubelet; k != nil {
		fmt.Fprintf(w, "  node groups: %s\n", k)
	}
	if a := c.AWS; a != nil {
		fmt.Fprintf(w, "  local AWS:   %s (every service; profile %s, CA %s)\n", a.Endpoint, a.Profile, a.CABundle)
		fmt.Fprintf(w, "Use it with:  eval \"$(nodejoin aws-env --name %s)\"; aws --endpoint-url \"$AWS_ENDPOINT_URL\" sts get-caller-identity\n", c.Name)
	}
	if detached {
		fmt.Fprintf(w, "Stop it with: nodejoin down --name %s\n", c.Name)
	} else {
		fmt.Fprintf(w, "Try: kubectl --kubeconfig %s get --raw /readyz\n", c.Kubeconfig)
	}
}

var stateMarks = map[string]string{"done": "✓", "failed": "✗", "pending": "·"}

// WriteText prints the diagnosis.
func (r *Report) WriteText(w io.Writer) {
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
		writeControlPlane(w, r.ControlPlane)
	}
	if len(r.Logs) > 0 {
		fmt.Fprintln(w, "Logs:")
		for _, l := range r.Logs {
			fmt.Fprintf(w, "  %-11s %s\n", l.Name+":", l.Path)
		}
	}
}

// WriteText prints the diagnosis of the control plane.
func (r *ClusterReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Control plane of cluster %s\n", r.Cluster)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	writeControlPlane(w, r.ControlPlane)
}

// writeControlPlane prints the daemons' health as an indented table, followed by what
// each unhealthy one answered.
func writeControlPlane(w io.Writer, hs []ComponentHealth) {
	tw := printer.Table(w)
	fmt.Fprintln(tw, "    COMPONENT\tHEALTH\tPID\tRESTARTS\tLOG")
	for _, h := range hs {
		mark, health := "✓", "ok"
		if !h.Healthy {
			mark, health = "✗", "failed"
		}
		pid := "-"
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

// WriteClusters prints the table of `get clusters`.
func WriteClusters(w io.Writer, cs []Cluster) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "No clusters. Start one with: nodejoin up")
		return
	}
	tw := printer.Table(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tNODES\tAPI SERVER\tKUBECONFIG")
	for _, c := range cs {
		status := "running"
		if !c.Running {
			status = "stopped"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", c.Name, status, len(c.Nodes), printer.Dash(c.Endpoint), printer.Dash(c.Kubeconfig))
	}
	_ = tw.Flush()
}

// WriteNodeStatuses prints the table of `get nodes`.
func WriteNodeStatuses(w io.Writer, cluster string, ns []NodeStatus) {
	if len(ns) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes. Add one with: nodejoin add node --name %s\n", cluster, cluster)
		return
	}
	tw := printer.Table(w)
	fmt.Fprintln(tw, "NAME\tINSTANCE\tIP\tKUBELET\tIDENTITY\tSTATE\tSTEP")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.InstanceID, n.IP, n.Kubelet, n.Identity, n.State, n.Step)
	}
	_ = tw.Flush()
}

// WriteText prints what ExportLogs wrote.
func (ex Exported) WriteText(w io.Writer) {
	tw := printer.Table(w)
	for _, f := range ex.Files {
		fmt.Fprintf(tw, "%s\t%d bytes\n", f.Path, f.Bytes)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "Exported %d log file(s) of cluster %s to %s\n", len(ex.Files), ex.Cluster, ex.Dir)
}

// WriteImageLoad prints one line per node of a LoadImages: what it imported, why it
// was skipped, or its error.
func WriteImageLoad(w io.Writer, cluster string, archives []string, res []NodeImages) {
	if len(res) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes yet; nodes added later import the archive(s).\n", cluster)
		return
	}
	tw := printer.Table(w)
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

// WriteImageList prints one line per node and image of a ListImages, then the nodes
// that were skipped or failed.
func WriteImageList(w io.Writer, cluster string, res []NodeImages) {
	if len(res) == 0 {
		fmt.Fprintf(w, "Cluster %s has no nodes. Add one with: nodejoin add node --name %s\n", cluster, cluster)
		return
	}
	tw := printer.Table(w)
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

// FlagError names a flag in an invalid option's message: "--identity" for the
// library's "identity".
func FlagError(err error) error {
	var oe *OptionError
	if err == nil || !errors.As(err, &oe) {
		return err
	}
	flagged := fmt.Sprintf("--%s %q: %s", oe.Option, oe.Value, oe.Want)
	return errors.New(strings.Replace(err.Error(), oe.Error(), flagged, 1))
}
