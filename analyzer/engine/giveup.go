package engine

import (
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The give-up point of a call is when its caller stopped waiting for the answer, on the caller's
// clock. It is read from time, not from the span's status: stacks mark an abandoned call in many
// ways (an error status and "context deadline exceeded", status Unset on an aborted fetch, an
// http.status_code of "0" and response_flags "UT" from a proxy) and some in none at all. What they
// all share is that the caller's span ended, or its deadline passed, while the callee was still
// working on the request.

// giveUpAt is the point at which the caller of CLIENT span i stopped waiting, on its clock, or 0
// when it waited for the answer. The point is the earliest of the span's end and of every deadline
// the request carried: resilience.deadline and a captured Request-Deadline (instants), grpc-timeout
// and Envoy's expected and per-try timeouts (durations from the start), read on the call and on the
// callee's SERVER span srv (the first one under the call; -1 for none), whose clock is set to start
// when the call did. The caller gave up when its own word says so (a timeout or a cancellation) or
// when the callee's work, so aligned, ends past that point by more than skew. The callee's work is
// its SERVER spans and the calls it made while serving the request (started before its SERVER span
// ended: some servers' instrumentation ends that span when the caller hangs up, while the handler
// calls on; calls started after an answer are background work nobody waited for). Only durations
// are compared, never two services' clocks: a callee cannot start before its caller called, so one
// whose work (its SERVER span's start to the last end) lasts longer than the caller waited, by more
// than skew, was still working when the caller left, however far apart their clocks are.
//
// A call that got an answer (a status code) was given up on only by a deadline that passed before
// it ended, or by its own timeout or cancellation status - or, when the callee's own sidecar timed
// its app out and answered for it (envoy.go), at that answer. A call with no answer at all (no status
// code, nothing marking it failed) that lasted no longer
// than skew is one its caller never waited for - fire-and-forget: the span's whole life was
// sending the request.
func (t *trace) giveUpAt(i, srv int32, k *known, srvStart, srvEnd int64, outcome, status string, skew int64, kn []known) int64 {
	s := &t.Spans[i]
	start := s.StartUnixNano
	point := t.End(int(i))
	if status == "" && outcome == analyzer.OutcomeOK && point-start <= skew {
		return 0
	}
	if d := k.timeoutNanos(); d >= 0 {
		point = min(point, start+d)
	}
	if dl := k.deadlineAt(); dl > 0 {
		point = min(point, max(start, dl))
	}
	if srv < 0 {
		srv, srvStart, srvEnd = t.attemptServers(i, kn)
	}
	off := int64(0)
	if srv >= 0 {
		off = start - srvStart
		sk := &kn[srv]
		if d := sk.timeoutNanos(); d >= 0 {
			point = min(point, start+d)
		}
		if dl := sk.deadlineAt(); dl > 0 {
			point = min(point, max(start, dl+off))
		}
	}
	if outcome == analyzer.OutcomeTimeout || outcome == analyzer.OutcomeCancelled {
		return point
	}
	if srv < 0 {
		return 0
	}
	if kn[srv].proxyOutcome("") == analyzer.OutcomeTimeout && t.ingressApp(srv, kn) >= 0 {
		// The callee's own sidecar timed its app out and answered for it (a 504, UT): what the
		// app does after that answer is for nobody, whatever the caller did with it.
		point = min(point, start+t.End(int(srv))-srvStart)
		if t.calleeWorkEnd(i, kn)+off > point+skew {
			return point
		}
	}
	if status != "" && point == t.End(int(i)) {
		// An answer came back (a status code; Envoy's "0" is none): the caller had it when its
		// span ended, and what the callee does afterwards - an audit write, a framework's
		// background task inside the request - was not for a caller that had left. Only a
		// deadline that passed before the span's end makes such a call a give-up.
		return 0
	}
	if srvEnd+off > point+skew || t.calleeWorkEnd(i, kn)+off > point+skew {
		return point
	}
	return 0
}

// attemptServers finds the callee's SERVER spans of a call whose tries are spans of their own
// between it and the callee (gRPC's call span over its per-attempt spans, gRFC A72): the SERVER
// children of its non-call children. It returns the earliest of them (-1 for none), its start and
// the latest end.
func (t *trace) attemptServers(i int32, kn []known) (first int32, start, end int64) {
	first = -1
	t.calleeServers(i, kn, func(s int32) {
		if st := t.Spans[s].StartUnixNano; first < 0 || st < start {
			first, start = s, st
		}
		end = max(end, t.End(int(s)))
	}, true)
	return first, start, end
}

// calleeServers calls fn with each SERVER span that answers call i: its SERVER children (and the
// app's SERVER span behind one that is the callee's own sidecar, see ingressApp: the app's work is
// the callee's) and, with attempts, the SERVER children of its children that are neither calls nor
// servers (per-attempt spans); only the latter when attemptsOnly.
func (t *trace) calleeServers(i int32, kn []known, fn func(int32), attemptsOnly bool) {
	for _, ch := range t.Children(int(i)) {
		switch t.Spans[ch].Kind {
		case spans.KindServer:
			if !attemptsOnly {
				fn(ch)
				if app := t.ingressApp(ch, kn); app >= 0 {
					fn(app)
				}
			}
		case spans.KindInternal:
			for _, g := range t.Children(int(ch)) {
				if t.Spans[g].Kind == spans.KindServer {
					fn(g)
				}
			}
		}
	}
}

// calleeWorkEnd is when the callee of call i stopped working on it, on the callee's clock: the
// latest end of its SERVER spans under i (see calleeServers) and of the calls those made (CLIENT
// and PRODUCER spans of the callee's own, below its SERVER span and above any further callee's)
// that started while the SERVER span was open.
func (t *trace) calleeWorkEnd(i int32, kn []known) int64 {
	var last int64
	t.calleeServers(i, kn, func(ch int32) {
		srvEnd := t.End(int(ch))
		last = max(last, srvEnd)
		if len(t.Children(int(ch))) == 0 {
			return
		}
		t.Walk(int(ch), func(j int) bool {
			switch t.Spans[j].Kind {
			case spans.KindServer, spans.KindConsumer:
				return false // another service's clock, or work meant to outlive the request
			case spans.KindClient, spans.KindProducer:
				if t.Start(j) <= srvEnd {
					last = max(last, t.End(j))
				}
				return false // below is the next callee's
			}
			return true
		})
	}, false)
	return last
}

// timeoutNanos is the shortest timeout the span's captured headers or tags give the request
// (grpc-timeout, x-envoy-expected-rq-timeout-ms, x-envoy-upstream-rq-per-try-timeout-ms), in
// nanoseconds; -1 for none.
func (k *known) timeoutNanos() int64 {
	if !k.hasAny(timeoutAttrs) {
		return -1 // most spans: none of them
	}
	d := int64(-1)
	keep := func(n int64) {
		if n >= 0 && (d < 0 || n < d) {
			d = n
		}
	}
	for _, w := range [...]wk{wkReqHeaderGRPCTimeout, wkGRPCMetadataTimeout, wkEnvoyGRPCTimeout} {
		if k.has(w) {
			keep(grpcTimeout(headerText(k.str(w))))
		}
	}
	for _, w := range [...]wk{wkEnvoyExpectedRqMs, wkEnvoyPerTryMs} {
		if k.has(w) {
			if ms := k.headerInt(w); ms > 0 { // 0 means no timeout to Envoy
				keep(ms * int64(time.Millisecond))
			}
		}
	}
	return d
}

// timeoutAttrs are the attributes timeoutNanos reads, one bit each (see known.hasAny).
const timeoutAttrs = 1<<wkReqHeaderGRPCTimeout | 1<<wkGRPCMetadataTimeout | 1<<wkEnvoyGRPCTimeout |
	1<<wkEnvoyExpectedRqMs | 1<<wkEnvoyPerTryMs

// deadlineAt is the absolute deadline the span carries (resilience.deadline, Unix ns, or a
// captured Request-Deadline: RFC 3339 or Unix milliseconds), on the clock of the service that
// recorded it; 0 for none.
func (k *known) deadlineAt() int64 {
	if d := k.intOr(wkDeadline); d > 0 {
		return d
	}
	if !k.has(wkReqHeaderDeadline) {
		return 0
	}
	v := headerText(k.str(wkReqHeaderDeadline))
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
		return ms * int64(time.Millisecond)
	}
	if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return at.UnixNano()
	}
	return 0
}

// headerText is a captured header's first value: the semantic conventions record headers as
// string arrays, which the span form keeps as their display text (["100m"]).
func headerText(v string) string {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") {
		return v
	}
	v = strings.TrimSpace(strings.TrimPrefix(v, "["))
	if j := strings.IndexAny(v, ",]"); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(strings.TrimSpace(v), `"`)
}

// grpcTimeout reads a grpc-timeout value (up to 8 digits and a unit: H M S m u n) in nanoseconds,
// -1 when it is not one. Envoy's grpc.timeout tag carries the header as it came.
func grpcTimeout(v string) int64 {
	if len(v) < 2 || len(v) > 9 {
		return -1
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return -1
	}
	return n * int64(unit)
}
