package cost_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// Over every recorded fixture (stock spans and the reference client's, real libraries', the
// lab's): each request's parts add up to its duration; a request in which nothing retried or
// hedged has no added latency; and where one operation's retries were the whole story (the only
// one that retried, its tries sequential under one span, nothing else running beside them), the
// added latency is exactly its failed tries plus the pauses between them, and the pauses are the
// backoff the reference client recorded on its attempts.
func TestEveryFixture(t *testing.T) {
	var requests, exact, recorded int
	for _, name := range fixtures.Names() {
		probe := &analyzer.Detector{Name: "probe", Title: "probe", Doc: "checks each trace's costs for the test", Run: func(p *analyzer.Pass) error {
			reqs := cost.Measure(p.Trace, p.Operations, p.RunSettings.Skew())
			retried := 0
			var only *analyzer.Operation
			for _, o := range p.Operations {
				if len(o.Attempts) > 1 || o.PhysicalCalls() > 1 {
					retried++
					only = o
				}
			}
			for _, r := range reqs {
				requests++
				d := r.EndUnixNano - r.StartUnixNano
				if r.Parts.Sum() != d {
					t.Errorf("%s: parts %+v add up to %d, the request took %d", name, r.Parts, r.Parts.Sum(), d)
				}
				if retried == 0 && (r.Parts.Added() != 0 || r.Parts.Hedged != 0) {
					t.Errorf("%s: nothing retried, yet %+v", name, r.Parts)
				}
			}
			if retried != 1 || len(reqs) != 1 || only.PhysicalCalls() != len(only.Attempts) || !alone(p.Trace, only) {
				return nil
			}
			var failed, pauses, backoff int64
			hasBackoff := true
			for i, a := range only.Attempts {
				if a.Kind != analyzer.KindInitial && a.Kind != analyzer.KindRetry || len(a.Calls) != 1 {
					return nil
				}
				if i < len(only.Attempts)-1 {
					failed += a.EndUnixNano - a.StartUnixNano
				}
				if i > 0 {
					pauses += a.StartUnixNano - only.Attempts[i-1].EndUnixNano
					j, _ := p.Trace.Lookup(a.Calls[0])
					if ms, ok := p.Trace.Spans[j].Int(spans.AttrBackoff); ok {
						backoff += ms * 1_000_000
					} else {
						hasBackoff = false
					}
				}
			}
			exact++
			got := reqs[0].Parts
			if diff(got.Failed, failed) > 1_000_000 || diff(got.Paused, pauses) > 1_000_000 {
				t.Errorf("%s: failed %d paused %d on the path, the tries took %d and paused %d", name, got.Failed, got.Paused, failed, pauses)
			}
			if hasBackoff {
				recorded++
				// The client records whole milliseconds: each pause may be up to 1 ms longer.
				if d := got.Paused - backoff; d < 0 || d > int64(len(only.Attempts)-1)*1_000_000 {
					t.Errorf("%s: paused %d on the path, the client recorded %d of backoff", name, got.Paused, backoff)
				}
			}
			return nil
		}}
		detectortest.Feed(t, engine.New(engine.Config{Detectors: []*analyzer.Detector{probe}, MaxSpans: -1}), name)
	}
	t.Logf("%d requests, %d checked against their tries, %d against recorded backoff", requests, exact, recorded)
	if exact < 10 || recorded < 5 {
		t.Errorf("only %d requests checked against their tries and %d against recorded backoff: the check proves little", exact, recorded)
	}
}

// alone: the operation's tries hang from one span that has no other child, under a chain of
// spans up to the root that each have one child - so the request waited for the tries and
// nothing else.
func alone(t *analyzer.Trace, o *analyzer.Operation) bool {
	j, ok := t.Lookup(o.Attempts[0].Calls[0])
	if !ok {
		return false
	}
	p := t.Parent(j)
	if p < 0 || len(t.Children(p)) != len(o.Attempts) {
		return false
	}
	for q := p; t.Parent(q) >= 0; q = t.Parent(q) {
		if len(t.Children(t.Parent(q))) != 1 {
			return false
		}
	}
	return true
}

func diff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}
