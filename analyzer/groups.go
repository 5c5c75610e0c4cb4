package analyzer

import (
	"cmp"
	"slices"
)

// FindingGroup is every finding of one detector at one place: a caller toward a dependency. A
// storm makes the same finding once per request - thousands of identical rows - and the group
// is what a reader acts on: what, where, how often, since when, and a trace to look at.
type FindingGroup struct {
	Detector string `json:"detector"`
	// Severity is the highest of the group's findings.
	Severity   Severity `json:"severity"`
	Caller     string   `json:"caller,omitempty"`
	Dependency string   `json:"dependency,omitempty"`
	Count      int      `json:"count"`
	// FirstUnixNano and LastUnixNano bound the findings' times (0 when none has one).
	FirstUnixNano int64 `json:"first_unix_nano,omitempty"`
	LastUnixNano  int64 `json:"last_unix_nano,omitempty"`
	// TraceIDs are the distinct traces of the group's findings, in report order.
	TraceIDs []string `json:"trace_ids"`
	// Findings are the indexes of the group's findings in the slice it was made from, for
	// readers that show the examples (the first is the example the renderers print).
	Findings []int `json:"-"`
}

// GroupFindings groups fs by detector, caller and dependency: the most severe groups first, then
// the largest, then by name. Every screen and report groups with it, so their counts agree.
func GroupFindings(fs []Finding) []FindingGroup {
	type key struct{ det, caller, dep string }
	index := map[key]int{}
	groups := []FindingGroup{}
	seen := map[key]map[string]bool{}
	for i := range fs {
		f := &fs[i]
		k := key{f.Detector, f.Service, f.Dependency}
		gi, ok := index[k]
		if !ok {
			gi = len(groups)
			index[k] = gi
			groups = append(groups, FindingGroup{Detector: f.Detector, Severity: f.Severity, Caller: f.Service,
				Dependency: f.Dependency, TraceIDs: []string{}})
			seen[k] = map[string]bool{}
		}
		g := &groups[gi]
		g.Count++
		g.Findings = append(g.Findings, i)
		g.Severity = max(g.Severity, f.Severity)
		if t := f.TimeUnixNano; t != 0 {
			if g.FirstUnixNano == 0 || t < g.FirstUnixNano {
				g.FirstUnixNano = t
			}
			g.LastUnixNano = max(g.LastUnixNano, t)
		}
		if f.TraceID != "" && !seen[k][f.TraceID] {
			seen[k][f.TraceID] = true
			g.TraceIDs = append(g.TraceIDs, f.TraceID)
		}
	}
	slices.SortStableFunc(groups, func(a, b FindingGroup) int {
		if c := cmp.Compare(b.Severity, a.Severity); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Detector, b.Detector); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Caller, b.Caller); c != 0 {
			return c
		}
		return cmp.Compare(a.Dependency, b.Dependency)
	})
	return groups
}
