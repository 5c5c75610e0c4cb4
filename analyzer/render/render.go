package render

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/internal/words"
)

// Format names an output format.
type Format string

// Formats.
const (
	FormatText     Format = "text"
	FormatJSON     Format = "json"
	FormatMarkdown Format = "markdown"
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatText, FormatJSON, FormatMarkdown:
		return f, nil
	case "md":
		return FormatMarkdown, nil
	}
	return "", fmt.Errorf("unknown format %q (want text, json or markdown)", s)
}

// Write renders r in format f.
func Write(w io.Writer, f Format, r *analyzer.Report) error {
	switch f {
	case FormatJSON:
		return JSON(w, r)
	case FormatMarkdown:
		return Markdown(w, r)
	default:
		return Text(w, r)
	}
}

// JSON writes the report contract, indented, with a final newline.
func JSON(w io.Writer, r *analyzer.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json report: %w", err)
	}
	return nil
}

// Counts are the findings per severity.
func Counts(r *analyzer.Report) (critical, warning, info int) {
	for _, f := range r.Findings {
		switch f.Severity {
		case analyzer.SeverityCritical:
			critical++
		case analyzer.SeverityWarning:
			warning++
		default:
			info++
		}
	}
	return
}

func headline(r *analyzer.Report) string {
	return fmt.Sprintf("%s, %s, %s", words.Count(r.Input.Traces, "trace"),
		words.Count(r.Input.Spans, "span"), words.Count(r.Input.Operations, "operation"))
}

// Outcomes renders "503 x54, 200 x2", most frequent first.
func Outcomes(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " x" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, ", ")
}

// Evidence renders a finding's evidence as "key=value" pairs in key order, two spaces apart;
// layers read as "edge x3 -> api x3", counts by name as "200 x60, 503 x2" (see analyzer.Value's
// String).
// The trace ids a cross-trace finding counted are not part of it: they are the traces line.
func Evidence(ev analyzer.Evidence) string {
	if _, ok := ev["trace_ids"]; ok {
		ev = ev.Clone()
		delete(ev, "trace_ids")
	}
	return ev.String()
}

// Traces are the traces a group's findings are about: every trace a cross-trace finding counted
// (its trace_ids evidence), else the traces of the group's findings.
func Traces(g *analyzer.FindingGroup, example *analyzer.Finding) []string {
	if example != nil {
		if ids, ok := example.Evidence["trace_ids"].Texts(); ok && len(ids) > 0 {
			return ids
		}
	}
	return g.TraceIDs
}

// Layers renders the layers that retried, root first: "edge x3 -> api x3 -> adapter x3".
func Layers(ls []analyzer.Layer) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s x%d", l.Service, l.Attempts)
	}
	return strings.Join(parts, " -> ")
}

func shortSpans(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:n], " ") + fmt.Sprintf(" ... (%d in all)", len(ids))
}

// exampleTraces is how many trace ids a grouped finding prints; JSON lists them all.
const exampleTraces = 3

// Path is where a group's findings happened, as names from the caller to the dependency. For
// findings that name the retrying layers (retry-amplification's layers, top first), it is that
// chain, so the layer nearest the dependency stands next to it: the group's caller is the top
// layer, which never calls the dependency itself.
func Path(g *analyzer.FindingGroup, example *analyzer.Finding) []string {
	var path []string
	if example != nil {
		if layers, ok := example.Evidence["layers"].Records(); ok && len(layers) > 1 {
			for _, l := range layers {
				if s, ok := l["service"].Text(); ok {
					path = append(path, s)
				}
			}
		}
	}
	if len(path) < 2 {
		path = []string{orDash(g.Caller)}
	}
	if g.Dependency != "" {
		path = append(path, g.Dependency)
	}
	return path
}

// Place is Path as text: "edge -> api -> adapter -> http://dep:8080".
func Place(g *analyzer.FindingGroup, example *analyzer.Finding) string {
	return strings.Join(Path(g, example), " -> ")
}

// When is when a group's findings happened: their times, or for a cross-trace finding, which
// has no time of its own (it is about many traces), the window it judged.
func When(g *analyzer.FindingGroup, example *analyzer.Finding) string {
	if tr := TimeRange(g.FirstUnixNano, g.LastUnixNano); tr != "" {
		return tr
	}
	if from, to := Window(example); from != 0 {
		return "window " + TimeRange(from, to)
	}
	return ""
}

// Window is the window a cross-trace finding judged (its window_start and window_end evidence),
// in Unix nanoseconds; zeros when it names none.
func Window(f *analyzer.Finding) (from, to int64) {
	if f == nil {
		return 0, 0
	}
	s, ok1 := f.Evidence["window_start"].Text()
	e, ok2 := f.Evidence["window_end"].Text()
	if !ok1 || !ok2 {
		return 0, 0
	}
	start, err1 := time.Parse(time.RFC3339Nano, s)
	end, err2 := time.Parse(time.RFC3339Nano, e)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return start.UnixNano(), end.UnixNano()
}

// TimeRange renders when a group's findings happened, in UTC: one time, or first - last.
func TimeRange(first, last int64) string {
	if first == 0 {
		return ""
	}
	const layout = "2006-01-02 15:04:05.000"
	a, b := time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
	if last <= first {
		return a.Format(layout) + " UTC"
	}
	end := b.Format(layout)
	if a.Format("2006-01-02") == b.Format("2006-01-02") {
		end = b.Format("15:04:05.000")
	}
	return a.Format(layout) + " - " + end + " UTC"
}

// groupCount says how many findings a group holds and in how many traces.
func groupCount(g *analyzer.FindingGroup) string {
	s := words.Count(g.Count, "finding")
	if n := len(g.TraceIDs); n > 0 && n != g.Count {
		s += " in " + words.Count(n, "trace")
	}
	return s
}

// Text writes the report for a terminal.
func Text(w io.Writer, r *analyzer.Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "stormwatch analyze: %s\n\n", headline(r))
	if len(r.Dependencies) > 0 {
		fmt.Fprintln(ew, "Dependencies (worst amplification first):")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  dependency\torigins\tcalls\tintents\tamplification\tcallers\toutcomes\t")
		for _, d := range r.Dependencies {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%.2fx\t%s\t%s\t\n", d.Dependency, orDash(d.OriginsText()), d.PhysicalCalls,
				d.LogicalOperations, d.Amplification, orDash(strings.Join(d.Callers, ", ")), Outcomes(d.Outcomes))
		}
		tw.Flush()
		fmt.Fprintf(ew, "  %s\n  %s; %s\n\n", analyzer.DefineCalls, analyzer.DefineIntents, analyzer.DefineAmplification)
	}
	costsText(ew, r)
	c, wn, in := Counts(r)
	if len(r.Findings) == 0 {
		fmt.Fprintln(ew, "No findings.")
	} else {
		groups := analyzer.GroupFindings(r.Findings)
		fmt.Fprintf(ew, "Findings: %d critical, %d warning, %d info, in %s (detector at caller -> dependency)\n",
			c, wn, in, words.Count(len(groups), "group"))
		for gi := range groups {
			g := &groups[gi]
			f := &r.Findings[g.Findings[0]]
			fmt.Fprintf(ew, "\n%s %s  %s  %s\n", strings.ToUpper(g.Severity.String()), g.Detector, Place(g, f), groupCount(g))
			if tr := When(g, f); tr != "" {
				fmt.Fprintf(ew, "  when         %s\n", tr)
			}
			label := "observation "
			if g.Count > 1 {
				label = "for example "
			}
			fmt.Fprintf(ew, "  %s %s\n", label, f.Summary)
			if len(f.Evidence) > 0 {
				fmt.Fprintf(ew, "  evidence     %s\n", Evidence(f.Evidence))
			}
			if f.Action != "" {
				fmt.Fprintf(ew, "  action       %s\n", f.Action)
			}
			if ids := Traces(g, f); len(ids) > 0 {
				fmt.Fprintf(ew, "  traces       %s\n", shortSpans(ids, exampleTraces))
				for _, id := range ids[:min(len(ids), exampleTraces)] {
					if link := r.TraceLink(id); link != "" {
						fmt.Fprintf(ew, "  view         %s\n", link)
					}
				}
			}
			if len(f.SpanIDs) > 0 {
				fmt.Fprintf(ew, "  spans        %s\n", shortSpans(f.SpanIDs, 4))
			}
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(ew, "\nNotes:")
		for _, n := range r.Notes {
			fmt.Fprintf(ew, "  - %s\n", n)
		}
	}
	return ew.err
}

// Markdown writes a job summary: the headline, the dependency table, the grouped findings table.
func Markdown(w io.Writer, r *analyzer.Report) error {
	ew := &errWriter{w: w}
	c, wn, in := Counts(r)
	fmt.Fprintf(ew, "## stormwatch analyze\n\n%s: **%d critical**, %d warning, %d info\n", headline(r), c, wn, in)
	if len(r.Dependencies) > 0 {
		fmt.Fprintf(ew, "\n### Dependencies\n\n| dependency | origins | calls | intents | amplification | outcomes |\n|---|---|--:|--:|--:|---|\n")
		for _, d := range r.Dependencies {
			fmt.Fprintf(ew, "| `%s` | %s | %d | %d | %.2fx | %s |\n", d.Dependency, md(orDash(d.OriginsText())), d.PhysicalCalls,
				d.LogicalOperations, d.Amplification, md(Outcomes(d.Outcomes)))
		}
		fmt.Fprintf(ew, "\n_%s; %s; %s._\n", md(analyzer.DefineCalls), md(analyzer.DefineIntents), md(analyzer.DefineAmplification))
	}
	costsMarkdown(ew, r)
	if len(r.Findings) > 0 {
		groups := analyzer.GroupFindings(r.Findings)
		fmt.Fprintf(ew, "\n### Findings\n\n%s in %s, one row per detector at caller -> dependency.\n\n",
			words.Count(len(r.Findings), "finding"), words.Count(len(groups), "group"))
		fmt.Fprintf(ew, "| severity | detector | where | findings | when (UTC) | for example | evidence | action | traces |\n|---|---|---|--:|---|---|---|---|---|\n")
		for gi := range groups {
			g := &groups[gi]
			f := &r.Findings[g.Findings[0]]
			traces := make([]string, 0, exampleTraces)
			ids := Traces(g, f)
			for _, id := range ids[:min(len(ids), exampleTraces)] {
				if link := r.TraceLink(id); link != "" {
					traces = append(traces, "[`"+id+"`]("+link+")")
					continue
				}
				traces = append(traces, "`"+id+"`")
			}
			if n := len(ids); n > exampleTraces {
				traces = append(traces, fmt.Sprintf("(%d in all)", n))
			}
			fmt.Fprintf(ew, "| %s | `%s` | %s | %d | %s | %s | %s | %s | %s |\n", g.Severity, g.Detector, md(Place(g, f)),
				g.Count, strings.TrimSuffix(When(g, f), " UTC"), md(f.Summary),
				md(Evidence(f.Evidence)), md(f.Action), strings.Join(traces, " "))
		}
	} else {
		fmt.Fprintf(ew, "\nNo findings.\n")
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(ew, "\n### Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(ew, "- %s\n", md(n))
		}
	}
	return ew.err
}

func md(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return termsafe.String(s) // a newline in a cell would end the table's row
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error so the renderers can write freely and report once.
// errWriter is where the text and markdown renderers write: it keeps the first error, and makes
// the text from the data safe for a terminal (see termsafe) - every report line goes through it.
type errWriter struct {
	w    io.Writer
	safe *termsafe.Writer
	err  error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	if e.safe == nil {
		e.safe = termsafe.NewWriter(e.w)
	}
	n, err := e.safe.Write(p)
	if err != nil {
		e.err = fmt.Errorf("write report: %w", err)
	}
	return n, nil
}
