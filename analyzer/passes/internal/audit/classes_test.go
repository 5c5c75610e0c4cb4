package audit_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// The route Classes reads for a span is the one a walk up to the nearest SERVER span finds: over
// every fixture's traces, for every span, asked leaf first and root first alike (each answer is
// found from answers made before it).
func TestClassesRouteIsTheWalkUp(t *testing.T) {
	p, err := policy.Parse("routes.yaml", []byte("classes:\n  - name: any\n    match:\n      route: \"/*\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(tr *analyzer.Trace, i int) string {
		for ; i >= 0; i = tr.Parent(i) {
			if s := &tr.Spans[i]; s.Kind == spans.KindServer {
				if r := s.Str(spans.AttrHTTPRoute); r != "" {
					return r
				}
				return s.Str(spans.AttrRPCMethod)
			}
		}
		return ""
	}
	routed := 0
	keep := &analyzer.Detector{Name: "keep", Title: "t", Doc: "compares Classes' routes with a walk up", Run: func(pass *analyzer.Pass) error {
		tr := pass.Trace
		down, up := audit.ClassesIn(p, tr), audit.ClassesIn(p, tr)
		for i := range tr.Len() {
			want := walk(tr, i)
			if got := down.Route(tr.Spans[i].SpanID); got != want {
				t.Errorf("trace %s, span %d asked in order: route %q, the walk up %q", tr.ID, i, got, want)
			}
			j := tr.Len() - 1 - i
			if got, want := up.Route(tr.Spans[j].SpanID), walk(tr, j); got != want {
				t.Errorf("trace %s, span %d asked in reverse: route %q, the walk up %q", tr.ID, j, got, want)
			}
			if want != "" {
				routed++
			}
		}
		return nil
	}}
	for _, n := range fixtures.Names() {
		detectortest.Feed(t, engine.New(engine.Config{Detectors: []*analyzer.Detector{keep}, MaxSpans: -1}), n)
	}
	if routed == 0 {
		t.Error("no span had a route: the comparison proves nothing")
	}
}
