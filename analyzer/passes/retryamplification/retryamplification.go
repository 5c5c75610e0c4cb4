package retryamplification

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Detector is the retry-amplification detector.
var Detector = &analyzer.Detector{
	Name:     "retry-amplification",
	Title:    "Retries multiplied across layers",
	Doc:      "two or more layers on one root-to-leaf path retried, multiplying the calls that reached the leaf dependency; evidence: factor, leaf_calls, layers",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

// maxSpanIDs bounds the span ids named by one finding: the factor says how many there were.
const maxSpanIDs = 100

func run(pass *analyzer.Pass) error {
	reported := map[string]bool{}
	for _, c := range analyzer.LeafChains(pass.Operations) {
		if reported[c.Dependency] {
			continue
		}
		layers := c.RetryingLayers()
		if len(layers) < pass.Settings.RetryingLayers() {
			continue
		}
		reported[c.Dependency] = true
		sev := analyzer.SeverityWarning
		if c.LeafCalls >= pass.Settings.Critical() {
			sev = analyzer.SeverityCritical
		}
		var ids []string
		for _, op := range c.Leaves {
			for _, a := range op.Attempts {
				for _, id := range a.Calls {
					ids = append(ids, id.String())
				}
			}
		}
		slices.Sort(ids)
		if len(ids) > maxSpanIDs {
			ids = ids[:maxSpanIDs]
		}
		parts := make([]string, len(layers))
		ev := make([]map[string]any, len(layers))
		for i, l := range layers {
			parts[i] = fmt.Sprintf("%s x%d", l.Service, l.Attempts)
			ev[i] = map[string]any{"service": l.Service, "attempts": l.Attempts}
		}
		dep := c.Dependency
		if c.Service != "" && c.Service != dep {
			dep = c.Service + " (" + c.Dependency + ")"
		}
		pass.Report(analyzer.Finding{
			Severity:   sev,
			SpanIDs:    ids,
			Service:    layers[0].Service,
			Dependency: c.Dependency,
			Summary: fmt.Sprintf("%d layers retried (%s): %d calls to %s for 1 request",
				len(layers), strings.Join(parts, ", "), c.LeafCalls, dep),
			Action: fmt.Sprintf("let one layer own retries (%s is nearest the dependency) and make the others fail fast, or share one retry budget across the layers",
				layers[len(layers)-1].Service),
			Evidence: map[string]any{
				"factor":     c.LeafCalls,
				"leaf_calls": c.LeafCalls,
				"layers":     ev,
			},
		})
	}
	return nil
}
