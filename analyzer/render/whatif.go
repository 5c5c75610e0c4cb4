package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
	"github.com/stormwatch/stormwatch/internal/words"
)

// WriteWithWhatIf renders the report followed by a what-if prediction: text and markdown append
// a "What if" section; JSON adds a "what_if" key beside the report's own (adding a key keeps the
// contract's version).
func WriteWithWhatIf(w io.Writer, f Format, r *analyzer.Report, p *whatif.Prediction) error {
	if f == FormatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		// The embedded report's fields are promoted, so the document is the report plus what_if.
		doc := struct {
			*analyzer.Report
			WhatIf *whatif.Prediction `json:"what_if"`
		}{r, p}
		if err := enc.Encode(doc); err != nil {
			return fmt.Errorf("write json report: %w", err)
		}
		return nil
	}
	if err := Write(w, f, r); err != nil {
		return err
	}
	if f == FormatMarkdown {
		return WhatIfMarkdown(w, p)
	}
	return WhatIfText(w, p)
}

// WhatIfText is the recorded-vs-predicted table, one line per dependency.
func WhatIfText(w io.Writer, p *whatif.Prediction) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "\nWhat if %s (%s replayed):\n", strings.Join(p.Changes, ", "), words.Count(p.Operations, "operation"))
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  dependency\tservice\trecorded\tpredicted\tchange\t")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t\n", r.Dependency, orDash(r.Service), r.Recorded, r.Predicted, change(r))
	}
	tw.Flush()
	fmt.Fprintf(ew, "  assumption: %s\n", p.Assumption)
	return ew.err
}

// WhatIfMarkdown is the same table for a CI job summary.
func WhatIfMarkdown(w io.Writer, p *whatif.Prediction) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "\n### What if %s\n\n", md(strings.Join(p.Changes, ", ")))
	fmt.Fprintln(ew, "| dependency | service | recorded | predicted | change |")
	fmt.Fprintln(ew, "|---|---|--:|--:|--:|")
	for _, r := range p.Rows {
		fmt.Fprintf(ew, "| %s | %s | %d | %d | %s |\n", md(r.Dependency), md(orDash(r.Service)), r.Recorded, r.Predicted, change(r))
	}
	fmt.Fprintf(ew, "\n_Assumption: %s._\n", md(p.Assumption))
	return ew.err
}

func change(r whatif.Row) string {
	if r.Recorded == 0 {
		if r.Predicted == 0 {
			return "0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.0f%%", 100*float64(r.Predicted-r.Recorded)/float64(r.Recorded))
}
