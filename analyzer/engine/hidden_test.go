package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// Three SERVER spans under one CLIENT span, on three instances whose clocks disagree: the callee
// received three calls, a hop nobody traces sent them, and Envoy's attempt numbers - not the
// skewed starts - order them. Pauses between them are not measured, so no-backoff stays silent.
func TestUntracedHopCountsCalleeSpansInEnvoyOrder(t *testing.T) {
	envoy := func(n string) spans.Attr {
		return spans.Attr{Key: spans.AttrReqHeaderEnvoyAttempt, Str: `["` + n + `"]`, Type: spans.ValueOther}
	}
	a, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 90, get("http://mesh:15001/x", 200)...),
		// Attempt 3 looks earliest (its clock runs 60 ms behind), attempt 1 latest.
		onInstance(sp(1, 3, 2, spans.KindServer, "dep", 50, 52, server(503, envoy("1"))...), "dep-a"),
		onInstance(sp(1, 4, 2, spans.KindServer, "dep", 30, 32, server(503, envoy("2"))...), "dep-b"),
		onInstance(sp(1, 5, 2, spans.KindServer, "dep", 10, 12, server(200, envoy("3"))...), "dep-c"),
	)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 3 || d.LogicalOperations != 1 || d.Service != "dep" {
		t.Fatalf("dependency = %+v, want dep saw 3 for 1 (the CLIENT span is not counted again)", d)
	}
	var hop *analyzer.Operation
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Owner == "(untraced, between api and dep)" {
			hop = op
		}
	}
	if hop == nil || hop.Tries() != 3 {
		t.Fatalf("no untraced hop of 3 tries: %+v", hop)
	}
	if got := hop.Attempts[2].Status; got != "200" {
		t.Errorf("last attempt by Envoy's number answered %s, want 200 (ordered by start it would be 503)", got)
	}
	for _, at := range hop.Attempts[1:] {
		if at.BackoffNanos != -1 {
			t.Errorf("a pause across instances' clocks was measured: %d", at.BackoffNanos)
		}
	}
	if len(findingsOf(r, "no-backoff")) != 0 || len(findingsOf(r, "retry-amplification")) != 0 {
		t.Errorf("one untraced retrying layer alone must not be reported: %+v", r.Findings)
	}
	if !hasNote(r, "counted from the callee's SERVER spans") {
		t.Errorf("no note says where the calls were counted from: %q", r.Notes)
	}
}

// A proxy's own span without a traced callee names the callee from upstream_cluster.
func TestUpstreamClusterNamesTheCallee(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 9, append(get("http://10.0.0.7:8080/x", 200),
			spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "inventory"))...),
	)
	if d := depStats(t, r, "inventory"); d.Service != "inventory" {
		t.Errorf("service = %q, want inventory", d.Service)
	}
}

// A CLIENT span that ends when its body is closed - after the next attempt began - is not a
// hedge: the callee's SERVER span says when the answer came.
func TestLateBodyCloseIsNotAHedge(t *testing.T) {
	a, _ := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 200),
		sp(1, 2, 1, spans.KindClient, "api", 1, 60, get("http://dep:80/x", 503)...), // closed at 60
		sp(1, 3, 2, spans.KindServer, "dep", 2, 5, server(503)...),                  // answered at ~5
		sp(1, 4, 1, spans.KindClient, "api", 30, 40, get("http://dep:80/x", 200)...),
		sp(1, 5, 4, spans.KindServer, "dep", 31, 35, server(200)...),
	)
	op := onlyOp(t, a)
	if op.Tries() != 2 || op.Attempts[1].Kind != analyzer.KindRetry {
		t.Fatalf("attempts = %+v, want an initial attempt and a retry", op.Attempts)
	}
	if b := op.Attempts[1].BackoffNanos; b < 20*msec || b > 30*msec {
		t.Errorf("pause = %d ns, want about 25 ms (from the answer, not the body's close)", b)
	}
}

// Whole-millisecond timestamps make back-to-back attempts overlap by under a millisecond: still
// sequential retries, not hedges.
func TestSubMillisecondOverlapIsSequential(t *testing.T) {
	s := func(id int, start, end int64, status int) spans.Span {
		x := sp(1, id, 1, spans.KindClient, "web", 0, 0, get("http://dep:80/x", status)...)
		x.StartUnixNano, x.EndUnixNano = t0+start, t0+end
		return x
	}
	a, _ := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "web", 0, 100),
		s(2, 1*msec, 10*msec+400_000, 503),
		s(3, 10*msec, 20*msec, 503), // starts 0.4 ms before the last one "ended"
		s(4, 30*msec, 40*msec, 200),
	)
	if op := onlyOp(t, a); op.Tries() != 3 {
		t.Errorf("tries = %d (%+v), want 3", op.Tries(), op.Attempts)
	}
}

// An application loop whose first try succeeds is not a loop: four INTERNAL spans of one name
// after successes are four intents.
func TestSuccessfulTriesAreNotAnApplicationLoop(t *testing.T) {
	var ss []spans.Span
	ss = append(ss, sp(1, 1, 0, spans.KindServer, "api", 0, 100))
	for k := range 4 {
		start := int64(1 + 20*k)
		ss = append(ss, sp(1, 10+k, 1, spans.KindInternal, "api", start, start+10))
		ss = append(ss, sp(1, 20+k, 10+k, spans.KindClient, "api", start+1, start+9, get("http://dep:80/x", 200)...))
	}
	_, r := run(t, engine.Config{}, ss...)
	if d := depStats(t, r, "dep"); d.PhysicalCalls != 4 || d.LogicalOperations != 4 {
		t.Errorf("dependency = %+v, want 4 calls for 4 operations", d)
	}
	if hasNote(r, "application retry loops") {
		t.Errorf("successful tries were read as a loop: %q", r.Notes)
	}
}

// Two services answer behind one origin (a proxy in front of both): each is a dependency of its
// own, the origin their shared address.
func TestEveryServiceBehindAnOriginIsNamed(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 9, get("http://gateway:80/reviews", 200)...),
		sp(1, 3, 2, spans.KindServer, "reviews", 2, 8, server(200)...),
		sp(1, 4, 1, spans.KindClient, "api", 11, 19, get("http://gateway:80/ratings", 200)...),
		sp(1, 5, 4, spans.KindServer, "ratings", 12, 18, server(200)...),
	)
	for _, name := range []string{"ratings", "reviews"} {
		d := depStats(t, r, name)
		if d.Service != name || d.PhysicalCalls != 1 || !slices.Equal(d.Origins, []string{"http://gateway:80"}) {
			t.Errorf("%s: %+v, want one call at http://gateway:80", name, d)
		}
	}
}

// Two instrumentations at two levels - a high-level client span with the library's own attempt
// spans under it, each answered by the callee - are one request per attempt span, not one more
// for the wrapper.
func TestWrapperClientSpanIsNotAPhysicalCall(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 90, get("http://dep:80/x", 200)...), // requests' span
		sp(1, 3, 2, spans.KindClient, "api", 2, 10, get("http://dep:80/x", 503)...), // urllib3's attempts
		sp(1, 4, 3, spans.KindServer, "dep", 3, 9, server(503)...),
		sp(1, 5, 2, spans.KindClient, "api", 20, 30, get("http://dep:80/x", 503)...),
		sp(1, 6, 5, spans.KindServer, "dep", 21, 29, server(503)...),
		sp(1, 7, 2, spans.KindClient, "api", 40, 50, get("http://dep:80/x", 200)...),
		sp(1, 8, 7, spans.KindServer, "dep", 41, 49, server(200)...),
	)
	if d := depStats(t, r, "dep"); d.PhysicalCalls != 3 || d.LogicalOperations != 1 {
		t.Errorf("dependency = %+v, want 3 calls for 1 intent (the wrapper span is no request of its own)", d)
	}
}

// Healthy shapes the rules must leave alone: two server instrumentations in one process, a
// batch of different items, back-to-back reads of two replicas, a database call that happens to
// be open when an orphan starts.
func TestHealthyShapesStayHealthy(t *testing.T) {
	us := func(s spans.Span, start, end int64) spans.Span {
		s.StartUnixNano, s.EndUnixNano = t0+start*1000, t0+end*1000
		return s
	}
	batch := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 100)}
	for n := range 3 {
		st := int64(1 + 20*n)
		in := named(sp(1, 10+n, 1, spans.KindInternal, "api", st, st+15), "process-item")
		status := 200
		if n == 0 {
			status = 404
		}
		batch = append(batch, in, sp(1, 20+n, 10+n, spans.KindClient, "api", st+1, st+10,
			get("http://dep:80/items/"+string(rune('0'+n)), status)...))
	}
	for _, tc := range []struct {
		name  string
		ss    []spans.Span
		dep   string
		calls int
		ops   int
	}{
		{"two SERVER spans of one process for one request", []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			sp(1, 2, 1, spans.KindClient, "api", 1, 90, get("http://dep:80/x", 200)...),
			sp(1, 3, 2, spans.KindServer, "dep", 2, 80, server(200)...),
			sp(1, 4, 2, spans.KindServer, "dep", 3, 79, server(200)...),
		}, "dep", 1, 1},
		{"a batch of items is no retry loop", batch, "dep", 3, 3},
		{"back-to-back reads of two replicas are no fan-out", []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			us(sp(1, 2, 1, spans.KindClient, "api", 0, 0, get("http://10.0.0.1:80/x", 200)...), 1000, 10000),
			us(sp(1, 3, 2, spans.KindServer, "dep", 0, 0, server(200)...), 1100, 9900),
			us(sp(1, 4, 1, spans.KindClient, "api", 0, 0, get("http://10.0.0.2:80/x", 200)...), 10050, 20000),
			us(sp(1, 5, 4, spans.KindServer, "dep", 0, 0, server(200)...), 10100, 19900),
		}, "dep", 2, 2}, // two replicas, origins of one dependency
		{"orphans are not a redis call's doing", []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			sp(1, 2, 1, spans.KindClient, "api", 1, 60, spans.StringAttr("db.system", "redis"), spans.StringAttr(spans.AttrServerAddress, "redis")),
			sp(1, 3, 9, spans.KindServer, "dep", 5, 20, server(200)...),
			sp(1, 4, 8, spans.KindServer, "dep", 25, 40, server(200)...),
		}, "dep", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := run(t, engine.Config{}, tc.ss...)
			if d := depStats(t, r, tc.dep); d.PhysicalCalls != tc.calls || d.LogicalOperations != tc.ops {
				t.Errorf("%s saw %d calls for %d intents, want %d for %d", tc.dep, d.PhysicalCalls, d.LogicalOperations, tc.calls, tc.ops)
			}
			if len(r.Findings) != 0 {
				t.Errorf("findings on a healthy shape: %+v", r.Findings)
			}
		})
	}
}

// An untraced gateway that calls users and then orders made two calls to two services, not one
// call retried against another service.
func TestUntracedGatewayCallsAreNotOneRetry(t *testing.T) {
	a, _ := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "web", 0, 100),
		sp(1, 2, 1, spans.KindClient, "web", 1, 90, get("http://gateway:80/page", 200)...),
		sp(1, 3, 70, spans.KindServer, "users", 10, 30, server(500)...),
		sp(1, 4, 71, spans.KindServer, "orders", 40, 60, server(200)...),
	)
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Tries() > 1 {
			t.Errorf("%s made %d tries toward %s: the gateway's two calls were read as a retry", op.Owner, op.Tries(), op.Dependency)
		}
	}
}

// A request that waited in a queue for longer than any clock skew, then was worked on after its
// caller gave up: post-deadline work, whatever alignment does for skew.
func TestQueuedRequestWorkedAfterGiveUp(t *testing.T) {
	cl := failed(sp(1, 2, 1, spans.KindClient, "api", 0, 1000, spans.StringAttr(spans.AttrRPCSystem, "grpc"),
		spans.StringAttr(spans.AttrServerAddress, "dep"), spans.StringAttr(spans.AttrRPCStatus, "DEADLINE_EXCEEDED")), "")
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 1100),
		cl,
		sp(1, 3, 2, spans.KindServer, "dep", 1500, 1700),
		sp(1, 4, 3, spans.KindClient, "dep", 1600, 1650, get("http://db:80/q", 200)...),
	)
	if fs := findingsOf(r, "post-deadline-work"); len(fs) != 1 || fs[0].Service != "dep" {
		t.Errorf("post-deadline findings = %+v, want one naming dep", fs)
	}
}

// A recursive service whose every hop to itself is untraced has several retrying layers that
// are the same owner: the summary names that owner's tries read from its callee's spans once,
// with how many layers are its, rather than repeating its total at every layer.
func TestRecursiveUntracedOwnerIsNamedOnce(t *testing.T) {
	_, r := run(t, engine.Config{}, combUntraced(4)...)
	const want = "(untraced, between rec and rec), 3 layers: 6 of 6 (rec's)"
	found := false
	for _, f := range r.Findings {
		if f.Detector != "retry-amplification" || f.Dependency != "rec" {
			continue
		}
		found = true
		if !strings.Contains(f.Summary, want) {
			t.Errorf("summary does not name the recursive owner once with its layers (%q):\n%s", want, f.Summary)
		}
		if n := strings.Count(f.Summary, "between rec and rec) 6 of 6"); n > 0 {
			t.Errorf("the recursive owner's total is still repeated %d times:\n%s", n, f.Summary)
		}
	}
	if !found {
		t.Fatal("no retry-amplification finding for the chain that ends at rec")
	}
}
