package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Series is one line of the plot: a label and the nodes' sorted join times.
type Series struct {
	Label         string
	JoinedSeconds []float64
}

// PlotSeries are the lines of a report: ours, the fault run's and each baseline's;
// in a growth run, ours at each size.
func PlotSeries(r *Report) []Series {
	if len(r.Growth) > 1 {
		out := make([]Series, 0, len(r.Growth))
		for _, p := range r.Growth {
			out = append(out, Series{Label: fmt.Sprintf("nodejoin-controller, %d nodes", p.Nodes), JoinedSeconds: p.JoinedSeconds})
		}
		return out
	}
	out := []Series{{Label: "nodejoin-controller", JoinedSeconds: r.JoinedSeconds}}
	if r.Fault != nil && r.Fault.Run != nil {
		out = append(out, Series{Label: "with " + r.Fault.Kind, JoinedSeconds: r.Fault.Run.JoinedSeconds})
	}
	for _, b := range r.Baselines {
		label := b.Approver
		switch b.Approver {
		case BaselineKCM:
			label = "kube-controller-manager (client certificates)"
		case BaselineFloor:
			label = "floor (every kubelet CSR approved and signed, no check)"
		}
		out = append(out, Series{Label: label, JoinedSeconds: b.JoinedSeconds})
	}
	return out
}

// PlotNodes is the plot's height in nodes: the largest size of a growth run.
func PlotNodes(r *Report) int {
	n := r.Nodes
	for _, p := range r.Growth {
		n = max(n, p.Nodes)
	}
	return n
}

// Plot dimensions and colours.
const (
	plotW, plotH                       = 720, 400
	marginL, marginR, marginT, marginB = 64, 24, 40, 48
	plotTitleFmt                       = "Nodes joined over time (%d nodes started at once)"
)

var plotColours = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// PlotSVG draws the nodes joined over time, one step line per series: a node counts as
// joined once it is Ready with every certificate issued. The output depends only on the
// input.
func PlotSVG(w io.Writer, nodes int, series []Series) error {
	maxT := 0.0
	for _, s := range series {
		for _, t := range s.JoinedSeconds {
			maxT = math.Max(maxT, t)
		}
	}
	xMax := niceCeil(maxT)
	yMax := float64(max(nodes, 1))
	iw, ih := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	x := func(t float64) float64 { return float64(marginL) + iw*t/xMax }
	y := func(n float64) float64 { return float64(marginT) + ih*(1-n/yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14">%s</text>`+"\n", marginL, escape(fmt.Sprintf(plotTitleFmt, nodes)))
	// Axes, ticks and grid.
	for i := 0; i <= 5; i++ {
		t := xMax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(t), marginT, x(t), plotH-marginB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), plotH-marginB+16, trimFloat(t))
		v := yMax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, y(v), plotW-marginR, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y(v)+4, trimFloat(math.Round(v)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">seconds after the kubelets started</text>`+"\n", float64(marginL)+iw/2, plotH-10)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">nodes joined</text>`+"\n", float64(marginT)+ih/2, float64(marginT)+ih/2)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", marginL, marginT, iw, ih)
	for i, s := range series {
		colour := plotColours[i%len(plotColours)]
		var pts strings.Builder
		fmt.Fprintf(&pts, "%.1f,%.1f", x(0), y(0))
		for j, t := range s.JoinedSeconds {
			fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", x(t), y(float64(j)), x(t), y(float64(j+1)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, pts.String())
		ly := marginT + 16 + 18*i
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", x(0)+12, ly, x(0)+36, ly, colour)
		last := 0.0
		if len(s.JoinedSeconds) > 0 {
			last = s.JoinedSeconds[len(s.JoinedSeconds)-1]
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s: all joined at %ss</text>`+"\n", x(0)+42, ly+4, escape(s.Label), trimFloat(last))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds a positive number of seconds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
