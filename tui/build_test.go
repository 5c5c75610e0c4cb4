package tui

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// The builders here make snapshots by hand, deterministic to the nanosecond, so goldens do not move
// when the analyzer's inference is tuned. The fixture tests (fixture_test.go) run real recordings
// through the real analyzer.

// base is the fixed wall-clock origin of every built trace.
var base = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano()

type traceBuilder struct {
	id    spans.TraceID
	next  uint64
	spans []spans.Span
	depth []int
	ops   []*analyzer.Operation
	res   map[string]*spans.Resource
}

func newTraceBuilder(n uint64) *traceBuilder {
	b := &traceBuilder{res: map[string]*spans.Resource{}}
	binary.BigEndian.PutUint64(b.id[8:], n)
	b.id[0] = 0x4b
	b.next = n << 20
	return b
}

func (b *traceBuilder) resource(svc string) *spans.Resource {
	r := b.res[svc]
	if r == nil {
		r = &spans.Resource{ServiceName: svc, ServiceInstance: svc + "-0",
			Attrs: []spans.Attr{spans.StringAttr("deployment.environment.name", "prod")}}
		b.res[svc] = r
	}
	return r
}

func (b *traceBuilder) add(parent spans.SpanID, depth int, svc, name string, kind spans.Kind, start, end int64, attrs ...spans.Attr) spans.SpanID {
	b.next++
	var id spans.SpanID
	binary.BigEndian.PutUint64(id[:], b.next)
	b.spans = append(b.spans, spans.Span{TraceID: b.id, SpanID: id, ParentID: parent, StartUnixNano: start,
		EndUnixNano: end, Kind: kind, Name: name, Resource: b.resource(svc), Attrs: attrs,
		Scope: "github.com/stormwatch/stormwatch/reference"})
	b.depth = append(b.depth, depth)
	return id
}

// layer describes one retrying service on the way to the dependency.
type layer struct {
	svc, target string
}

const (
	leafDur = 100 * time.Millisecond
	backoff = 20 * time.Millisecond
)

// storm adds a retry loop of `attempts` at layers[0] calling down through the rest; the last layer
// calls dep. It returns the end time and the operation.
func (b *traceBuilder) storm(parent spans.SpanID, parentOp *analyzer.Operation, depth int, layers []layer, dep string, attempts int, start, deadline int64) (int64, *analyzer.Operation) {
	l := layers[0]
	target := dep
	if len(layers) > 1 {
		target = layers[1].target
	}
	opStart := start
	opSpanIdx := len(b.spans)
	opSpan := b.add(parent, depth, l.svc, "call "+target, spans.KindInternal, start, 0,
		spans.StringAttr(spans.AttrOpName, l.svc+".read"), spans.StringAttr(spans.AttrOwner, l.svc))
	op := &analyzer.Operation{ID: fmt.Sprintf("%s-op-%d", l.svc, b.next), Name: l.svc + ".read", TraceID: b.id,
		SpanID: opSpan, Caller: l.svc, Owner: l.svc, Dependency: target, Parent: parentOp,
		Terminal: "fail-fast", StopReason: "max_attempts", DeadlineUnixNano: deadline, StartUnixNano: opStart}
	b.ops = append(b.ops, op)
	t := start
	var prev spans.SpanID
	for n := 1; n <= attempts; n++ {
		if n > 1 {
			t += int64(backoff)
		}
		callIdx := len(b.spans)
		attrs := []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, target+"/items/42"),
			spans.IntAttr(spans.AttrHTTPStatus, 503), spans.IntAttr(spans.AttrAttempt, int64(n)),
			spans.StringAttr(spans.AttrOutcome, "retryable")}
		call := b.add(opSpan, depth+1, l.svc, "GET", spans.KindClient, t, 0, attrs...)
		if !prev.IsZero() {
			b.spans[callIdx].Links = []spans.Link{{TraceID: b.id, SpanID: prev}}
		}
		prev = call
		var end int64
		if len(layers) > 1 {
			srv := b.add(call, depth+2, layers[1].svc, "GET /items/{id}", spans.KindServer, t+int64(time.Millisecond), 0)
			srvIdx := len(b.spans) - 1
			var inner int64
			inner, _ = b.storm(srv, op, depth+3, layers[1:], dep, attempts, t+2*int64(time.Millisecond), deadline)
			b.spans[srvIdx].EndUnixNano = inner + int64(time.Millisecond)
			b.spans[srvIdx].Status = spans.StatusError
			end = inner + 2*int64(time.Millisecond)
		} else {
			end = t + int64(leafDur)
		}
		b.spans[callIdx].EndUnixNano = end
		b.spans[callIdx].Status = spans.StatusError
		kind := analyzer.KindRetry
		if n == 1 {
			kind = analyzer.KindInitial
		}
		op.Attempts = append(op.Attempts, analyzer.Attempt{Number: n, Kind: kind, SpanID: call, Calls: []spans.SpanID{call},
			Origins: []string{target}, StartUnixNano: t, EndUnixNano: end, Outcome: "retryable", Status: "503",
			BackoffNanos: map[bool]int64{true: 0, false: int64(backoff)}[n == 1]})
		t = end
	}
	op.EndUnixNano = t
	b.spans[opSpanIdx].EndUnixNano = t
	b.spans[opSpanIdx].Status = spans.StatusError
	return t, op
}

func (b *traceBuilder) view() *engine.TraceView {
	return &engine.TraceView{TraceID: b.id, Spans: b.spans, Depth: b.depth, Operations: b.ops}
}

// stormTrace is the three layers x three attempts = 27 calls to the dependency, under a
// 1 s deadline that the later attempts overrun.
func stormTrace(n uint64) *engine.TraceView {
	b := newTraceBuilder(n)
	root := b.add(spans.SpanID{}, 0, "edge", "GET /checkout", spans.KindServer, base, 0, spans.StringAttr(spans.AttrHTTPRoute, "/checkout"))
	end, _ := b.storm(root, nil, 1, []layer{{"edge", ""}, {"api", "http://api:8080"}, {"adapter", "http://adapter:8080"}},
		"http://dep:8080", 3, base+int64(time.Millisecond), base+int64(time.Second))
	b.spans[0].EndUnixNano = end + int64(time.Millisecond)
	b.spans[0].Status = spans.StatusError
	v := b.view()
	v.Layers = []analyzer.Layer{{Service: "edge", Attempts: 3}, {Service: "api", Attempts: 3}, {Service: "adapter", Attempts: 3}}
	v.LeafDependency = "http://dep:8080"
	var leaf []string
	for i := range v.Spans {
		if v.Spans[i].Kind == spans.KindClient && v.Spans[i].Str(spans.AttrURLFull) == "http://dep:8080/items/42" {
			leaf = append(leaf, v.Spans[i].SpanID.String())
		}
	}
	var late []string
	for _, op := range v.Operations {
		for _, a := range op.Attempts {
			if a.StartUnixNano > op.DeadlineUnixNano {
				late = append(late, a.SpanID.String())
			}
		}
	}
	layers := make([]analyzer.Evidence, len(v.Layers))
	for i, l := range v.Layers {
		layers[i] = analyzer.Evidence{"service": analyzer.Text(l.Service), "attempts": analyzer.Int(l.Attempts)}
	}
	v.Findings = []analyzer.Finding{
		{Detector: "retry-amplification", Severity: analyzer.SeverityCritical, TraceID: v.TraceID.String(), SpanIDs: leaf,
			Service: "edge", Dependency: "http://dep:8080", Summary: "3 layers retried: 27 calls for 1 request",
			Action:   "let one layer own retries (the edge); make api and adapter fail fast",
			Evidence: analyzer.Evidence{"factor": analyzer.Int(27), "leaf_calls": analyzer.Int(27), "layers": analyzer.Records(layers)}},
		{Detector: "post-deadline-work", Severity: analyzer.SeverityWarning, TraceID: v.TraceID.String(), SpanIDs: late,
			Service: "edge", Dependency: "http://api:8080", Summary: fmt.Sprintf("%d attempts started after the 1s deadline", len(late)),
			Action:   "propagate the deadline and stop retrying when the budget is spent",
			Evidence: analyzer.Evidence{"count": analyzer.Int(len(late))}},
	}
	for _, op := range v.Operations {
		for _, a := range op.Attempts {
			for _, s := range leaf {
				if a.SpanID.String() == s {
					op.Findings++
				}
			}
		}
	}
	return v
}

// healthyOps makes n single-attempt operations toward dep in their own small traces.
func healthyOps(first uint64, n int, caller, dep string, status string) []*analyzer.Operation {
	ops := make([]*analyzer.Operation, n)
	for i := range ops {
		var tid spans.TraceID
		binary.BigEndian.PutUint64(tid[8:], first+uint64(i))
		var sid spans.SpanID
		binary.BigEndian.PutUint64(sid[:], first+uint64(i))
		st := base + int64(i)*int64(time.Millisecond)
		lat := int64(5+i%40) * int64(time.Millisecond)
		outcome := "ok"
		if status != "200" {
			outcome = "retryable"
		}
		ops[i] = &analyzer.Operation{ID: fmt.Sprintf("%s-%d", caller, first+uint64(i)), Name: caller + ".get", TraceID: tid,
			SpanID: sid, Caller: caller, Owner: caller, Dependency: dep, Terminal: "complete", StopReason: "succeeded",
			StartUnixNano: st, EndUnixNano: st + lat,
			Attempts: []analyzer.Attempt{{Number: 1, Kind: analyzer.KindInitial, SpanID: sid, Calls: []spans.SpanID{sid},
				Origins: []string{dep}, StartUnixNano: st, EndUnixNano: st + lat, Outcome: outcome, Status: status}}}
	}
	return ops
}

// fakeSnapshot is the storm trace plus healthy traffic to two other dependencies and extraOps more
// operations (for the scale tests).
func fakeSnapshot(extraOps int) *engine.Snapshot {
	storm := stormTrace(1)
	ops := append([]*analyzer.Operation(nil), storm.Operations...)
	ops = append(ops, healthyOps(1000, 40, "web", "http://reviews:8080", "200")...)
	ops = append(ops, healthyOps(2000, 8, "web", "http://pricing:8080", "200")...)
	if extraOps > 0 {
		ops = append(ops, healthyOps(1_000_000, extraOps, "batch", "http://stock:8080", "200")...)
	}
	views := map[spans.TraceID]*engine.TraceView{storm.TraceID: storm}
	deps := []analyzer.DependencyStats{
		{Dependency: "http://dep:8080", Service: "dep", PhysicalCalls: 27, LogicalOperations: 1, Amplification: 27,
			Outcomes: map[string]int{"503": 27}, Callers: []string{"adapter"}},
		{Dependency: "http://adapter:8080", Service: "adapter", PhysicalCalls: 9, LogicalOperations: 1, Amplification: 9,
			Outcomes: map[string]int{"503": 9}, Callers: []string{"api"}},
		{Dependency: "http://api:8080", Service: "api", PhysicalCalls: 3, LogicalOperations: 1, Amplification: 3,
			Outcomes: map[string]int{"503": 3}, Callers: []string{"edge"}},
		{Dependency: "http://pricing:8080", Service: "pricing", PhysicalCalls: 10, LogicalOperations: 8, Amplification: 1.25,
			Outcomes: map[string]int{"200": 8, "503": 2}, Callers: []string{"web"}},
		{Dependency: "http://reviews:8080", Service: "reviews", PhysicalCalls: 40, LogicalOperations: 40, Amplification: 1,
			Outcomes: map[string]int{"200": 40}, Callers: []string{"web"}},
	}
	if extraOps > 0 {
		deps = append(deps, analyzer.DependencyStats{Dependency: "http://stock:8080", PhysicalCalls: extraOps,
			LogicalOperations: extraOps, Amplification: 1, Outcomes: map[string]int{"200": extraOps}, Callers: []string{"batch"}})
	}
	sort.SliceStable(deps, func(i, j int) bool { return deps[i].Amplification > deps[j].Amplification })
	findings := append([]analyzer.Finding(nil), storm.Findings...)
	findings = append(findings, analyzer.Finding{Detector: "no-backoff", Severity: analyzer.SeverityInfo,
		Service: "web", Dependency: "http://pricing:8080", Summary: "2 retries with under 1ms pause",
		Action: "add exponential backoff with full jitter", Evidence: analyzer.Evidence{"retries": analyzer.Int(2)}})
	hist := map[string][]float64{
		"http://dep:8080":     {1, 1, 1, 3, 9, 27, 27, 27, 27, 27},
		"http://adapter:8080": {1, 1, 1, 3, 9, 9, 9, 9, 9, 9},
		"http://api:8080":     {1, 1, 1, 1, 3, 3, 3, 3, 3, 3},
		"http://reviews:8080": {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	spansHeld := len(storm.Spans) + 48 + extraOps
	s := &engine.Snapshot{
		AtUnixNano: base + int64(10*time.Second),
		Report:     analyzer.Report{Version: analyzer.ReportVersion, Dependencies: deps, Findings: findings},
		History:    hist,
		Stats:      engine.StoreStats{SpansHeld: spansHeld, TracesHeld: 49 + extraOps},
		TraceLookup: func(id spans.TraceID) (*engine.TraceView, bool) {
			v, ok := views[id]
			return v, ok
		},
	}
	s.SetOperations(ops)
	return s
}

// bigTrace is a trace of about n spans: many operations, each retried, under one root.
func bigTrace(n int) *engine.TraceView {
	b := newTraceBuilder(99)
	root := b.add(spans.SpanID{}, 0, "edge", "GET /batch", spans.KindServer, base, base+int64(time.Minute))
	t := base
	for len(b.spans) < n {
		end, _ := b.storm(root, nil, 1, []layer{{"edge", ""}, {"api", "http://api:8080"}}, "http://dep:8080", 2, t, 0)
		t = end
	}
	b.spans[0].EndUnixNano = t
	v := b.view()
	v.Layers = []analyzer.Layer{{Service: "edge", Attempts: 2}, {Service: "api", Attempts: 2}}
	v.LeafDependency = "http://dep:8080"
	return v
}
