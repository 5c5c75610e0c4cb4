package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// a72Trace is gRFC A72's shape under an HTTP retry loop: edge retries api x3 over HTTP, api makes
// one gRPC call (a "Sent." CLIENT span) whose service-config retryPolicy sends three attempts
// ("Attempt." INTERNAL spans with previous-rpc-attempts), each answered by dep's "Recv." SERVER
// span. No span carries an rpc.* attribute.
func a72Trace(trace byte, failing bool) []spans.Span {
	return a72TraceOf(trace, failing, spans.KindInternal)
}

// a72TraceOf is a72Trace with the attempt spans of the given kind.
func a72TraceOf(trace byte, failing bool, attemptKind spans.Kind) []spans.Span {
	msg := "dependency unavailable"
	status := 503
	if !failing {
		status = 200
	}
	ss := []spans.Span{sp(trace, 1, 0, spans.KindServer, "edge", 0, 200)}
	id := 2
	for e := range 3 {
		base := int64(e * 60)
		edgeCall, apiSrv, sent := id, id+1, id+2
		id += 3
		ss = append(ss,
			sp(trace, edgeCall, 1, spans.KindClient, "edge", base+1, base+50, get("http://api:8080/items/42", status)...),
			sp(trace, apiSrv, edgeCall, spans.KindServer, "api", base+2, base+49, server(status)...))
		s := named(sp(trace, sent, apiSrv, spans.KindClient, "api", base+3, base+48), "Sent.stock.v1.Stock.Get")
		if failing {
			s = failed(s, "rpc error: code = Unavailable desc = "+msg)
		}
		ss = append(ss, s)
		for a := range 3 {
			at := base + 4 + int64(a*14)
			att := named(sp(trace, id, sent, attemptKind, "api", at, at+4,
				spans.IntAttr(spans.AttrGRPCAttemptPrevious, int64(a)), spans.BoolAttr("transparent-retry", false)),
				"Attempt.stock.v1.Stock.Get")
			recv := named(sp(trace, id+1, id, spans.KindServer, "dep", at+1, at+3), "Recv.stock.v1.Stock.Get")
			if failing {
				att, recv = failed(att, msg), failed(recv, msg)
			}
			ss = append(ss, att, recv)
			id += 2
			if !failing {
				break
			}
		}
		if !failing {
			break
		}
	}
	return ss
}

// gRPC's attempt spans are the physical calls and a retry layer of their own: 3 x 3 = 9 calls
// reach dep for one request, named by the gRPC service, the two layers named in the finding - not
// 3 calls of a "connect error" to an unknown dependency.
func TestGRPCAttemptSpansAreALayer(t *testing.T) {
	_, r := run(t, engine.Config{}, a72Trace(1, true)...)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 9 || d.LogicalOperations != 1 || d.Service != "dep" {
		t.Fatalf("dependency = %+v, want dep saw 9 for 1", d)
	}
	if n := d.Outcomes["error"]; n != 9 {
		t.Errorf("outcomes = %v, want error x9 (the callee answered; no code was recorded)", d.Outcomes)
	}
	amp := findingsOf(r, "retry-amplification")
	if len(amp) != 1 {
		t.Fatalf("retry-amplification findings = %+v, want 1", r.Findings)
	}
	if got := amp[0].Evidence["factor"].String(); got != "9" {
		t.Errorf("factor = %s, want 9", got)
	}
	if !strings.Contains(amp[0].Summary, "edge x3, api x3") {
		t.Errorf("summary %q does not name both layers", amp[0].Summary)
	}
}

// The same spans, dep answering the first attempt: one call, no finding.
func TestGRPCAttemptSpansHealthyIsSilent(t *testing.T) {
	_, r := run(t, engine.Config{}, a72Trace(2, false)...)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 1 || d.LogicalOperations != 1 {
		t.Fatalf("dependency = %+v, want dep saw 1 for 1", d)
	}
	if len(r.Findings) != 0 {
		t.Errorf("findings on a healthy trace: %+v", r.Findings)
	}
}

// An HTTP client library's own spans under its CLIENT span (DNS, connect) sent nothing: they are
// not attempts, and the CLIENT span stays the call.
func TestInternalSpansUnderACallAreNotAttempts(t *testing.T) {
	_, r := run(t, engine.Config{},
		sp(3, 1, 0, spans.KindServer, "api", 0, 100),
		sp(3, 2, 1, spans.KindClient, "api", 1, 50, get("http://dep:8080/x", 200)...),
		named(sp(3, 3, 2, spans.KindInternal, "api", 1, 3), "http.dns"),
		named(sp(3, 4, 2, spans.KindInternal, "api", 3, 5), "http.connect"),
		sp(3, 5, 2, spans.KindServer, "dep", 6, 40, server(200)...),
	)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 1 {
		t.Fatalf("dependency = %+v, want 1 call", d)
	}
}

// The attempt layer multiplies with a retrying layer below it too: under each Recv. span dep
// retries store three times over HTTP, so store receives 3 x 3 x 3 = 27 calls for one request,
// with the three layers named.
func TestGRPCAttemptLayerMultipliesWithTheLayerBelow(t *testing.T) {
	ss := a72Trace(4, true)
	id := 1000
	for _, s := range slices.Clone(ss) {
		if s.Kind != spans.KindServer || s.Resource.ServiceName != "dep" {
			continue
		}
		start := (s.StartUnixNano - t0) / msec
		parent := int(s.SpanID[2])<<8 | int(s.SpanID[3])
		for a := range 3 {
			at := start + int64(a) // sub-millisecond calls would need finer times: one ms each
			ss = append(ss,
				sp(4, id, parent, spans.KindClient, "dep", at, at+1, get("http://store:8080/v1/rows", 503)...),
				sp(4, id+1, id, spans.KindServer, "store", at, at+1, server(503)...))
			id += 2
		}
	}
	_, r := run(t, engine.Config{}, ss...)
	d := depStats(t, r, "store")
	if d.PhysicalCalls != 27 || d.LogicalOperations != 1 {
		t.Fatalf("store saw %d for %d, want 27 for 1", d.PhysicalCalls, d.LogicalOperations)
	}
	amp := findingsOf(r, "retry-amplification")
	if len(amp) != 1 || !strings.Contains(amp[0].Summary, "edge x3, api x3, dep x3") {
		t.Fatalf("retry-amplification = %+v, want one naming edge x3, api x3, dep x3", amp)
	}
}

// An implementation that makes its attempt spans CLIENT spans reads the same: the Sent. span is
// then a CLIENT span over CLIENT children to the same place, the two-level rule.
func TestGRPCClientKindAttemptSpansAreALayer(t *testing.T) {
	_, r := run(t, engine.Config{}, a72TraceOf(5, true, spans.KindClient)...)
	d := depStats(t, r, "dep")
	if d.PhysicalCalls != 9 || d.LogicalOperations != 1 {
		t.Fatalf("dependency = %+v, want dep saw 9 for 1", d)
	}
	if amp := findingsOf(r, "retry-amplification"); len(amp) != 1 || !strings.Contains(amp[0].Summary, "edge x3, api x3") {
		t.Fatalf("retry-amplification = %+v", amp)
	}
}
