package jaeger

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

// sink keeps what a follower hands on.
type sink struct {
	mu     sync.Mutex
	traces []spans.TraceID
}

func (s *sink) ConsumeBatch(_ context.Context, b *spans.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces = append(s.traces, b.Spans[0].TraceID)
	return nil
}

// fakeJaeger answers /api/traces with the traces that have a span in the window asked, or with
// 503 while down. Each trace is a span at each of the given seconds.
type fakeJaeger struct {
	mu     sync.Mutex
	down   bool
	traces map[byte][]int64 // trace number -> span start seconds
	asked  [][2]int64       // windows asked, in microseconds
}

func (j *fakeJaeger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path != "/api/traces" {
		http.NotFound(w, r)
		return
	}
	start, _ := strconv.ParseInt(r.URL.Query().Get("start"), 10, 64)
	end, _ := strconv.ParseInt(r.URL.Query().Get("end"), 10, 64)
	j.asked = append(j.asked, [2]int64{start, end})
	var all []spans.Span
	// In trace-number order, as the tests expect them handed on: a map's order would differ from
	// run to run.
	for _, n := range slices.Sorted(maps.Keys(j.traces)) {
		secs := j.traces[n]
		hit := false
		for _, s := range secs {
			if us := s * 1e6; us >= start && us < end {
				hit = true
			}
		}
		if !hit {
			continue
		}
		for i, s := range secs {
			all = append(all, spans.Span{TraceID: spans.TraceID{15: n}, SpanID: spans.SpanID{7: byte(i + 1)}, Name: "op",
				StartUnixNano: s * 1e9, EndUnixNano: s*1e9 + 1e6, Resource: &spans.Resource{ServiceName: "edge"}})
		}
	}
	w.Write(foreigntest.Jaeger(all))
}

// TestFollowerHandsOnEachTraceOnce: consecutive windows do not overlap; a trace found by two
// windows (its spans straddle them) is handed on once; while Jaeger is down the status says so,
// the window is kept, and the traces of the outage come on recovery.
func TestFollowerHandsOnEachTraceOnce(t *testing.T) {
	j := &fakeJaeger{traces: map[byte][]int64{1: {100}, 2: {104, 106}, 3: {108}, 4: {112}}}
	srv := httptest.NewServer(j)
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, API: APIv1, Attempts: 1})
	var got sink
	now := time.Unix(200, 0)
	f := &Follower{Client: c, Query: Query{Service: "edge", Limit: 10}, Sink: &got, Now: func() time.Time { return now }}
	ctx := context.Background()
	if s := f.Status().String(); s != "jaeger connecting" {
		t.Errorf("before the first poll: %q", s)
	}

	next, err := f.PollOnce(ctx, time.Unix(99, 0), time.Unix(105, 0))
	if err != nil || !next.Equal(time.Unix(105, 0)) {
		t.Fatalf("next %v err %v", next, err)
	}
	next, _ = f.PollOnce(ctx, next, time.Unix(110, 0))
	if len(got.traces) != 3 || got.traces[0][15] != 1 || got.traces[2][15] != 3 {
		t.Errorf("handed on %v, want traces 1, 2, 3 once each", got.traces)
	}
	if s := f.Status(); s.Err != nil || s.Traces != 3 || !s.LastOK.Equal(now) || s.String() != "jaeger ok, 3 traces" {
		t.Errorf("status %+v %q", s, s)
	}

	j.mu.Lock()
	j.down = true
	j.mu.Unlock()
	kept, err := f.PollOnce(ctx, next, time.Unix(115, 0))
	if err == nil || !kept.Equal(next) {
		t.Fatalf("down: next %v err %v; want the window kept", kept, err)
	}
	if s := f.Status().String(); !strings.HasPrefix(s, "jaeger DOWN since") || !strings.Contains(s, "503") {
		t.Errorf("down: status %q", s)
	}
	j.mu.Lock()
	j.down = false
	j.mu.Unlock()
	if _, err := f.PollOnce(ctx, kept, time.Unix(120, 0)); err != nil {
		t.Fatal(err)
	}
	if len(got.traces) != 4 || got.traces[3][15] != 4 {
		t.Errorf("after recovery: %v, want trace 4 too", got.traces)
	}
	for i := 1; i < len(j.asked); i++ {
		if j.asked[i][0] < j.asked[i-1][1] && j.asked[i-1] != j.asked[i] {
			t.Errorf("windows overlap: %v", j.asked)
		}
	}
}

// TestFollowerCatchUpIsBounded: after a long outage the next search covers the last few minutes,
// not the whole outage.
func TestFollowerCatchUpIsBounded(t *testing.T) {
	j := &fakeJaeger{traces: map[byte][]int64{}}
	srv := httptest.NewServer(j)
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, API: APIv1})
	f := &Follower{Client: c, Query: Query{Service: "edge"}, Sink: &sink{}}
	end := time.Unix(100_000, 0)
	f.PollOnce(context.Background(), time.Unix(0, 0), end)
	if len(j.asked) != 1 || j.asked[0][0] != end.Add(-maxCatchUp).UnixMicro() {
		t.Errorf("asked %v, want a window of %s", j.asked, maxCatchUp)
	}
}

// splitResult is an /api/traces answer that lists one trace whose second span names a trace id
// of its own: one search result, handed on as two traces.
const splitResult = `{"data":[{"traceID":"00000000000000000000000000000001","spans":[` +
	`{"traceID":"00000000000000000000000000000001","spanID":"0000000000000001","operationName":"GET /","startTime":100000000,"duration":1000,"processID":"p1"},` +
	`{"traceID":"00000000000000000000000000000002","spanID":"0000000000000002","operationName":"GET /","startTime":100000000,"duration":1000,"processID":"p1"}],` +
	`"processes":{"p1":{"serviceName":"edge"}}}]}`

// TestFollowerFullCountsWhatTheSearchReturned: the status says a search hit --limit when Jaeger
// returned that many traces, not when their spans named more trace ids than that.
func TestFollowerFullCountsWhatTheSearchReturned(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(splitResult))
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL, API: APIv1, Attempts: 1})
	traces, found, err := c.FindTraces(context.Background(), window)
	if err != nil || len(traces) != 2 || found != 1 {
		t.Fatalf("%d traces, %d found, err %v; want 2 traces of 1 result", len(traces), found, err)
	}
	for _, limit := range []int{1, 2} {
		var got sink
		f := &Follower{Client: c, Query: Query{Service: "edge", Limit: limit}, Sink: &got}
		if _, err := f.PollOnce(context.Background(), time.Unix(99, 0), time.Unix(105, 0)); err != nil {
			t.Fatal(err)
		}
		if s := f.Status(); len(got.traces) != 2 || s.Full != (limit == 1) {
			t.Errorf("--limit %d, one trace returned: %d handed on, status %q", limit, len(got.traces), s)
		}
	}
}
