package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the step figures as a table, then Ready and the slowest step.
func (r *NodeReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "nodejoin bench node: %d real node(s) into cluster %s, one at a time, load %s\n", r.Nodes, r.Cluster, r.Load)
	fmt.Fprintf(w, "seconds since the instance started (at), and each step's own time since the step it follows (took)\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tafter\tat median\tat max\ttook median\ttook max\tnodes\tsource")
	for _, s := range r.Steps {
		after := s.After
		if after == "" {
			after = "instance start"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Step, after, num(s.AtMedianSeconds), num(s.AtMaxSeconds),
			num(s.TookMedianSeconds), num(s.TookMaxSeconds), s.N, s.Source)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nReady: median %s s, max %s s after the instance started; slowest step: %s\n",
		num(r.ReadyMedianSeconds), num(r.ReadyMaxSeconds), r.SlowestStep)
}
