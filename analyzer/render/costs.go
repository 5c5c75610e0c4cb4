package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stormwatch/stormwatch/analyzer"
)

// costRows is how many entry points and how many dependencies the text and Markdown reports list
// (those that retries cost most); JSON lists them all.
const costRows = 10

// DefineAddedLatency says what "added" means beside the cost tables.
const DefineAddedLatency = "added = the time requests waited in failed attempts that were retried and in the pauses between attempts, on their critical path"

// Ms renders milliseconds for people: "0", "3.5ms", "402ms", "1.88s".
func Ms(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(ms/1000, 'f', 2, 64) + "s"
}

// Share renders a share as a percentage, "96.4%".
func Share(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }

// CostName is an entry's name: "edge GET /items/{id}" for an entry point, the dependency.
func CostName(e *analyzer.CostEntry) string {
	if e.Kind == analyzer.CostDependency {
		return e.Dependency
	}
	return strings.TrimSpace(orDash(e.Service) + " " + e.Name)
}

// SamplingNote says how the rates of the entries were scaled, "" when every request's spans said.
func SamplingNote(cs []analyzer.CostEntry) string {
	unknown, partly := false, false
	for i := range cs {
		switch cs[i].Sampling {
		case analyzer.SamplingUnknown:
			unknown = true
		case analyzer.SamplingPartly:
			partly = true
		}
	}
	switch {
	case partly || unknown && hasKnown(cs):
		return "rates scale the requests whose spans say how they were sampled; the others count as recorded"
	case unknown:
		return "rates are as recorded: the spans do not say how they were sampled"
	}
	return ""
}

func hasKnown(cs []analyzer.CostEntry) bool {
	for i := range cs {
		if cs[i].Sampling == analyzer.SamplingKnown {
			return true
		}
	}
	return false
}

// split returns the entry points and the dependencies, each at most costRows, and how many of
// each were left out.
func split(cs []analyzer.CostEntry) (entries, deps []analyzer.CostEntry, moreE, moreD int) {
	for _, e := range cs {
		if e.Kind == analyzer.CostDependency {
			deps = append(deps, e)
		} else {
			entries = append(entries, e)
		}
	}
	if len(entries) > costRows {
		entries, moreE = entries[:costRows], len(entries)-costRows
	}
	if len(deps) > costRows {
		deps, moreD = deps[:costRows], len(deps)-costRows
	}
	return
}

func costsSeconds(cs []analyzer.CostEntry) float64 {
	if len(cs) == 0 {
		return 0
	}
	return cs[0].Seconds
}

// NoCost says that retries cost nothing, for a report whose costs are all zero.
const NoCost = "no request waited on a retry, no call was a retry's, no callee worked after its caller gave up"

// costFree reports whether every entry's costs are zero.
func costFree(cs []analyzer.CostEntry) bool {
	for i := range cs {
		e := &cs[i]
		if e.AddedLatencyMs.Total != 0 || e.ExtraCalls != 0 || e.LateWorkSeconds != 0 || e.HedgeMs != 0 {
			return false
		}
	}
	return true
}

// costsText writes the text report's cost tables.
func costsText(w io.Writer, r *analyzer.Report) {
	if len(r.Costs) == 0 {
		return
	}
	if costFree(r.Costs) {
		fmt.Fprintf(w, "What retries cost: nothing (%s).\n\n", NoCost)
		return
	}
	entries, deps, moreE, moreD := split(r.Costs)
	fmt.Fprintf(w, "What retries cost (most added latency first; rates over %s):\n", Ms(costsSeconds(r.Costs)*1000))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	table := func(title string, rows []analyzer.CostEntry, more int) {
		fmt.Fprintf(tw, "  %s\trequests\treq/s\tretry share\tadded p50\tadded p99\tadded total\textra calls\textra calls/s\tlate work\t\n", title)
		for i := range rows {
			e := &rows[i]
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", CostName(e), e.Requests, rate(e.RequestsPerSecond),
				Share(e.RetryShare), Ms(e.AddedLatencyMs.P50), Ms(e.AddedLatencyMs.P99), Ms(e.AddedLatencyMs.Total),
				e.ExtraCalls, rate(e.ExtraCallsPerSecond), Ms(e.LateWorkSeconds*1000))
		}
		if more > 0 {
			fmt.Fprintf(tw, "  (%d more in the JSON report)\t\t\t\t\t\t\t\t\t\t\n", more)
		}
	}
	table("entry point", entries, moreE)
	if len(deps) > 0 {
		table("dependency", deps, moreD)
	}
	tw.Flush()
	fmt.Fprintf(w, "  %s; late work = span-seconds callees worked after their caller gave up\n", DefineAddedLatency)
	if n := SamplingNote(r.Costs); n != "" {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintln(w)
}

// costsMarkdown writes the Markdown report's cost table.
func costsMarkdown(w io.Writer, r *analyzer.Report) {
	if len(r.Costs) == 0 {
		return
	}
	if costFree(r.Costs) {
		fmt.Fprintf(w, "\n### What retries cost\n\nNothing: %s.\n", NoCost)
		return
	}
	entries, deps, moreE, moreD := split(r.Costs)
	fmt.Fprintf(w, "\n### What retries cost\n\n| entry point or dependency | requests | req/s | retry share | added p50 | added p99 | added total | extra calls | extra calls/s | late work |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, rows := range [][]analyzer.CostEntry{entries, deps} {
		for i := range rows {
			e := &rows[i]
			name := md(CostName(e))
			if e.Kind == analyzer.CostDependency {
				name = "`" + name + "`"
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %d | %s | %s |\n", name, e.Requests, rate(e.RequestsPerSecond),
				Share(e.RetryShare), Ms(e.AddedLatencyMs.P50), Ms(e.AddedLatencyMs.P99), Ms(e.AddedLatencyMs.Total),
				e.ExtraCalls, rate(e.ExtraCallsPerSecond), Ms(e.LateWorkSeconds*1000))
		}
	}
	if moreE+moreD > 0 {
		fmt.Fprintf(w, "\n%d more in the JSON report.\n", moreE+moreD)
	}
	note := md(DefineAddedLatency) + "; rates over " + Ms(costsSeconds(r.Costs)*1000)
	if n := SamplingNote(r.Costs); n != "" {
		note += "; " + n
	}
	fmt.Fprintf(w, "\n_%s._\n", note)
}

func rate(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
