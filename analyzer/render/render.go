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

	"github.com/stormwatch/stormwatch/analyzer"
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

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func headline(r *analyzer.Report) string {
	return fmt.Sprintf("%s, %s, %s", plural(r.Input.Traces, "trace", "traces"),
		plural(r.Input.Spans, "span", "spans"), plural(r.Input.Operations, "logical operation", "logical operations"))
}

// Outcomes renders "503:54 200:2", most frequent first.
func Outcomes(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, " ")
}

// Evidence renders a finding's evidence as "key=value" pairs in key order; layers read as
// "edge x3 > api x3".
func Evidence(ev map[string]any) string {
	keys := slices.Sorted(maps.Keys(ev))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + value(ev[k])
	}
	return strings.Join(parts, " ")
}

func value(v any) string {
	switch x := v.(type) {
	case []map[string]any:
		parts := make([]string, len(x))
		for i, m := range x {
			if s, ok := m["service"]; ok {
				parts[i] = fmt.Sprintf("%v x%v", s, m["attempts"])
			} else {
				parts[i] = Evidence(m)
			}
		}
		return strings.Join(parts, " > ")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if m, ok := e.(map[string]any); ok {
				parts[i] = value([]map[string]any{m})
			} else {
				parts[i] = value(e)
			}
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func shortSpans(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:n], " ") + fmt.Sprintf(" ... (%d in all)", len(ids))
}

// Text writes the report for a terminal.
func Text(w io.Writer, r *analyzer.Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "stormwatch analyze: %s\n\n", headline(r))
	if len(r.Dependencies) > 0 {
		fmt.Fprintln(ew, "Dependencies (worst amplification first):")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  dependency\tservice\tsaw\tfor\t\tcallers\toutcomes\t")
		for _, d := range r.Dependencies {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t(%.2fx)\t%s\t%s\t\n", d.Dependency, orDash(d.Service), d.PhysicalCalls,
				d.LogicalOperations, d.Amplification, orDash(strings.Join(d.Callers, ",")), Outcomes(d.Outcomes))
		}
		tw.Flush()
		fmt.Fprintln(ew)
	}
	c, wn, in := Counts(r)
	if len(r.Findings) == 0 {
		fmt.Fprintln(ew, "No findings.")
	} else {
		fmt.Fprintf(ew, "Findings: %d critical, %d warning, %d info\n", c, wn, in)
		for _, f := range r.Findings {
			fmt.Fprintf(ew, "\n%s %s  trace %s\n", strings.ToUpper(f.Severity.String()), f.Detector, f.TraceID)
			fmt.Fprintf(ew, "  observation  %s\n", f.Summary)
			fmt.Fprintf(ew, "  evidence     %s\n", Evidence(f.Evidence))
			if f.Action != "" {
				fmt.Fprintf(ew, "  action       %s\n", f.Action)
			}
			where := orDash(f.Service)
			if f.Dependency != "" {
				where += " -> " + f.Dependency
			}
			fmt.Fprintf(ew, "  where        %s\n", where)
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

// Markdown writes a job summary: the headline, the dependency table, the findings table.
func Markdown(w io.Writer, r *analyzer.Report) error {
	ew := &errWriter{w: w}
	c, wn, in := Counts(r)
	fmt.Fprintf(ew, "## stormwatch analyze\n\n%s: **%d critical**, %d warning, %d info\n", headline(r), c, wn, in)
	if len(r.Dependencies) > 0 {
		fmt.Fprintf(ew, "\n### Dependencies\n\n| dependency | service | physical calls | logical operations | amplification | outcomes |\n|---|---|--:|--:|--:|---|\n")
		for _, d := range r.Dependencies {
			fmt.Fprintf(ew, "| `%s` | %s | %d | %d | %.2fx | %s |\n", d.Dependency, md(orDash(d.Service)), d.PhysicalCalls,
				d.LogicalOperations, d.Amplification, md(Outcomes(d.Outcomes)))
		}
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(ew, "\n### Findings\n\n| severity | detector | observation | evidence | action | trace |\n|---|---|---|---|---|---|\n")
		for _, f := range r.Findings {
			fmt.Fprintf(ew, "| %s | `%s` | %s | %s | %s | `%s` |\n", f.Severity, f.Detector, md(f.Summary),
				md(Evidence(f.Evidence)), md(f.Action), f.TraceID)
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
	return strings.ReplaceAll(s, "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error so the renderers can write freely and report once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("write report: %w", err)
	}
	return n, nil
}
