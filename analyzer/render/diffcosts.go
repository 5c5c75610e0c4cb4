package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
)

func diffCostName(c *diff.Cost) string {
	return CostName(&analyzer.CostEntry{Kind: c.Kind, Service: c.Service, Name: c.Name, Dependency: c.Dependency})
}

// costChange renders one figure before -> after, "-" for a side without it.
func costChange(c *diff.Cost, f func(*diff.CostFigures) string) string {
	side := func(x *diff.CostFigures) string {
		if x == nil {
			return "-"
		}
		return f(x)
	}
	return side(c.Before) + " -> " + side(c.After)
}

// diffCostRows is the entry points and dependencies the text and Markdown diffs list.
func diffCostRows(cs []diff.Cost) ([]diff.Cost, int) {
	var entries, deps []diff.Cost
	for _, c := range cs {
		if c.Kind == analyzer.CostDependency {
			deps = append(deps, c)
		} else {
			entries = append(entries, c)
		}
	}
	more := max(len(entries)-costRows, 0) + max(len(deps)-costRows, 0)
	return append(entries[:min(len(entries), costRows)], deps[:min(len(deps), costRows)]...), more
}

var (
	p50Of   = func(x *diff.CostFigures) string { return Ms(x.AddedLatencyMs.P50) }
	p99Of   = func(x *diff.CostFigures) string { return Ms(x.AddedLatencyMs.P99) }
	shareOf = func(x *diff.CostFigures) string { return Share(x.RetryShare) }
	extraOf = func(x *diff.CostFigures) string { return rate(x.ExtraCallsPerSecond) }
	lateOf  = func(x *diff.CostFigures) string { return Ms(x.LateWorkSeconds * 1000) }
)

// costsDiffText writes what retries cost, before -> after.
func costsDiffText(w io.Writer, r *diff.Report) {
	rows, more := diffCostRows(r.Costs)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhat retries cost (before -> after; added = time requests waited in failed attempts and pauses):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  entry point or dependency\tretry share\tadded p50\tadded p99\textra calls/s\tlate work")
	for i := range rows {
		c := &rows[i]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", diffCostName(c), costChange(c, shareOf), costChange(c, p50Of),
			costChange(c, p99Of), costChange(c, extraOf), costChange(c, lateOf))
	}
	tw.Flush()
	if more > 0 {
		fmt.Fprintf(w, "  (%d more in the JSON diff)\n", more)
	}
}

// costsDiffMarkdown writes the same as a table.
func costsDiffMarkdown(w io.Writer, r *diff.Report) {
	rows, more := diffCostRows(r.Costs)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### What retries cost (before -> after)\n\n| entry point or dependency | retry share | added p50 | added p99 | extra calls/s | late work |\n|---|--:|--:|--:|--:|--:|\n")
	for i := range rows {
		c := &rows[i]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", md(diffCostName(c)), costChange(c, shareOf), costChange(c, p50Of),
			costChange(c, p99Of), costChange(c, extraOf), costChange(c, lateOf))
	}
	if more > 0 {
		fmt.Fprintf(w, "\n%d more in the JSON diff.\n", more)
	}
	fmt.Fprintf(w, "\n_%s._\n", md(strings.TrimSpace(DefineAddedLatency)))
}
