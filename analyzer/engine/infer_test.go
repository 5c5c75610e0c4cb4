package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

var testNow = time.Unix(0, t0).Add(time.Hour)

func onlyOp(t *testing.T, a *engine.Engine) *analyzer.Operation {
	t.Helper()
	ops := a.Snapshot(testNow).Operations()
	if len(ops) != 1 {
		t.Fatalf("got %d operations, want 1", len(ops))
	}
	return ops[0]
}

func TestBothGRPCStatusSpellings(t *testing.T) {
	grpc := func(status spans.Attr) []spans.Attr {
		return []spans.Attr{spans.StringAttr(spans.AttrRPCSystem, "grpc"), spans.StringAttr(spans.AttrRPCService, "s.v1.S"),
			spans.StringAttr(spans.AttrRPCMethod, "Get"), spans.StringAttr(spans.AttrServerAddress, "s"),
			spans.IntAttr(spans.AttrServerPort, 9090), status}
	}
	a, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 10, grpc(spans.StringAttr(spans.AttrRPCStatus, "UNAVAILABLE"))...),
		sp(1, 3, 1, spans.KindClient, "api", 20, 30, grpc(spans.IntAttr(spans.AttrRPCGRPCStatus, 14))...),
		sp(1, 4, 1, spans.KindClient, "api", 40, 50, grpc(spans.IntAttr(spans.AttrRPCGRPCStatus, 0))...),
	)
	op := onlyOp(t, a)
	if op.Tries() != 3 || op.Attempts[0].Outcome != analyzer.OutcomeRetryable || op.Attempts[2].Status != "OK" {
		t.Errorf("attempts = %+v", op.Attempts)
	}
	if d := r.Dependencies[0]; d.Dependency != "s.v1.S" || !slices.Equal(d.Origins, []string{"grpc://s:9090"}) || d.Outcomes["UNAVAILABLE"] != 2 || d.Outcomes["OK"] != 1 {
		t.Errorf("dependency = %+v", d)
	}
}

func TestRedirectAnd401AreResendsNotRetries(t *testing.T) {
	a, _ := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "web", 0, 100),
		sp(1, 2, 1, spans.KindClient, "web", 1, 5, get("http://auth:80/me", 307)...),
		sp(1, 3, 1, spans.KindClient, "web", 6, 9, get("http://auth:80/me", 401)...),
		sp(1, 4, 1, spans.KindClient, "web", 10, 15, get("http://auth:80/me", 200)...),
	)
	op := onlyOp(t, a)
	if op.Tries() != 1 || op.Attempts[1].Kind != analyzer.AttemptKindResend || op.Attempts[2].Kind != analyzer.AttemptKindResend {
		t.Errorf("tries = %d, attempts = %+v", op.Tries(), op.Attempts)
	}
}

func TestCallsAfterASuccessAreNewOperations(t *testing.T) {
	// Three reads in a row that all succeed are three operations (an N+1 loop), not retries.
	a, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "web", 0, 100),
		sp(1, 2, 1, spans.KindClient, "web", 1, 5, get("http://db:80/row", 200)...),
		sp(1, 3, 1, spans.KindClient, "web", 6, 9, get("http://db:80/row", 200)...),
		sp(1, 4, 1, spans.KindClient, "web", 10, 15, get("http://db:80/row", 200)...),
	)
	if n := len(a.Snapshot(testNow).Operations()); n != 3 {
		t.Errorf("operations = %d, want 3", n)
	}
	if d := r.Dependencies[0]; d.Amplification != 1 {
		t.Errorf("amplification = %v, want 1", d.Amplification)
	}
}

func TestOverlappingCopiesToOneOriginAreHedges(t *testing.T) {
	a, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "web", 0, 100),
		sp(1, 2, 1, spans.KindClient, "web", 1, 50, get("http://db:80/row", 200)...),
		sp(1, 3, 1, spans.KindClient, "web", 20, 40, get("http://db:80/row", 200)...),
	)
	op := onlyOp(t, a)
	if len(op.Attempts) != 1 || len(op.Attempts[0].Calls) != 2 || len(op.Attempts[0].Origins) != 1 {
		t.Errorf("attempts = %+v, want one attempt with two copies to one origin", op.Attempts)
	}
	for _, f := range r.Findings {
		if f.Detector == "unbounded-fanout" || f.Detector == "retry-amplification" {
			t.Errorf("a hedge to one origin was reported as %s", f.Detector)
		}
	}
}

func TestOverlappingCallsToReplicasAreFanout(t *testing.T) {
	srv := func(id, parent int, inst string, start, end int64) spans.Span {
		return onInstance(sp(1, id, parent, spans.KindServer, "primary", start, end), inst)
	}
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		sp(1, 2, 1, spans.KindClient, "edge", 1, 50, get("http://10.0.0.1:8080/items/1", 200)...),
		srv(3, 2, "a", 2, 49),
		sp(1, 4, 1, spans.KindClient, "edge", 1, 50, get("http://10.0.0.2:8080/items/1", 200)...),
		srv(5, 4, "b", 2, 49),
		sp(1, 6, 1, spans.KindClient, "edge", 2, 50, get("http://10.0.0.3:8080/items/1", 200)...),
		srv(7, 6, "c", 3, 49),
	)
	if len(r.Findings) != 1 || r.Findings[0].Detector != "unbounded-fanout" || !r.Findings[0].Evidence["fanout"].Equal(analyzer.Int(3)) {
		t.Fatalf("findings = %+v", r.Findings)
	}
	// unbounded-fanout's own limit of 3, set in a policy, allows it.
	p, err := policy.Parse("p.yaml", []byte("detectors:\n  unbounded-fanout: {maxFanout: 3}\n"), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Detectors: suite.Default()}
	policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Offline)
	_, r = run(t, cfg,
		sp(1, 1, 0, spans.KindServer, "edge", 0, 100),
		sp(1, 2, 1, spans.KindClient, "edge", 1, 50, get("http://10.0.0.1:8080/items/1", 200)...), srv(3, 2, "a", 2, 49),
		sp(1, 4, 1, spans.KindClient, "edge", 1, 50, get("http://10.0.0.2:8080/items/1", 200)...), srv(5, 4, "b", 2, 49),
	)
	if len(r.Findings) != 0 {
		t.Errorf("fan-out within the limit reported: %+v", r.Findings)
	}
}

func TestChildStartingBeforeParentIsTolerated(t *testing.T) {
	// The callee's clock runs 3 ms behind: its SERVER span starts before the CLIENT span, and its
	// calls seem earlier than they were. They started before the caller gave up (at 100), so
	// nothing is reported even though raw times disagree across services.
	_, r := run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "edge", 0, 200),
		sp(1, 2, 1, spans.KindClient, "edge", 10, 100, append(get("http://api:80/", 0),
			spans.StringAttr(spans.AttrErrorType, "timeout"))...),
		sp(1, 3, 2, spans.KindServer, "api", 7, 150),
		sp(1, 4, 3, spans.KindClient, "api", 99, 140, get("http://db:80/", 200)...), // 99+3 ms skew = 102, within the 5 ms tolerance of 100
	)
	if len(r.Findings) != 0 {
		t.Errorf("skewed but timely call reported: %+v", r.Findings)
	}
	// Started well after the caller gave up, even corrected for skew: reported.
	_, r = run(t, engine.Config{},
		sp(1, 1, 0, spans.KindServer, "edge", 0, 200),
		sp(1, 2, 1, spans.KindClient, "edge", 10, 100, append(get("http://api:80/", 0),
			spans.StringAttr(spans.AttrErrorType, "timeout"))...),
		sp(1, 3, 2, spans.KindServer, "api", 7, 150),
		sp(1, 4, 3, spans.KindClient, "api", 120, 140, get("http://db:80/", 200)...),
	)
	if len(r.Findings) != 1 || r.Findings[0].Detector != "post-deadline-work" {
		t.Errorf("findings = %+v", r.Findings)
	}
}

func TestEachCallInItsOwnOperationSpanIsItsOwnIntent(t *testing.T) {
	// The reference client wraps every call in an INTERNAL operation span: three reads in a row
	// under one request are three logical operations, not one with amplification 3.
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "report", 0, 100)}
	for k := range 3 {
		op := 10 + 10*k
		ss = append(ss,
			sp(1, op, 1, spans.KindInternal, "report", int64(k)*20, int64(k)*20+10,
				spans.StringAttr(spans.AttrOpID, fmt.Sprint("op-", k))),
			sp(1, op+1, op, spans.KindClient, "report", int64(k)*20+1, int64(k)*20+9,
				append(get("http://db:80/q", 200), spans.StringAttr(spans.AttrOpID, fmt.Sprint("op-", k)),
					spans.IntAttr(spans.AttrAttempt, 1))...))
	}
	_, r := run(t, engine.Config{}, ss...)
	if d := r.Dependencies[0]; d.PhysicalCalls != 3 || d.LogicalOperations != 3 {
		t.Errorf("dependency = %+v, want 3 calls for 3 operations", d)
	}
}

func TestAttemptsInSeparateTracesJoinedByOperationID(t *testing.T) {
	// A client without a parent span; the reference client's attributes say these are attempts
	// 1, 2 and 3 of one operation, each in a trace of its own, without links.
	var ss []spans.Span
	for n := range 3 {
		ss = append(ss, sp(byte(n+1), 1, 0, spans.KindClient, "job", int64(n)*100, int64(n)*100+10,
			append(get("http://api:80/sync", 503), spans.StringAttr(spans.AttrOpID, "sync-1"),
				spans.IntAttr(spans.AttrAttempt, int64(n+1)))...))
	}
	_, r := run(t, engine.Config{}, ss...)
	if d := r.Dependencies[0]; d.PhysicalCalls != 3 || d.LogicalOperations != 1 {
		t.Errorf("dependency = %+v, want 3 calls for 1 operation", d)
	}
	if !hasNote(r, "2 operations continue an operation of another trace") {
		t.Errorf("notes = %q", r.Notes)
	}
}
