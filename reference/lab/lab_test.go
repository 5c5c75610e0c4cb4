package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func run(t *testing.T, name string) *Result {
	t.Helper()
	res, err := Run(context.Background(), name, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// row finds the row of a variant (and origin, for per-origin tables).
func row(t *testing.T, res *Result, variant, origin string) Row {
	t.Helper()
	for _, r := range res.Rows {
		if r.Variant == variant && r.Origin == origin {
			return r
		}
	}
	t.Fatalf("%s: no row %q/%q in %+v", res.Scenario, variant, origin, res.Rows)
	return Row{}
}

func outcomes(kv ...any) map[string]int {
	m := map[string]int{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(int)
	}
	return m
}

func check(t *testing.T, r Row, saw int, ampl float64, ok int, want map[string]int) {
	t.Helper()
	if r.OriginSaw != saw || r.Amplification != ampl || r.OK != ok || !reflect.DeepEqual(r.Outcomes, want) {
		t.Errorf("%s %s: origin saw %d (%.2fx) ok=%d %v; want %d (%.2fx) ok=%d %v",
			r.Variant, r.Origin, r.OriginSaw, r.Amplification, r.OK, r.Outcomes, saw, ampl, ok, want)
	}
}

// docs/principles.md#retry-cost: 40 clients, a 2 s healthy origin, then a failing one.
func TestRetryCost(t *testing.T) {
	res := run(t, "retry-cost")
	for _, v := range []string{"no retries, total=30s", "retry=3, total=30s"} {
		r := row(t, res, v, "")
		check(t, r, 40, 1.00, 40, outcomes("200", 40))
		if r.SlowestS != 2.00 {
			t.Errorf("%s: slowest caller %.2fs, want 2.00s (the origin's latency)", v, r.SlowestS)
		}
	}
	check(t, row(t, res, "no retries (503)", ""), 40, 1.00, 0, outcomes("503", 40))
	check(t, row(t, res, "retry=3 (503)", ""), 120, 3.00, 0, outcomes("503", 40))
}

// docs/principles.md#retry-cost: retry=3 inside a 1.0 s deadline against the 2 s origin.
func TestDeadline(t *testing.T) {
	res := run(t, "deadline")
	for _, v := range []struct {
		name               string
		completed, stopped int
	}{
		{"retry=3, total=1.0s (a deadline)", 40, 0}, // the origin did all 40 for nobody
		{"with reference.Handler on origin", 0, 40}, // the middleware stopped them
	} {
		r := row(t, res, v.name, "")
		check(t, r, 40, 1.00, 0, outcomes("deadline", 40))
		if r.SlowestS != 1.00 {
			t.Errorf("%s: slowest caller %.2fs, want 1.00s", v.name, r.SlowestS)
		}
		if *r.OriginCompleted != v.completed || *r.OriginStopped != v.stopped {
			t.Errorf("%s: origin completed %d stopped %d, want %d %d", v.name, *r.OriginCompleted, *r.OriginStopped, v.completed, v.stopped)
		}
	}
}

// docs/principles.md#retry-cost: retry=3 with budget_ratio 0.1 against the failing origin.
func TestBudget(t *testing.T) {
	res := run(t, "budget")
	check(t, row(t, res, "retry=3", ""), 120, 3.00, 0, outcomes("503", 40))
	r := row(t, res, "retry=3, budget_ratio=0.1", "")
	check(t, r, 50, 1.25, 0, outcomes("503", 40))
	if r.Refusals.Budget != 40 {
		t.Errorf("budget refused %d, want 40", r.Refusals.Budget)
	}
}

// docs/principles.md#retry-cost: retry=3, budget, breaker(8, 5 s) over two waves through one
// client.
func TestBreakerWaves(t *testing.T) {
	res := run(t, "breaker-waves")
	w1 := row(t, res, "wave 1 through one client", "")
	check(t, w1, 50, 1.25, 0, outcomes("503", 40))
	if w1.SlowestS > 0.10 {
		t.Errorf("wave 1 took %.2fs, want under 0.1s (one jittered pause of at most 0.1s)", w1.SlowestS)
	}
	if w1.SlowestS != 0.09 {
		t.Errorf("wave 1 took %.2fs with the default seed, want the measured 0.09s", w1.SlowestS)
	}
	w2 := row(t, res, "wave 2 through one client", "")
	check(t, w2, 0, 0, 0, outcomes("refused", 40))
	if w2.SlowestS != 0 || w2.Refusals.Breaker != 40 {
		t.Errorf("wave 2: %.2fs, %d refused", w2.SlowestS, w2.Refusals.Breaker)
	}
	fs := row(t, res, "first success after the origin healed", "")
	if fs.FirstSuccessS == nil || *fs.FirstSuccessS < 5.0 || *fs.FirstSuccessS > 5.1 {
		t.Errorf("first success after healing at %v s, want about 5 s (the recovery timeout)", fs.FirstSuccessS)
	}
	if !strings.Contains(strings.Join(res.Lines, "\n"), "the first success after the origin healed: 5.00 s (breaker recovery_timeout is 5 s)") {
		t.Errorf("text:\n%s", strings.Join(res.Lines, "\n"))
	}
}

// docs/principles.md#breakers: one client, three origins, reviews failing, ten rounds, threshold 5.
func TestBreakerKey(t *testing.T) {
	res := run(t, "breaker-key")
	hand, ref := "breaker keyed on the client (hand-rolled)", "breaker keyed on the origin (reference)"
	check(t, row(t, res, hand, "stock"), 5, 0.5, 5, outcomes("200", 5, "refused", 5))
	check(t, row(t, res, hand, "pricing"), 5, 0.5, 5, outcomes("200", 5, "refused", 5))
	check(t, row(t, res, hand, "reviews"), 5, 0.5, 0, outcomes("503", 5, "refused", 5))
	check(t, row(t, res, ref, "stock"), 10, 1, 10, outcomes("200", 10))
	check(t, row(t, res, ref, "pricing"), 10, 1, 10, outcomes("200", 10))
	check(t, row(t, res, ref, "reviews"), 5, 0.5, 0, outcomes("503", 5, "refused", 5))
}

// docs/principles.md#breakers: what trips the breaker (threshold 5, 10 calls each).
func TestBreakerSignals(t *testing.T) {
	res := run(t, "breaker-signals")
	for _, tc := range []struct {
		variant, origin string
		want            map[string]int
	}{
		{"429 Too Many Requests", "rate-limited", outcomes("429", 10)},
		{"503 Service Unavailable", "unavailable", outcomes("503", 5, "refused", 5)},
		{"connection refused", "refused", outcomes("connect error", 5, "refused", 5)},
		{"404 Not Found", "not-found", outcomes("404", 10)},
	} {
		r := row(t, res, tc.variant, tc.origin)
		if !reflect.DeepEqual(r.Outcomes, tc.want) {
			t.Errorf("%s: %v, want %v", tc.variant, r.Outcomes, tc.want)
		}
	}
}

// docs/principles.md#breakers: an origin that fails each call twice, 3 attempts, 10 calls.
func TestBreakerLogical(t *testing.T) {
	res := run(t, "breaker-logical")
	hand := row(t, res, "attempts counted (hand-rolled)", "")
	if hand.OK != 2 || hand.Refusals.Breaker != 8 {
		t.Errorf("hand-rolled: ok=%d refused=%d, want 2 and 8", hand.OK, hand.Refusals.Breaker)
	}
	ref := row(t, res, "logical calls counted (reference)", "")
	if ref.OK != 10 || ref.Refusals.Breaker != 0 || ref.Attempts != 30 || ref.BreakerTransition == nil || *ref.BreakerTransition != 0 {
		t.Errorf("reference: ok=%d refused=%d attempts=%d transitions=%v, want 10 0 30 0", ref.OK, ref.Refusals.Breaker, ref.Attempts, ref.BreakerTransition)
	}
}

// docs/principles.md#breakers: threshold 3, recovery 0.5 s: the probe timeline.
func TestBreakerProbe(t *testing.T) {
	res := run(t, "breaker-probe")
	want := []string{
		" 0.00 s  503",
		" 0.00 s  503",
		" 0.00 s  503",
		" 0.01 s  refused, probe in 0.50s",
		" 0.61 s  200",
		" 0.61 s  200",
	}
	if !reflect.DeepEqual(res.Lines, want) {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(res.Lines, "\n"), strings.Join(want, "\n"))
	}
}

// docs/principles.md#one-budget-one-owner: three layers of retry=3 make 27 calls; one owner makes
// 3.
func TestLayers(t *testing.T) {
	res := run(t, "layers")
	if r := row(t, res, "every layer retries (retry=3 x 3 layers)", ""); r.OriginSaw != 27 || r.Amplification != 27 {
		t.Errorf("every layer: %d calls", r.OriginSaw)
	}
	if r := row(t, res, "retries owned by one layer (edge)", ""); r.OriginSaw != 3 {
		t.Errorf("one owner: %d calls", r.OriginSaw)
	}
}

// The defects of docs/principles.md#intents-and-attempts, each beside its correction.
func TestIntentDefects(t *testing.T) {
	fo := run(t, "fanout")
	if r := row(t, fo, "one attempt to every replica (defect)", ""); r.OriginSaw != 3 {
		t.Errorf("fan-out defect reached %d replicas", r.OriginSaw)
	}
	if r := row(t, fo, "one replica per attempt (reference)", ""); r.OriginSaw != 2 || r.OK != 1 || r.Attempts != 2 {
		t.Errorf("fan-out fix: %d calls, ok %d, %d attempts", r.OriginSaw, r.OK, r.Attempts)
	}

	pd := run(t, "post-deadline")
	bad, good := row(t, pd, "deadline kept local (defect)", ""), row(t, pd, "deadline propagated (reference)", "")
	if *bad.PostDeadlineS != 1.00 || *bad.OriginCompleted != 4 || bad.Detail != "db queries after the caller gave up: 3" {
		t.Errorf("post-deadline defect: %.2fs, %d queries, %s", *bad.PostDeadlineS, *bad.OriginCompleted, bad.Detail)
	}
	if *good.PostDeadlineS != 0 || *good.OriginCompleted != 1 || good.Detail != "db queries after the caller gave up: 0" {
		t.Errorf("post-deadline fix: %.2fs, %d queries, %s", *good.PostDeadlineS, *good.OriginCompleted, good.Detail)
	}

	fb := run(t, "fallback-retry")
	if r := row(t, fb, "fallback calls the dependency again (defect)", ""); r.OriginSaw != 6 {
		t.Errorf("hidden fallback retries: %d calls", r.OriginSaw)
	}
	if r := row(t, fb, "fallback serves the cache (reference)", ""); r.OriginSaw != 3 || r.OK != 1 {
		t.Errorf("cache fallback: %d calls, ok %d", r.OriginSaw, r.OK)
	}

	uw := run(t, "unsafe-write")
	for _, tc := range []struct {
		variant       string
		saw, entities int
		ok            int
	}{
		{"POST retried without a key (defect)", 2, 2, 1},
		{"POST without a key (reference: not retried)", 1, 1, 0},
		{"POST with a generated Idempotency-Key (reference)", 2, 1, 1},
	} {
		r := row(t, uw, tc.variant, "")
		if r.OriginSaw != tc.saw || *r.EntitiesCreated != tc.entities || r.OK != tc.ok {
			t.Errorf("%s: saw %d, %d entities, ok %d; want %d %d %d", tc.variant, r.OriginSaw, *r.EntitiesCreated, r.OK, tc.saw, tc.entities, tc.ok)
		}
	}
}

func TestJSONRows(t *testing.T) {
	res := run(t, "budget")
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines", len(lines))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "variant", "origin_saw", "amplification", "ok", "outcomes", "slowest_s", "refusals"} {
		if _, ok := m[k]; !ok {
			t.Errorf("row lacks %q: %s", k, lines[1])
		}
	}
	if m["scenario"] != "budget" || m["origin_saw"] != 50.0 || m["amplification"] != 1.25 || m["refusals"].(map[string]any)["budget"] != 40.0 {
		t.Errorf("row %s", lines[1])
	}
}

func TestUnknownScenario(t *testing.T) {
	_, err := Run(context.Background(), "nope", Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown lab scenario "nope"`) || !strings.Contains(err.Error(), "retry-cost") {
		t.Fatalf("err %v", err)
	}
}

// TestRecord records a scenario the way the fixture generator does and checks the spans are the
// reference client's, the layers' and the origins', each under its service.
func TestRecord(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	// The in-memory exporter forgets its spans on Shutdown, which Record calls.
	res, err := Record(context.Background(), "layers", keepOpen{exp})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0].OriginSaw != 27 {
		t.Fatalf("recorded run saw %d", res.Rows[0].OriginSaw)
	}
	got := exp.GetSpans()
	services := map[string]int{}
	ops := 0
	for _, s := range got {
		for _, kv := range s.Resource.Attributes() {
			if kv.Key == "service.name" {
				services[kv.Value.AsString()]++
			}
		}
		if !s.StartTime.After(FixtureStart.Add(-1)) {
			t.Fatalf("span %s starts at %v, before the fixture start", s.Name, s.StartTime)
		}
		for _, kv := range s.Attributes {
			if kv.Key == spans.AttrStopReason {
				ops++
			}
		}
	}
	for _, svc := range []string{"user", "edge", "api", "adapter", "dependency"} {
		if services[svc] == 0 {
			t.Errorf("no spans from %s (%v)", svc, services)
		}
	}
	// 1+3+9+27 CLIENT attempts, as many SERVER spans, and one operation per logical call, twice over
	// (both variants), give well over a hundred spans.
	if len(got) < 100 || ops < 10 {
		t.Errorf("%d spans, %d operations", len(got), ops)
	}
}

// TestRealtimeCounts runs quick scenarios on the wall clock: the counts do not depend on the clock.
func TestRealtimeCounts(t *testing.T) {
	res, err := Run(context.Background(), "breaker-signals", Options{Realtime: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, res, "503 Service Unavailable", "unavailable"); !reflect.DeepEqual(r.Outcomes, outcomes("503", 5, "refused", 5)) {
		t.Errorf("wall clock: %v", r.Outcomes)
	}
	res, err = Run(context.Background(), "breaker-logical", Options{Realtime: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, res, "logical calls counted (reference)", ""); r.OK != 10 || r.Attempts != 30 {
		t.Errorf("wall clock: ok %d attempts %d", r.OK, r.Attempts)
	}
}
