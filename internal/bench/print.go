package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// WriteText prints the figures as a table: ours, then the fault run and each baseline
// when there are, then ours / each baseline.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "nodejoin bench join: %d nodes, identity %s, load %s\n\n", r.Nodes, r.Identity, r.Load)
	if r.Soak != nil {
		printSoak(w, r)
		return
	}
	cols := []*Report{r}
	head := []string{"", "nodejoin"}
	if r.Fault != nil {
		cols = append(cols, r.Fault.Run)
		head = append(head, "with "+r.Fault.Kind)
	}
	for _, b := range r.Baselines {
		cols = append(cols, b)
		head = append(head, b.Approver+" baseline")
	}
	for _, b := range r.Baselines {
		head = append(head, "nodejoin/"+b.Approver)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	line := func(cells []string) {
		for range r.Baselines {
			cells = append(cells, "")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row := func(name string, val func(*Report) float64, withRatio bool) {
		cells := []string{name}
		for _, c := range cols {
			cells = append(cells, num(val(c)))
		}
		for _, b := range r.Baselines {
			cell := ""
			if withRatio && val(b) != 0 {
				cell = num(val(r) / val(b))
			}
			cells = append(cells, cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	pct := func(name string, get func(*Report) Percentiles) {
		cells := []string{name + " p50/p90/p99/max (ms)"}
		for _, c := range cols {
			p := get(c)
			cells = append(cells, fmt.Sprintf("%s/%s/%s/%s", num(p.P50), num(p.P90), num(p.P99), num(p.Max)))
		}
		line(cells)
	}
	row("all Ready (s)", func(c *Report) float64 { return c.AllReadySeconds }, true)
	row("all certificates issued (s)", func(c *Report) float64 { return c.AllIssuedSeconds }, true)
	row("median join (s)", func(c *Report) float64 { return c.MedianJoinSeconds }, true)
	row("seconds per node (ms)", func(c *Report) float64 { return 1000 * c.SecondsPerNode }, true)
	pct("CSR create→approved", func(c *Report) Percentiles { return c.CSRCreateToApprovedMS })
	pct("CSR approved→issued", func(c *Report) Percentiles { return c.CSRApprovedToIssuedMS })
	pct("CSR create→issued", func(c *Report) Percentiles { return c.CSRCreateToIssuedMS })
	cells := []string{"webhook TokenReview p50/p99 (ms), reviews, cache hits"}
	for _, c := range cols {
		cells = append(cells, fmt.Sprintf("%s/%s, %d, %s", num(c.WebhookMS.P50), num(c.WebhookMS.P99), c.TokenReviews, num(c.WebhookCacheHitRate)))
	}
	line(cells)
	row("API requests per node", func(c *Report) float64 { return c.APIRequestsPerNode }, true)
	row("cloud calls per node (STS, EC2, IAM)", func(c *Report) float64 { return c.CloudCallsPerNode }, false)
	row("DescribeInstances per node", func(c *Report) float64 { return c.DescribeInstancesPerNode }, false)
	row("controller CPU (s)", func(c *Report) float64 { return c.ControllerCPUSeconds }, true)
	row("controller peak RSS (MiB)", func(c *Report) float64 { return c.ControllerPeakRSSMiB }, true)
	for _, proc := range cpuProcs(cols) {
		row("CPU (s): "+proc, func(c *Report) float64 { return c.CPUSeconds[proc] }, true)
	}
	row("kubelets' memory per node (MiB)", func(c *Report) float64 { return c.KubeletsMiBPerNode }, false)
	row("CSRs", func(c *Report) float64 { return float64(c.CSRs) }, false)
	row("left pending", func(c *Report) float64 { return float64(c.LeftPending) }, false)
	row("denied", func(c *Report) float64 { return float64(c.Denied) }, false)
	row("issued twice", func(c *Report) float64 { return float64(c.IssuedTwice) }, false)
	_ = tw.Flush()
	printCalls(w, r)
	if len(r.Baselines) > 0 {
		fmt.Fprintln(w)
	}
	for _, b := range r.Baselines {
		fmt.Fprintf(w, "ratio_all_issued_%s (nodejoin / %s): %s\n", b.Approver, b.Approver, num(ratio(r.AllIssuedSeconds, b.AllIssuedSeconds)))
	}
	if r.Fault != nil {
		fmt.Fprintf(w, "\n%s injected at %ss; extra time: %ss\n", r.Fault.Kind, num(r.Fault.InjectedAtSeconds), num(r.Fault.ExtraSeconds))
	}
	printGrowth(w, r)
}

// procOrder is the order of the CPU rows; processes not named here follow, sorted.
var procOrder = []string{"kube-apiserver", "etcd", procController, procFloor, "kube-controller-manager", "kube-scheduler", procKubelets}

// cpuProcs names the processes any column measured, in procOrder.
func cpuProcs(cols []*Report) []string {
	seen := map[string]bool{}
	for _, c := range cols {
		for k := range c.CPUSeconds {
			seen[k] = true
		}
	}
	var out []string
	for _, p := range procOrder {
		if seen[p] {
			out = append(out, p)
			delete(seen, p)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}

// printGrowth prints a growth run's sizes side by side.
func printGrowth(w io.Writer, r *Report) {
	if len(r.Growth) == 0 {
		return
	}
	fmt.Fprintf(w, "\ngrowth (nodejoin):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var names []string
	for _, b := range r.Baselines {
		names = append(names, b.Approver)
	}
	head := "nodes\tall issued (s)\tmedian join (s)\tseconds per node (ms)\tAPI requests per node\tkubelets' MiB per node"
	for _, b := range names {
		head += "\tnodejoin/" + b
	}
	fmt.Fprintln(tw, head)
	for _, p := range r.Growth {
		line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", p.Nodes, num(p.AllIssuedSeconds), num(p.MedianJoinSeconds), num(1000*p.SecondsPerNode),
			num(p.APIRequestsPerNode), strconv.FormatFloat(p.KubeletsMiBPerNode, 'f', -1, 64))
		for _, b := range names {
			line += "\t" + num(p.RatioAllIssued[b])
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

func printSoak(w io.Writer, r *Report) {
	s := r.Soak
	fmt.Fprintf(w, "soak of %ss, certificates of %s: %d nodes joined, %d left, %d rotations\n", num(s.DurationSeconds), s.CertificateLifetime, s.NodesJoined, s.NodesLeft, s.Rotations)
	fmt.Fprintf(w, "controller RSS: %s MiB (first quarter) → %s MiB (last quarter), growth %s MiB; peak %s MiB; CPU %ss\n",
		num(s.RSSFirstMiB), num(s.RSSLastMiB), num(s.RSSGrowthMiB), num(r.ControllerPeakRSSMiB), num(r.ControllerCPUSeconds))
	fmt.Fprintf(w, "CSRs: %d, pending at most %d, left pending %d, denied %d, issued twice %d\n\n", r.CSRs, s.MaxPending, r.LeftPending, r.Denied, r.IssuedTwice)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "seconds\tnodes\tCSRs\tpending\tRSS (MiB)")
	for _, x := range s.Samples {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", num(x.Seconds), x.Nodes, x.CSRs, x.Pending, num(x.RSSMiB))
	}
	_ = tw.Flush()
}

// num prints a figure with at most two decimals.
func num(v float64) string {
	return strconv.FormatFloat(float64(int64(v*100+copysignHalf(v)))/100, 'f', -1, 64)
}

func copysignHalf(v float64) float64 {
	if v < 0 {
		return -0.5
	}
	return 0.5
}

// topCalls is how many of the busiest calls printCalls lists.
const topCalls = 12

// printCalls lists the calls that made the most API requests per node, ours and the
// baselines' side by side.
func printCalls(w io.Writer, r *Report) {
	calls := r.APIRequestsPerNodeByCall
	if len(calls) == 0 {
		return
	}
	all := func(k string) float64 {
		t := calls[k]
		for _, b := range r.Baselines {
			t += b.APIRequestsPerNodeByCall[k]
		}
		return t
	}
	names := slices.Collect(maps.Keys(calls))
	for _, b := range r.Baselines {
		for k := range b.APIRequestsPerNodeByCall {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(all(b), all(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "\nAPI requests per node, the %d busiest calls:\n", min(topCalls, len(names)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "call\tnodejoin"
	for _, b := range r.Baselines {
		head += "\t" + b.Approver + " baseline"
	}
	fmt.Fprintln(tw, head)
	for _, name := range names[:min(topCalls, len(names))] {
		line := name + "\t" + num(calls[name])
		for _, b := range r.Baselines {
			line += "\t" + num(b.APIRequestsPerNodeByCall[name])
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// WritePlotFile writes the SVG plot of the nodes joined over time to path.
func (r *Report) WritePlotFile(path string) error {
	var b bytes.Buffer
	if err := PlotSVG(&b, PlotNodes(r), PlotSeries(r)); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
