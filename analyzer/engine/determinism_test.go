package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// The analyzer's report must be a function of its input: users gate CI on `stormwatch analyze`'s
// exit code, which follows the findings. Each analyzer hashes with a seed of its own
// (engine.New), and the spans of one input may arrive in any order and any batching; neither
// may show in the report, in a trace's operations (their order, ids and which of them are one
// intent) or in its findings.

// splitIntentTrace is the case that once leaked the seed. Under api's first attempt, api calls
// under resilience.operation.id "order-7" (dep-a, then dep-b: one operation over two origins),
// then calls dep-a once more with no id: two groups of one caller with the same intent (what the
// first call asked of dep-a) but different grouping keys. Under api's retry, one operation
// "order-8" calls dep-a then dep-b again. Whichever of the first attempt's two groups is the
// intent's first occurrence is the one the retry's operation copies: with the id group, dep-b saw
// 2 calls for 1 logical operation; with the id-less one, 2 for 2. That followed the order of the
// groups' hashes, so of the seed.
func splitIntentTrace(trace byte) []spans.Span {
	id7, id8 := spans.StringAttr(spans.AttrOpID, "order-7"), spans.StringAttr(spans.AttrOpID, "order-8")
	return []spans.Span{
		sp(trace, 1, 0, spans.KindServer, "edge", 0, 1000),
		sp(trace, 2, 1, spans.KindClient, "edge", 10, 300, get("http://api:80/order", 503)...),
		sp(trace, 3, 2, spans.KindServer, "api", 11, 299),
		sp(trace, 4, 3, spans.KindClient, "api", 20, 40, append(get("http://dep-a:80/x", 503), id7)...),
		sp(trace, 5, 3, spans.KindClient, "api", 50, 60, append(get("http://dep-b:80/x", 200), id7)...),
		sp(trace, 6, 3, spans.KindClient, "api", 100, 110, get("http://dep-a:80/x", 200)...),
		sp(trace, 7, 1, spans.KindClient, "edge", 400, 700, get("http://api:80/order", 200)...),
		sp(trace, 8, 7, spans.KindServer, "api", 401, 699),
		sp(trace, 9, 8, spans.KindClient, "api", 410, 420, append(get("http://dep-a:80/x", 503), id8)...),
		sp(trace, 10, 8, spans.KindClient, "api", 430, 440, append(get("http://dep-b:80/x", 200), id8)...),
	}
}

// brokenTraces makes n random traces of broken data from rng: random kinds and parents (orphans,
// self-parents, cycles), a few destinations and operation ids shared by many calls, start times on
// a coarse grid (ties between siblings), ends before starts, exact duplicates. A SERVER span
// under a call takes the service the call's host names, as real callees do, so that one origin
// is one service throughout the input.
func brokenTraces(rng *rand.Rand, n int) (ss []spans.Span, ids []spans.TraceID) {
	hosts := []string{"api", "dep", "db"}
	paths := []string{"/x", "/y"}
	statuses := []int{200, 200, 503, 500, 404, 302, 401, 0}
	opIDs := []string{"", "", "", "op-a", "op-b"}
	for k := range n {
		trace := byte(k + 1)
		ids = append(ids, tid(trace))
		size := 3 + rng.IntN(20)
		var made []spans.Span
		// Kinds first, and the host each call calls, so that a SERVER span names the host of
		// its parent call wherever that parent is.
		kinds := make([]spans.Kind, size+1)
		host := make([]string, size+1) // host[i]: the host span i called, "" when not a call
		for id := 1; id <= size; id++ {
			kinds[id] = []spans.Kind{spans.KindServer, spans.KindClient, spans.KindClient, spans.KindClient, spans.KindInternal}[rng.IntN(5)]
			if kinds[id] == spans.KindClient {
				host[id] = hosts[rng.IntN(len(hosts))]
			}
		}
		for id := 1; id <= size; id++ {
			kind := kinds[id]
			parent := 0
			switch r := rng.IntN(10); {
			case id == 1 || r == 0:
			case r == 1:
				parent = 100 + rng.IntN(5) // never arrives: an orphan
			case r == 2:
				parent = 1 + rng.IntN(size) // anywhere: itself or later ones (cycles)
			default:
				parent = 1 + rng.IntN(id-1)
			}
			service := []string{"edge", "api", "adapter"}[rng.IntN(3)]
			if kind == spans.KindServer && parent > 0 && parent <= size && host[parent] != "" {
				service = host[parent]
			}
			start := int64(rng.IntN(12)) * 10
			end := start + int64(rng.IntN(4))*10
			if rng.IntN(12) == 0 {
				end = start - 5
			}
			var attrs []spans.Attr
			if kind == spans.KindClient {
				attrs = get("http://"+host[id]+":80"+paths[rng.IntN(len(paths))], statuses[rng.IntN(len(statuses))])
				if op := opIDs[rng.IntN(len(opIDs))]; op != "" {
					attrs = append(attrs, spans.StringAttr(spans.AttrOpID, op))
					if rng.IntN(2) == 0 {
						attrs = append(attrs, spans.IntAttr(spans.AttrAttempt, int64(1+rng.IntN(3))))
					}
				}
			}
			s := sp(trace, id, parent, kind, service, start, end, attrs...)
			made = append(made, s)
			if rng.IntN(15) == 0 {
				made = append(made, s) // an exact duplicate
			}
		}
		ss = append(ss, made...)
	}
	return ss, ids
}

// analysis is everything the test compares between two runs: the JSON report as `stormwatch
// analyze --format json` writes it, and each trace's view as the TUI gets it, operations in their
// order, with which of them share an intent.
type analysis struct {
	report string
	traces []string
}

// arrivalOrder is the k-th of three ways ss may arrive, in turn: as built, reversed, or shuffled
// by rng and cut into n batches of random sizes (at most len(ss)/div spans each, the rest in one
// last batch). A copy: ss is not changed.
func arrivalOrder(rng *rand.Rand, ss []spans.Span, k, n, div int) (in []spans.Span, batches []int) {
	in = slices.Clone(ss)
	switch k % 3 {
	case 1:
		slices.Reverse(in)
	case 2:
		rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		for range n {
			batches = append(batches, 1+rng.IntN(len(in)/div))
		}
	}
	return in, batches
}

// analyze runs a fresh analyzer (its own seed) over ss fed in batches of the given sizes (the
// last batch takes the rest), offline, and describes the result.
func analyze(t *testing.T, cfg engine.Config, ss []spans.Span, batches []int, ids []spans.TraceID) analysis {
	t.Helper()
	cfg.Detectors = suite.Default()
	a := engine.New(cfg)
	rest := ss
	for _, n := range batches {
		n = min(n, len(rest))
		// The analyzer owns a batch: each gets its own copy of the spans.
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: slices.Clone(rest[:n])}); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if len(rest) > 0 {
		if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: slices.Clone(rest)}); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	var out analysis
	rep := a.Report()
	var b bytes.Buffer
	if err := render.JSON(&b, &rep); err != nil {
		t.Fatal(err)
	}
	out.report = b.String()
	if cfg.ReleaseSpans {
		return out // nothing held to look up
	}
	snap := a.Snapshot(time.Unix(0, t0).Add(time.Hour))
	for _, id := range ids {
		v, ok := snap.Trace(id)
		if !ok {
			out.traces = append(out.traces, id.String()+": not held")
			continue
		}
		out.traces = append(out.traces, describeView(t, v))
	}
	return out
}

// describeView writes a trace view as text: the view's JSON, then each operation's in order with
// its intent class (the position of the first operation with its intent key: the keys are hashes
// seeded per analyzer, which of them are equal is not).
func describeView(t *testing.T, v *engine.TraceView) string {
	t.Helper()
	var b strings.Builder
	c := *v
	c.Operations = nil
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(j)
	var intents []uint64
	for _, op := range v.Operations {
		class := slices.Index(intents, op.IntentKey())
		if class < 0 {
			class = len(intents)
			intents = append(intents, op.IntentKey())
		}
		o, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\nintent %d: %s", class, o)
	}
	return b.String()
}

// requireSame fails with the first difference between two analyses.
func requireSame(t *testing.T, what string, want, got analysis) {
	t.Helper()
	if want.report != got.report {
		t.Fatalf("%s: the JSON report differs:\n%s", what, firstDiff(want.report, got.report))
	}
	for i := range want.traces {
		if want.traces[i] != got.traces[i] {
			t.Fatalf("%s: trace %d differs:\n%s", what, i, firstDiff(want.traces[i], got.traces[i]))
		}
	}
}

// firstDiff shows the first differing line of two texts, with the line before it.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		x, y := "", ""
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			before := ""
			if i > 0 {
				before = la[i-1]
			}
			return fmt.Sprintf("line %d (after %q):\n  first: %s\n  then:  %s", i+1, cut(before), cut(x), cut(y))
		}
	}
	return "(same lines)"
}

// cut shortens a line for a failure message (a trace view's first line holds all its spans).
func cut(s string) string {
	if len(s) > 600 {
		return s[:300] + " ... " + s[len(s)-300:]
	}
	return s
}

// TestSplitIntentIsNumberedFromTheData: the hand-built case, analyzed by sixteen analyzers (each
// with its own seed, so the two groups' hashes compare either way about half the time), gives one
// report and one list of operations. The id group starts first, so it is the intent's first
// occurrence and the retry's operation its copy: dep-b saw 2 calls for 1 logical operation, dep-a
// 3 calls for 2 (the id-less call is an intent of its own).
func TestSplitIntentIsNumberedFromTheData(t *testing.T) {
	ss := splitIntentTrace(1)
	ids := []spans.TraceID{tid(1)}
	first := analyze(t, engine.Config{}, ss, nil, ids)
	for run := range 16 {
		requireSame(t, fmt.Sprintf("analyzer %d", run+2), first, analyze(t, engine.Config{}, ss, nil, ids))
	}
	_, r := run(t, engine.Config{}, ss...)
	want := map[string][2]int{"api": {2, 1}, "dep-a": {3, 2}, "dep-b": {2, 1}}
	for _, d := range r.Dependencies {
		if w := want[d.Dependency]; d.PhysicalCalls != w[0] || d.LogicalOperations != w[1] {
			t.Errorf("%s: %d physical calls for %d logical operations, want %d for %d", d.Dependency, d.PhysicalCalls, d.LogicalOperations, w[0], w[1])
		}
	}
	if len(r.Dependencies) != len(want) {
		t.Errorf("%d dependencies, want %d: %+v", len(r.Dependencies), len(want), r.Dependencies)
	}
}

// TestReportIsTheSameForAnySeedAndArrivalOrder: random broken traces analyzed offline by fresh
// analyzers, the spans fed as generated, reversed, and shuffled into batches of random sizes,
// with spans held and with ReleaseSpans (what `stormwatch analyze` sets): one report, and (held)
// one view of every trace.
func TestReportIsTheSameForAnySeedAndArrivalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 6 {
		ss, ids := brokenTraces(rng, 40)
		for _, cfg := range []engine.Config{{}, {ReleaseSpans: true}} {
			want := analyze(t, cfg, ss, nil, ids)
			for k := range 6 {
				in, batches := arrivalOrder(rng, ss, k, 5, 3)
				requireSame(t, fmt.Sprintf("round %d, release %v, order %d", round, cfg.ReleaseSpans, k), want, analyze(t, cfg, in, batches, ids))
			}
		}
	}
}

// TestGroupsAreTakenInTheOrderTheyBegan: a caller's operations come in the order their first
// calls started, then by span id for calls that started together - for a few groups and for
// many (two ways of sorting them) - whatever the analyzer's seed.
func TestGroupsAreTakenInTheOrderTheyBegan(t *testing.T) {
	for _, n := range []int{2, 5, 16, 17, 60} {
		ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 1000)}
		for k := range n {
			// Starts out of span-id order, many at once; every path its own operation, the
			// odd ones grouped by an operation id (a second call each, after the first).
			start := int64(k*7%5) * 10
			url := fmt.Sprintf("http://dep:80/p%d", k)
			if k%2 == 1 {
				id := spans.StringAttr(spans.AttrOpID, fmt.Sprintf("op-%d", k))
				ss = append(ss, sp(1, 1000+k, 1, spans.KindClient, "api", start+100, start+105, append(get(url, 200), id)...))
				ss = append(ss, sp(1, 10+k, 1, spans.KindClient, "api", start, start+5, append(get(url, 503), id)...))
			} else {
				ss = append(ss, sp(1, 10+k, 1, spans.KindClient, "api", start, start+5, get(url, 200)...))
			}
		}
		// The first call of each operation, in the order expected: by start, then span id.
		var want []spans.SpanID
		for _, s := range ss {
			if s.Kind == spans.KindClient && s.StartUnixNano < t0+100*msec {
				want = append(want, s.SpanID)
			}
		}
		slices.SortFunc(want, func(a, b spans.SpanID) int {
			sa, sb := ss[slices.IndexFunc(ss, func(s spans.Span) bool { return s.SpanID == a })], ss[slices.IndexFunc(ss, func(s spans.Span) bool { return s.SpanID == b })]
			if sa.StartUnixNano != sb.StartUnixNano {
				return int(sa.StartUnixNano - sb.StartUnixNano)
			}
			return bytes.Compare(a[:], b[:])
		})
		for range 4 {
			a, _ := run(t, engine.Config{}, slices.Clone(ss)...)
			v, ok := a.Snapshot(time.Unix(0, t0)).Trace(tid(1))
			if !ok {
				t.Fatal("trace not held")
			}
			var got []spans.SpanID
			for _, op := range v.Operations {
				got = append(got, op.Attempts[0].SpanID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d groups: operations begin with %v, want %v", n, got, want)
			}
		}
	}
}

// TestDependencyServiceIsTheSameInAnyTraceOrder: when one origin is answered by several services
// (a shared host, a load balancer in front of two deployments), each service is a dependency of
// its own with that origin as its address, whichever trace was analyzed first.
func TestDependencyServiceIsTheSameInAnyTraceOrder(t *testing.T) {
	trace := func(n byte, service string) []spans.Span {
		return []spans.Span{
			sp(n, 1, 0, spans.KindServer, "edge", 0, 100),
			sp(n, 2, 1, spans.KindClient, "edge", 10, 50, get("http://shared:80/x", 200)...),
			sp(n, 3, 2, spans.KindServer, service, 11, 49),
		}
	}
	zeta, alpha := trace(1, "zeta"), trace(2, "alpha")
	for _, order := range [][]spans.Span{append(slices.Clone(zeta), alpha...), append(slices.Clone(alpha), zeta...)} {
		_, r := run(t, engine.Config{Detectors: suite.Default()}, order...)
		var got []string
		for _, d := range r.Dependencies {
			if d.PhysicalCalls != 1 || d.Service != d.Dependency || !slices.Equal(d.Origins, []string{"http://shared:80"}) {
				t.Errorf("dependency %+v, want one call to http://shared:80 named by its service", d)
			}
			got = append(got, d.Dependency)
		}
		if !slices.Equal(got, []string{"alpha", "zeta"}) {
			t.Fatalf("dependencies %q, want [alpha zeta] whatever the trace order", got)
		}
	}
}
