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

// WriteText prints the figures as a table: ours, then the fault run and the baseline
// when there are.
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
	if r.Baseline != nil {
		cols = append(cols, r.Baseline)
		head = append(head, "kcm baseline", "ratio")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	row := func(name string, val func(*Report) float64, withRatio bool) {
		cells := []string{name}
		for _, c := range cols {
			cells = append(cells, num(val(c)))
		}
		if r.Baseline != nil {
			cell := ""
			if withRatio && val(r.Baseline) != 0 {
				cell = num(val(r) / val(r.Baseline))
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
		if r.Baseline != nil {
			cells = append(cells, "")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("all Ready (s)", func(c *Report) float64 { return c.AllReadySeconds }, true)
	row("all certificates issued (s)", func(c *Report) float64 { return c.AllIssuedSeconds }, true)
	row("median join (s)", func(c *Report) float64 { return c.MedianJoinSeconds }, true)
	pct("CSR create→approved", func(c *Report) Percentiles { return c.CSRCreateToApprovedMS })
	pct("CSR approved→issued", func(c *Report) Percentiles { return c.CSRApprovedToIssuedMS })
	pct("CSR create→issued", func(c *Report) Percentiles { return c.CSRCreateToIssuedMS })
	cells := []string{"webhook TokenReview p50/p99 (ms), reviews, cache hits"}
	for _, c := range cols {
		cells = append(cells, fmt.Sprintf("%s/%s, %d, %s", num(c.WebhookMS.P50), num(c.WebhookMS.P99), c.TokenReviews, num(c.WebhookCacheHitRate)))
	}
	if r.Baseline != nil {
		cells = append(cells, "")
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	row("API requests per node", func(c *Report) float64 { return c.APIRequestsPerNode }, true)
	row("cloud calls per node (STS, EC2, IAM)", func(c *Report) float64 { return c.CloudCallsPerNode }, false)
	row("DescribeInstances per node", func(c *Report) float64 { return c.DescribeInstancesPerNode }, false)
	row("controller CPU (s)", func(c *Report) float64 { return c.ControllerCPUSeconds }, true)
	row("controller peak RSS (MiB)", func(c *Report) float64 { return c.ControllerPeakRSSMiB }, true)
	row("CSRs", func(c *Report) float64 { return float64(c.CSRs) }, false)
	row("left pending", func(c *Report) float64 { return float64(c.LeftPending) }, false)
	row("denied", func(c *Report) float64 { return float64(c.Denied) }, false)
	row("issued twice", func(c *Report) float64 { return float64(c.IssuedTwice) }, false)
	_ = tw.Flush()
	printCalls(w, r)
	if r.Baseline != nil {
		fmt.Fprintf(w, "\nratio_all_issued (nodejoin / kcm): %s\n", num(r.RatioAllIssued))
	}
	if r.Fault != nil {
		fmt.Fprintf(w, "\n%s injected at %ss; extra time: %ss\n", r.Fault.Kind, num(r.Fault.InjectedAtSeconds), num(r.Fault.ExtraSeconds))
	}
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
// baseline's side by side.
func printCalls(w io.Writer, r *Report) {
	calls := r.APIRequestsPerNodeByCall
	if len(calls) == 0 {
		return
	}
	var base map[string]float64
	if r.Baseline != nil {
		base = r.Baseline.APIRequestsPerNodeByCall
	}
	names := slices.Collect(maps.Keys(calls))
	for k := range base {
		if _, ok := calls[k]; !ok {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(calls[b]+base[b], calls[a]+base[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "\nAPI requests per node, the %d busiest calls:\n", min(topCalls, len(names)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "call\tnodejoin"
	if base != nil {
		head += "\tkcm baseline"
	}
	fmt.Fprintln(tw, head)
	for _, name := range names[:min(topCalls, len(names))] {
		line := name + "\t" + num(calls[name])
		if base != nil {
			line += "\t" + num(base[name])
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// WritePlotFile writes the SVG plot of the nodes joined over time to path.
func (r *Report) WritePlotFile(path string) error {
	var b bytes.Buffer
	if err := PlotSVG(&b, r.Nodes, PlotSeries(r)); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b.Bytes(), 0o644)
}
