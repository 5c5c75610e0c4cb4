package cost_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

const ms = int64(1_000_000)

// t0 is the traces' start: any instant far from zero.
const t0 = int64(1_767_225_600_000_000_000)

// builder makes one trace's spans with times in milliseconds from t0.
type builder struct {
	trace spans.TraceID
	spans []spans.Span
}

func newBuilder(n byte) *builder {
	b := &builder{}
	b.trace[0], b.trace[15] = 0x42, n
	return b
}

func id(n int) spans.SpanID {
	var s spans.SpanID
	binary.BigEndian.PutUint64(s[:], uint64(n+1)<<8|0x11)
	return s
}

// span adds a span under parent (-1 for the root) and returns its index.
func (b *builder) span(parent int, kind spans.Kind, service, name string, from, to float64, attrs ...spans.Attr) int {
	s := spans.Span{TraceID: b.trace, SpanID: id(len(b.spans)), Kind: kind, Name: name,
		StartUnixNano: t0 + int64(from*float64(ms)), EndUnixNano: t0 + int64(to*float64(ms)),
		Resource: &spans.Resource{ServiceName: service}, Attrs: attrs}
	if parent >= 0 {
		s.ParentID = b.spans[parent].SpanID
	}
	b.spans = append(b.spans, s)
	return len(b.spans) - 1
}

// call adds a stock HTTP call from service to callee's url and the callee's SERVER span (0.5 ms
// inside it), and returns the SERVER span.
func (b *builder) call(parent int, from, to string, url string, status int64, start, end float64, attrs ...spans.Attr) int {
	a := append([]spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, url),
		spans.IntAttr(spans.AttrHTTPStatus, status)}, attrs...)
	c := b.span(parent, spans.KindClient, from, "GET", start, end, a...)
	return b.span(c, spans.KindServer, to, "GET /x", start+0.5, end-0.5, spans.IntAttr(spans.AttrHTTPStatus, status))
}

// measured is what the probe saw of one trace.
type measured struct {
	reqs []cost.Request
	path []cost.Segment
	// added is what Trace.AddedLatency says of the trace's last span (-1: nothing).
	added int64
}

// measure analyzes the traces with a probe detector that measures each while its model lives.
func measure(t *testing.T, bs ...*builder) ([]measured, analyzer.Report) {
	t.Helper()
	var got []measured
	probe := &analyzer.Detector{Name: "probe", Title: "probe", Doc: "measures each trace's costs for the test", Run: func(p *analyzer.Pass) error {
		m := measured{reqs: cost.Measure(p.Trace, p.Operations, p.RunSettings.Skew())}
		for _, r := range p.Trace.Roots() {
			if p.Trace.Spans[r].ParentID == (spans.SpanID{}) {
				m.path = cost.CriticalPath(p.Trace, p.Operations, int(r))
			}
		}
		m.added = -1
		if ns, ok := p.Trace.AddedLatency(p.Trace.Len() - 1); ok {
			m.added = ns
		}
		got = append(got, m)
		return nil
	}}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{probe}, MaxSpans: -1})
	for _, b := range bs {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: b.spans}); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	if len(got) != len(bs) {
		t.Fatalf("measured %d traces, want %d", len(got), len(bs))
	}
	return got, a.Report()
}

func wantParts(t *testing.T, r cost.Request, failed, paused, hedged float64) {
	t.Helper()
	p := r.Parts
	if d := r.EndUnixNano - r.StartUnixNano; p.Sum() != d {
		t.Errorf("parts %+v add up to %d ns, the request took %d", p, p.Sum(), d)
	}
	near := func(what string, got int64, want float64) {
		if w := int64(want * float64(ms)); got < w-ms/1000 || got > w+ms/1000 {
			t.Errorf("%s = %.3f ms, want %.3f (parts %+v)", what, float64(got)/float64(ms), want, p)
		}
	}
	near("failed", p.Failed, failed)
	near("paused", p.Paused, paused)
	near("hedged", p.Hedged, hedged)
}

// A stock loop with fixed sleeps: three tries 100 ms each, 100 ms then 200 ms between them.
func stockLoop(n byte, fail bool) *builder {
	b := newBuilder(n)
	root := b.span(-1, spans.KindServer, "web", "GET /page", 0, 620)
	status := int64(503)
	if !fail {
		b.call(root, "web", "catalog", "http://catalog:8080/items/1", 200, 10, 110)
		return b
	}
	b.call(root, "web", "catalog", "http://catalog:8080/items/1", status, 10, 110)
	b.call(root, "web", "catalog", "http://catalog:8080/items/1", status, 210, 310)
	b.call(root, "web", "catalog", "http://catalog:8080/items/1", 200, 510, 610)
	return b
}

func TestStockLoopWithFixedSleeps(t *testing.T) {
	got, rep := measure(t, stockLoop(1, true))
	if len(got[0].reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(got[0].reqs))
	}
	r := got[0].reqs[0]
	wantParts(t, r, 200, 300, 0)
	if r.Service != "web" || r.Name != "GET /page" {
		t.Errorf("entry point = %q %q, want web GET /page", r.Service, r.Name)
	}
	if got[0].added != r.Parts.Added() {
		t.Errorf("AddedLatency = %d, want the request's %d", got[0].added, r.Parts.Added())
	}
	if len(r.Deps) != 1 || r.Deps[0].Calls != 3 || r.Deps[0].Extra != 2 || r.Deps[0].Added != 500*ms {
		t.Errorf("deps = %+v, want catalog with 3 calls, 2 extra, 500 ms added", r.Deps)
	}
	// The report: one entry point, one dependency, 500 ms added, 2 extra calls.
	if len(rep.Costs) != 2 {
		t.Fatalf("costs = %+v, want an entry point and a dependency", rep.Costs)
	}
	e := rep.Costs[0]
	if e.Kind != analyzer.CostEntryPoint || e.AddedLatencyMs.Total != 500 || e.AddedLatencyMs.P50 != 500 || e.ExtraCalls != 2 || e.Requests != 1 {
		t.Errorf("entry point = %+v", e)
	}
	if e.Sampling != analyzer.SamplingUnknown {
		t.Errorf("sampling = %q, want unknown: the spans do not say", e.Sampling)
	}
	if d := rep.Costs[1]; d.Dependency != "catalog" || d.AddedLatencyMs.Total != 500 || d.ExtraCalls != 2 {
		t.Errorf("dependency = %+v", d)
	}
}

func TestHealthyTwinAddsNothing(t *testing.T) {
	got, rep := measure(t, stockLoop(2, false))
	wantParts(t, got[0].reqs[0], 0, 0, 0)
	for _, e := range rep.Costs {
		if e.AddedLatencyMs != (analyzer.LatencySummary{}) || e.ExtraCalls != 0 || e.RetryShare != 0 {
			t.Errorf("healthy request costs %+v", e)
		}
	}
}

// The reference client: an INTERNAL span per operation, attempts under it with resilience.*
// attributes, the backoff recorded.
func TestReferenceClientAttempts(t *testing.T) {
	b := newBuilder(3)
	root := b.span(-1, spans.KindServer, "edge", "GET /items/{id}", 0, 400)
	op := b.span(root, spans.KindInternal, "edge", "catalog.read", 5, 395,
		spans.StringAttr(spans.AttrOpID, "op-1"), spans.StringAttr(spans.AttrOpName, "catalog.read"))
	attempt := func(n int64, kind, outcome string, status int64, backoff int64, from, to float64) {
		b.call(op, "edge", "catalog", "http://catalog:8080/items/1", status, from, to,
			spans.StringAttr(spans.AttrOpID, "op-1"), spans.IntAttr(spans.AttrAttempt, n),
			spans.StringAttr(spans.AttrAttemptKind, kind), spans.StringAttr(spans.AttrOutcome, outcome),
			spans.IntAttr(spans.AttrBackoff, backoff))
	}
	attempt(1, "initial", "retryable", 503, 0, 5, 55)  // 50 ms failed
	attempt(2, "retry", "retryable", 503, 40, 95, 175) // 40 ms pause, 80 ms failed
	attempt(3, "retry", "ok", 200, 120, 295, 390)      // 120 ms pause
	got, _ := measure(t, b)
	wantParts(t, got[0].reqs[0], 130, 160, 0)
	// The path shows the pauses on the operation's span and the failed attempts' calls.
	var pauses, failed int
	for _, s := range got[0].path {
		switch s.Part {
		case cost.PartPause:
			pauses++
			if s.Span != int32(op) { // the model sorts spans by id, made here in order
				t.Errorf("a pause is charged to span %d, want the operation's span %d", s.Span, op)
			}
		case cost.PartFailed:
			failed++
		}
	}
	if pauses != 2 || failed < 2 {
		t.Errorf("path has %d pause and %d failed segments, want 2 and at least 2: %+v", pauses, failed, got[0].path)
	}
}

// Layered retries: edge tries api twice, api tries db twice inside each of edge's tries. The
// first edge try fails whole (its time is failed, the api retries inside it included); in the
// second, api's first try fails and its pause shows.
func TestLayeredRetries(t *testing.T) {
	b := newBuilder(4)
	root := b.span(-1, spans.KindServer, "edge", "GET /a", 0, 1000)
	s1 := b.call(root, "edge", "api", "http://api:8080/a", 503, 10, 310)
	b.call(s1, "api", "db", "http://db:5432/q", 503, 20, 120)
	b.call(s1, "api", "db", "http://db:5432/q", 503, 170, 270)
	// edge pauses 90 ms (310 -> 400)
	s2 := b.call(root, "edge", "api", "http://api:8080/a", 200, 400, 900)
	b.call(s2, "api", "db", "http://db:5432/q", 503, 410, 510)
	// api pauses 100 ms (510 -> 610)
	b.call(s2, "api", "db", "http://db:5432/q", 200, 610, 880)
	got, _ := measure(t, b)
	r := got[0].reqs[0]
	// failed: edge's first try 300 ms + api's first db try in the second 100 ms; paused: 90 + 100.
	wantParts(t, r, 400, 190, 0)
	byDep := map[string]cost.Dep{}
	for _, d := range r.Deps {
		byDep[d.Dependency] = d
	}
	if d := byDep["api"]; d.Added != 390*ms || d.Extra != 1 {
		t.Errorf("api = %+v, want 390 ms added (its failed try and pause), 1 extra call", d)
	}
	if d := byDep["db"]; d.Added != 200*ms || d.Calls != 4 || d.Extra != 3 {
		t.Errorf("db = %+v, want 200 ms added, 4 calls of which 3 extra (2 copies of edge's retry, 1 retry)", d)
	}
}

// Among concurrent children, the path goes through the one that ends last, then back through
// the one that ended last before it started; a child that starts before its parent on a skewed
// clock counts only within it.
func TestPathThroughConcurrentChildren(t *testing.T) {
	b := newBuilder(5)
	root := b.span(-1, spans.KindServer, "web", "GET /b", 0, 500)
	long := b.span(root, spans.KindInternal, "web", "long", 100, 450)
	b.span(root, spans.KindInternal, "web", "short", 150, 300) // inside long's time: off the path
	b.span(root, spans.KindInternal, "web", "early", 20, 90)
	b.span(long, spans.KindInternal, "web", "skewed", 90, 200) // starts before its parent
	got, _ := measure(t, b)
	wantParts(t, got[0].reqs[0], 0, 0, 0)
	on := map[string]int64{}
	for _, s := range got[0].path {
		on[b.spans[s.Span].Name] += s.To - s.From // the model sorts spans by id, made here in order
	}
	if on["short"] != 0 {
		t.Errorf("short is on the path: %v", on)
	}
	if on["long"]+on["skewed"] != 350*ms || on["early"] != 70*ms || on["skewed"] != 100*ms {
		t.Errorf("time on the path by span = %v, want long+skewed 350 ms (skewed clipped to 100), early 70", on)
	}
}

// A hedge that won: the copy it beat is on the path (it ended last) and counts as hedge time.
func TestHedgeLosingCopy(t *testing.T) {
	b := newBuilder(6)
	root := b.span(-1, spans.KindServer, "web", "GET /h", 0, 220)
	op := b.span(root, spans.KindInternal, "web", "read", 0, 215, spans.StringAttr(spans.AttrOpID, "h-1"))
	hedge := func(n int64, kind, outcome string, status int64, from, to float64) {
		b.call(op, "web", "store", "http://store:8080/k", status, from, to,
			spans.StringAttr(spans.AttrOpID, "h-1"), spans.IntAttr(spans.AttrAttempt, n),
			spans.StringAttr(spans.AttrAttemptKind, kind), spans.StringAttr(spans.AttrOutcome, outcome))
	}
	hedge(1, "initial", "cancelled", 0, 10, 212)
	hedge(2, "hedge", "ok", 200, 60, 200)
	got, rep := measure(t, b)
	r := got[0].reqs[0]
	wantParts(t, r, 0, 0, 202)
	if r.Parts.Added() != 0 {
		t.Errorf("a hedge adds no retry latency, got %d", r.Parts.Added())
	}
	if rep.Costs[0].HedgeMs != 202 {
		t.Errorf("entry hedge_ms = %v, want 202", rep.Costs[0].HedgeMs)
	}
}

// Late work: the callee went on 150 ms after the caller's CLIENT span ended.
func TestWorkAfterGiveUp(t *testing.T) {
	b := newBuilder(7)
	root := b.span(-1, spans.KindServer, "web", "GET /slow", 0, 120)
	c := b.span(root, spans.KindClient, "web", "GET", 10, 110, spans.StringAttr(spans.AttrHTTPMethod, "GET"),
		spans.StringAttr(spans.AttrURLFull, "http://slow:8080/x"), spans.StringAttr(spans.AttrErrorType, "timeout"))
	b.span(c, spans.KindServer, "slow", "GET /x", 12, 260)
	got, rep := measure(t, b)
	if d := got[0].reqs[0].Deps; len(d) != 1 || d[0].LateNanos != 150*ms {
		t.Fatalf("deps = %+v, want 150 ms of late work at slow", d)
	}
	if rep.Costs[0].LateWorkSeconds != 0.15 {
		t.Errorf("entry late work = %v s, want 0.15", rep.Costs[0].LateWorkSeconds)
	}
	wantParts(t, got[0].reqs[0], 0, 0, 0)
}

func TestThresholdProbability(t *testing.T) {
	for _, c := range []struct {
		ts   string
		p    float64
		good bool
	}{
		{"ot=th:0", 1, true},
		{"ot=th:8", 0.5, true},
		{"ot=th:c", 0.25, true},
		{"ot=th:e6666666666666", 0.1, true}, // 10%, rounded as the spec's examples write it
		{"vendor=x,ot=rv:0123456789abcd;th:e668", 0.1, true},
		{"ot=th:", 0, false},
		{"ot=th:123456789abcdef", 0, false}, // 15 digits
		{"ot=th:zz", 0, false},
		{"ot=th:C", 0, false}, // upper case is not the spec's
		{"other=th:8", 0, false},
	} {
		p, ok := cost.ThresholdProbability(c.ts)
		if ok != c.good || (ok && (p < c.p-1e-4 || p > c.p+1e-4)) {
			t.Errorf("ThresholdProbability(%q) = %v, %v; want %v, %v", c.ts, p, ok, c.p, c.good)
		}
	}
}

// Sampled requests count for all they stand for: a request kept with probability 0.1 counts as
// ten in the rates, once, however many services recorded it.
func TestSampledRatesScale(t *testing.T) {
	b := stockLoop(8, true)
	for i := range b.spans {
		b.spans[i].Attrs = append(b.spans[i].Attrs, spans.StringAttr(spans.AttrTraceState, "ot=th:e6666666666666"))
	}
	plain := stockLoop(9, true)
	_, rep := measure(t, b)
	_, repPlain := measure(t, plain)
	e, ep := rep.Costs[0], repPlain.Costs[0]
	if e.Sampling != analyzer.SamplingKnown {
		t.Errorf("sampling = %q, want %q", e.Sampling, analyzer.SamplingKnown)
	}
	if e.Requests != 1 || e.ExtraCalls != 2 {
		t.Errorf("recorded figures must stay as recorded: %+v", e)
	}
	if r := e.ExtraCallsPerSecond / ep.ExtraCallsPerSecond; r < 9.99 || r > 10.01 {
		t.Errorf("extra calls per second %v vs unsampled %v: want 10 times", e.ExtraCallsPerSecond, ep.ExtraCallsPerSecond)
	}
	// Jaeger's tags say the same.
	j := stockLoop(10, true)
	j.spans[0].Attrs = append(j.spans[0].Attrs, spans.StringAttr(spans.AttrJaegerSamplerType, "probabilistic"),
		spans.StringAttr(spans.AttrJaegerSamplerParam, "0.1"))
	got, _ := measure(t, j)
	if p := got[0].reqs[0].Probability; p != 0.1 {
		t.Errorf("probability from Jaeger's tags = %v, want 0.1", p)
	}
}

// A trace read from Jaeger JSON keeps the sampler's tags on its root span, so a request Jaeger's
// probabilistic sampler kept at 10% counts as ten.
func TestJaegerSamplerTagsSurviveTheReader(t *testing.T) {
	b := stockLoop(11, true)
	b.spans[0].Attrs = append(b.spans[0].Attrs, spans.StringAttr(spans.AttrJaegerSamplerType, "probabilistic"),
		spans.DoubleAttr(spans.AttrJaegerSamplerParam, 0.1))
	batches, _, err := tracefile.DecodeJaegerJSON(foreigntest.Jaeger(b.spans), spans.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var read []spans.Span
	for _, bt := range batches {
		read = append(read, bt.Spans...)
	}
	got, _ := measure(t, &builder{spans: read})
	if p := got[0].reqs[0].Probability; p != 0.1 {
		t.Errorf("probability after the Jaeger reader = %v, want 0.1", p)
	}
}

// Every span of a trace answers its own request's added latency, found without a walk up to its
// root: in a trace of two requests, the spans of the one that retried say its 500 ms, the others'
// 0, and the spans under an orphan (no request) say nothing.
func TestAddedLatencyIsEachSpansOwnRequests(t *testing.T) {
	b := stockLoop(1, true)
	clean := b.span(-1, spans.KindServer, "web", "GET /other", 700, 800)
	b.call(clean, "web", "catalog", "http://catalog:8080/items/2", 200, 710, 790)
	orphan := b.span(-1, spans.KindServer, "catalog", "GET /x", 900, 950)
	b.spans[orphan].ParentID = id(1000)
	b.call(orphan, "catalog", "db", "http://db:5432/q", 200, 910, 940)
	var got map[string]int64 // by span name and start, -1 for nothing
	probe := &analyzer.Detector{Name: "probe", Title: "probe", Doc: "reads every span's added latency", Run: func(p *analyzer.Pass) error {
		got = map[string]int64{}
		for i := range p.Trace.Len() {
			ns, ok := p.Trace.AddedLatency(i)
			if !ok {
				ns = -1
			}
			s := &p.Trace.Spans[i]
			got[fmt.Sprintf("%s %s @%d", s.Service(), s.Name, (s.StartUnixNano-t0)/ms)] = ns
		}
		return nil
	}}
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{probe}, MaxSpans: -1})
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: b.spans}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	want := map[string]int64{
		"web GET /page @0": 500 * ms, "web GET @10": 500 * ms, "catalog GET /x @10": 500 * ms,
		"web GET @210": 500 * ms, "catalog GET /x @210": 500 * ms, "web GET @510": 500 * ms, "catalog GET /x @510": 500 * ms,
		"web GET /other @700": 0, "web GET @710": 0, "catalog GET /x @710": 0,
		"catalog GET /x @900": -1, "catalog GET @910": -1, "db GET /x @910": -1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("added latency by span = %v, want %v", got, want)
	}
}
