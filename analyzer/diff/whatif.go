package diff

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

// WhatIf is a prediction made from the before side set beside what the after side measured.
type WhatIf struct {
	Changes    []string `json:"changes"`
	Assumption string   `json:"assumption"`
	// Scale is the after side's traffic over the before side's, in traces (root requests): the
	// prediction replays the before side's requests, so it is scaled by it to be compared with
	// what the after side measured. 1 when both sides saw the same requests.
	Scale float64 `json:"scale"`
	// Rows are per dependency, in the prediction's order, then dependencies only the after side
	// called.
	Rows []WhatIfRow `json:"dependencies"`
	// Wrong says, one sentence per dependency, where the model missed by more than the tolerance.
	Wrong []string `json:"wrong,omitempty"`
	// MaxRelativeError is the largest |RelativeError| of a dependency that had a prediction.
	MaxRelativeError float64 `json:"max_relative_error"`
	// Notes name what the model leaves out that can explain the errors of this kind of change.
	Notes []string `json:"notes,omitempty"`
}

// What the model leaves out, per kind of change, when the after side made more calls than it said.
const (
	budgetNote  = "the model spends no reserve: a client whose budget starts with a reserve of retries sends up to that many more per client, and the layers below multiply them"
	breakerNote = "the model keeps an open breaker open: a real one lets a probe through after its recovery time, and counts only what it saw, in the order calls ended"
)

// WhatIfRow is one dependency: recorded before, predicted from it, measured after.
type WhatIfRow struct {
	Dependency string `json:"dependency"`
	Service    string `json:"service,omitempty"`
	// Recorded are the before side's physical calls; Predicted the calls the model gives for the
	// same requests under the changes; Expected is Predicted scaled to the after side's traffic;
	// Measured the after side's physical calls.
	Recorded  int     `json:"recorded"`
	Predicted int     `json:"predicted"`
	Expected  float64 `json:"expected"`
	Measured  int     `json:"measured"`
	// Error is Measured minus Expected, in calls; RelativeError divides it by Expected (0 when
	// nothing was expected).
	Error         float64 `json:"error"`
	RelativeError float64 `json:"relative_error"`
	// Wrong is true when |RelativeError| is beyond the tolerance, or calls were measured where
	// none were expected.
	Wrong bool `json:"wrong"`
}

func checkPrediction(p *whatif.Prediction, before, after *analyzer.Report, tolerance float64) *WhatIf {
	w := &WhatIf{Changes: p.Changes, Assumption: p.Assumption, Scale: 1}
	if before.Input.Traces > 0 && after.Input.Traces > 0 {
		w.Scale = round4(float64(after.Input.Traces) / float64(before.Input.Traces))
	}
	seen := map[string]bool{}
	for _, r := range p.Rows {
		seen[r.Dependency] = true
		row := WhatIfRow{Dependency: r.Dependency, Service: r.Service, Recorded: r.Recorded, Predicted: r.Predicted,
			Expected: round4(float64(r.Predicted) * w.Scale)}
		if a := findDep(after, r.Dependency); a != nil {
			row.Measured = a.PhysicalCalls
			row.Service = cmp.Or(row.Service, a.Service)
		}
		w.add(row, tolerance)
	}
	for _, a := range after.Dependencies {
		if !seen[a.Dependency] {
			w.add(WhatIfRow{Dependency: a.Dependency, Service: a.Service, Measured: a.PhysicalCalls}, tolerance)
		}
	}
	more := false
	for _, r := range w.Rows {
		more = more || r.Wrong && r.Error > 0
	}
	for _, c := range p.Changes {
		switch {
		case !more:
		case strings.Contains(c, "."+policy.FieldRetryBudget+"=") && !slices.Contains(w.Notes, budgetNote):
			w.Notes = append(w.Notes, budgetNote)
		case strings.Contains(c, "."+policy.FieldBreaker+"=") && !slices.Contains(w.Notes, breakerNote):
			w.Notes = append(w.Notes, breakerNote)
		}
	}
	return w
}

func (w *WhatIf) add(row WhatIfRow, tolerance float64) {
	row.Error = round4(float64(row.Measured) - row.Expected)
	if row.Expected > 0 {
		row.RelativeError = round4(row.Error / row.Expected)
		w.MaxRelativeError = max(w.MaxRelativeError, math.Abs(row.RelativeError))
	}
	name := cmp.Or(row.Service, row.Dependency)
	switch {
	case row.Expected == 0 && row.Measured > 0:
		row.Wrong = true
		if row.Recorded == 0 {
			w.Wrong = append(w.Wrong, fmt.Sprintf("%s: %d calls measured, but the before side never called it: the model cannot predict a new dependency", name, row.Measured))
		} else {
			w.Wrong = append(w.Wrong, fmt.Sprintf("%s: no calls predicted, %d measured", name, row.Measured))
		}
	case math.Abs(row.RelativeError) > tolerance+1e-9:
		row.Wrong = true
		how := "more"
		if row.Error < 0 {
			how = "fewer"
		}
		w.Wrong = append(w.Wrong, fmt.Sprintf("%s: %s calls expected, %d measured: %s than the model said (%+.0f%%)",
			name, trimFloat(row.Expected), row.Measured, how, 100*row.RelativeError))
	}
	w.Rows = append(w.Rows, row)
}

func trimFloat(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
