package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stormwatch/stormwatch/analyzer/diff"
	"github.com/stormwatch/stormwatch/internal/words"
)

// WriteDiff renders a before/after comparison in format f: the verdict first, then the
// dependencies and their callers, the findings by place, and the what-if check when there is one.
func WriteDiff(w io.Writer, f Format, r *diff.Report) error {
	switch f {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write json diff: %w", err)
		}
		return nil
	case FormatMarkdown:
		return DiffMarkdown(w, r)
	}
	return DiffText(w, r)
}

// DiffText writes the comparison for a terminal.
func DiffText(w io.Writer, r *diff.Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "stormwatch diff: %s\n\n", r.Verdict)
	fmt.Fprintf(ew, "  before  %s\n  after   %s\n", side(r.Before), side(r.After))
	if len(r.Regressions) > 0 {
		fmt.Fprintln(ew, "\nRegressions:")
		for _, s := range r.Regressions {
			fmt.Fprintf(ew, "  - %s\n", s)
		}
	}
	if len(r.Dependencies) > 0 {
		fmt.Fprintln(ew, "\nDependencies (before -> after, largest change first; amplification = calls / intents):")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  dependency\torigins\tcalls\tintents\tamplification\tchange\tlayer product")
		for i := range r.Dependencies {
			d := &r.Dependencies[i]
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Dependency, orDash(d.OriginsText()), calls(d.Before, d.After),
				ops(d.Before, d.After), amps(d.Before, d.After), changeOf(d.Before, d.After, d.Change, d.Worse), layers(d.Before, d.After))
			for _, c := range d.Callers {
				fmt.Fprintf(tw, "    by %s\t\t%s\t%s\t%s\t%s\t\n", orDash(c.Caller), calls(c.Before, c.After),
					ops(c.Before, c.After), amps(c.Before, c.After), changeOf(c.Before, c.After, c.Change, false))
			}
		}
		tw.Flush()
	}
	costsDiffText(ew, r)
	if len(r.Findings) == 0 {
		fmt.Fprintln(ew, "\nNo findings on either side.")
	} else {
		fmt.Fprintf(ew, "\nFindings by detector and place: %d resolved, %d new, %d persisting\n",
			r.Counts.Resolved, r.Counts.New, r.Counts.Persisting)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d -> %d\n", strings.ToUpper(string(f.State)), f.Severity, f.Detector, f.Place(), f.Before, f.After)
		}
		tw.Flush()
	}
	if r.WhatIf != nil {
		whatIfDiffText(ew, r.WhatIf)
	}
	return ew.err
}

func whatIfDiffText(ew *errWriter, p *diff.WhatIf) {
	fmt.Fprintf(ew, "\nWhat if %s: predicted from before, measured after%s:\n", strings.Join(p.Changes, ", "), scaleNote(p.Scale))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  dependency\tservice\trecorded\tpredicted\tmeasured\terror")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%d\t%s\n", r.Dependency, orDash(r.Service), r.Recorded, expected(r), r.Measured, predictionError(r))
	}
	tw.Flush()
	if len(p.Wrong) == 0 {
		fmt.Fprintln(ew, "  the model was right within the tolerance at every dependency")
	} else {
		fmt.Fprintln(ew, "  where the model was wrong:")
		for _, s := range p.Wrong {
			fmt.Fprintf(ew, "  - %s\n", s)
		}
		for _, s := range p.Notes {
			fmt.Fprintf(ew, "  why it may be: %s\n", s)
		}
	}
	fmt.Fprintf(ew, "  assumption: %s\n", p.Assumption)
}

// scaleNote says when the prediction was scaled to the after side's traffic.
func scaleNote(scale float64) string {
	if scale == 1 {
		return ""
	}
	return fmt.Sprintf(" (predictions scaled x%.2f to the after side's traffic)", scale)
}

// expected is the predicted calls, and what they become at the after side's traffic when it differs.
func expected(r diff.WhatIfRow) string {
	s := strconv.Itoa(r.Predicted)
	if r.Expected != float64(r.Predicted) {
		s += " -> " + strconv.FormatFloat(r.Expected, 'f', 1, 64)
	}
	return s
}

// DiffMarkdown writes the comparison as a pull-request comment.
func DiffMarkdown(w io.Writer, r *diff.Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "## stormwatch diff\n\n**%s**\n\n", md(r.Verdict))
	fmt.Fprintf(ew, "- before: %s\n- after: %s\n", md(side(r.Before)), md(side(r.After)))
	if len(r.Regressions) > 0 {
		fmt.Fprintf(ew, "\n### Regressions\n\n")
		for _, s := range r.Regressions {
			fmt.Fprintf(ew, "- %s\n", md(s))
		}
	}
	if len(r.Dependencies) > 0 {
		fmt.Fprintf(ew, "\n### Dependencies\n\n| dependency | caller | calls | intents | amplification | change | layer product |\n|---|---|--:|--:|--:|--:|---|\n")
		for i := range r.Dependencies {
			d := &r.Dependencies[i]
			fmt.Fprintf(ew, "| `%s` | all | %s | %s | %s | %s | %s |\n", d.Dependency, calls(d.Before, d.After), ops(d.Before, d.After),
				amps(d.Before, d.After), md(changeOf(d.Before, d.After, d.Change, d.Worse)), md(layers(d.Before, d.After)))
			for _, c := range d.Callers {
				fmt.Fprintf(ew, "| | %s | %s | %s | %s | %s | |\n", md(orDash(c.Caller)), calls(c.Before, c.After), ops(c.Before, c.After),
					amps(c.Before, c.After), md(changeOf(c.Before, c.After, c.Change, false)))
			}
		}
	}
	costsDiffMarkdown(ew, r)
	if len(r.Findings) > 0 {
		fmt.Fprintf(ew, "\n### Findings: %d resolved, %d new, %d persisting\n\n| state | severity | detector | place | before | after |\n|---|---|---|---|--:|--:|\n",
			r.Counts.Resolved, r.Counts.New, r.Counts.Persisting)
		for _, f := range r.Findings {
			fmt.Fprintf(ew, "| %s | %s | `%s` | %s | %d | %d |\n", f.State, f.Severity, f.Detector, md(f.Place()), f.Before, f.After)
		}
	} else {
		fmt.Fprintf(ew, "\nNo findings on either side.\n")
	}
	if p := r.WhatIf; p != nil {
		fmt.Fprintf(ew, "\n### What if %s\n\nPredicted from before%s, measured after.\n\n| dependency | recorded | predicted | measured | error |\n|---|--:|--:|--:|--:|\n",
			md(strings.Join(p.Changes, ", ")), scaleNote(p.Scale))
		for _, row := range p.Rows {
			fmt.Fprintf(ew, "| `%s` | %d | %s | %d | %s |\n", row.Dependency, row.Recorded, md(expected(row)), row.Measured, md(predictionError(row)))
		}
		if len(p.Wrong) > 0 {
			fmt.Fprintf(ew, "\nWhere the model was wrong:\n\n")
			for _, s := range p.Wrong {
				fmt.Fprintf(ew, "- %s\n", md(s))
			}
			for _, s := range p.Notes {
				fmt.Fprintf(ew, "\nWhy it may be: %s.\n", md(s))
			}
		} else {
			fmt.Fprintf(ew, "\nThe model was right within the tolerance at every dependency.\n")
		}
		fmt.Fprintf(ew, "\n_Assumption: %s._\n", md(p.Assumption))
	}
	return ew.err
}

func side(s diff.Side) string {
	return fmt.Sprintf("%s: %s, %s, %s", s.Label, words.Count(s.Input.Traces, "trace"),
		words.Count(s.Input.Spans, "span"), words.Count(s.Input.Operations, "operation"))
}

// arrow renders "before -> after" with "-" for a missing side.
func arrow(b, a *diff.Figures, f func(*diff.Figures) string) string {
	bs, as := "-", "-"
	if b != nil {
		bs = f(b)
	}
	if a != nil {
		as = f(a)
	}
	return bs + " -> " + as
}

func calls(b, a *diff.Figures) string {
	return arrow(b, a, func(f *diff.Figures) string { return strconv.Itoa(f.PhysicalCalls) })
}

func ops(b, a *diff.Figures) string {
	return arrow(b, a, func(f *diff.Figures) string { return strconv.Itoa(f.LogicalOperations) })
}

func amps(b, a *diff.Figures) string {
	return arrow(b, a, func(f *diff.Figures) string { return fmt.Sprintf("%.2fx", f.Amplification) })
}

// layers is the layer product before -> after, with the retrying layers of the after side (what
// is left to fix) or, when none are left, of the before side.
func layers(b, a *diff.Figures) string {
	if (b == nil || b.LayerProduct == 0) && (a == nil || a.LayerProduct == 0) {
		return "-"
	}
	s := arrow(b, a, func(f *diff.Figures) string {
		if f.LayerProduct == 0 {
			return "none"
		}
		return strconv.Itoa(f.LayerProduct)
	})
	which, f := "after", a
	if a == nil || a.LayerProduct == 0 {
		which, f = "before", b
	}
	// A chain deeper than its finding lists has its two ends listed: the layers between them are
	// counted where they fall, so the chain never reads shorter than it is.
	parts := make([]string, 0, len(f.Layers)+1)
	for i, l := range f.Layers {
		if i == len(f.Layers)/2 && f.LayersNotListed > 0 {
			parts = append(parts, strconv.Itoa(f.LayersNotListed)+" more layers")
		}
		parts = append(parts, l.Service+" x"+strconv.Itoa(l.Attempts))
	}
	return s + " (" + which + ": " + strings.Join(parts, " > ") + ")"
}

// changeOf is the amplification change with an arrow: up is more calls per intent.
func changeOf(b, a *diff.Figures, change float64, worse bool) string {
	switch {
	case b == nil:
		return "new"
	case a == nil:
		return "gone"
	}
	s := fmt.Sprintf("%+.2fx", change)
	switch {
	case change > 0:
		s = "↑ " + s
	case change < 0:
		s = "↓ " + s
	default:
		s = "= " + s
	}
	if worse {
		s += " WORSE"
	}
	return s
}

func predictionError(r diff.WhatIfRow) string {
	s := strconv.FormatFloat(r.Error, 'f', -1, 64)
	if r.Error > 0 {
		s = "+" + s
	}
	if r.Expected > 0 {
		s += fmt.Sprintf(" (%+.0f%%)", 100*r.RelativeError)
	}
	if r.Wrong {
		s += " WRONG"
	}
	return s
}
