package engine

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// clockChainTrace is a chain of n service instances, each calling the next (SERVER span of
// instance i, its CLIENT span, the SERVER span of instance i+1 under it), beside an orphan on a
// service no call reaches. Instance i's clock runs off(i) ahead of the root's and every request's
// flight is flight: the callee's SERVER span starts flight after its CLIENT span on the root's
// clock. Span ids fall along the chain, so the calls are listed leaf first.
func clockChainTrace(n int, off func(i int) int64, flight int64) []spans.Span {
	const ms = int64(1e6)
	res := make([]*spans.Resource, n)
	for i := range res {
		res[i] = &spans.Resource{ServiceName: "svc", ServiceInstance: "i-" + strconv.Itoa(i)}
	}
	id := func(i, k int) spans.SpanID { // k: 0 the SERVER span, 1 the CLIENT span
		v := 2*(n-i) + k
		return spans.SpanID{1, byte(v >> 16), byte(v >> 8), byte(v)}
	}
	var ss []spans.Span
	for i := range n {
		at := int64(i) * 5 * ms // on the root's clock: the CLIENT span starts when the next SERVER span does
		srv := spans.Span{SpanID: id(i, 0), Kind: spans.KindServer, Resource: res[i],
			StartUnixNano: at + off(i), EndUnixNano: at + off(i) + 1000*ms}
		if i > 0 {
			srv.ParentID = id(i-1, 1)
			srv.StartUnixNano += flight
		}
		cli := spans.Span{SpanID: id(i, 1), ParentID: id(i, 0), Kind: spans.KindClient, Resource: res[i],
			StartUnixNano: at + 5*ms + off(i), EndUnixNano: at + 900*ms + off(i)}
		ss = append(ss, srv, cli)
	}
	return append(ss, spans.Span{SpanID: spans.SpanID{9}, ParentID: spans.SpanID{8}, Kind: spans.KindServer,
		Resource: &spans.Resource{ServiceName: "dark"}, StartUnixNano: 50 * ms, EndUnixNano: 60 * ms})
}

// shiftsByInstance runs clockShifts on ss and reads each instance's shift, and the dark
// service's (the orphan's), from its spans; it fails if two spans of one instance disagree.
func shiftsByInstance(t *testing.T, ss []spans.Span) (map[string]int64, []bool) {
	t.Helper()
	var tr trace
	sc := &scratch{}
	buildTrace(&tr, spans.TraceID{1}, ss, 0, sc)
	shift := tr.clockShifts(sc)
	got := map[string]int64{}
	for j := range tr.Spans {
		k := tr.Spans[j].Service() + "/" + tr.Spans[j].Instance()
		if v, ok := got[k]; ok && v != shift[j] {
			t.Fatalf("%s: spans of one instance shifted by %d and %d", k, v, shift[j])
		}
		got[k] = shift[j]
	}
	return got, sc.clockKnown
}

// A chain of instances whose calls arrive leaf first: every instance's offset is read along the
// chain, the one no call reaches is taken for the root's.
func TestClockShiftsFollowALongChainListedLeafFirst(t *testing.T) {
	const n = 300
	off := func(i int) int64 { return int64((i*7919)%201-100) * 1e6 } // -100..100 ms
	got, known := shiftsByInstance(t, clockChainTrace(n, off, 0))
	for i := range n {
		if k := "svc/i-" + strconv.Itoa(i); got[k] != off(i)-off(0) {
			t.Errorf("%s: shift %d, want %d", k, got[k], off(i)-off(0))
		}
	}
	if got["dark/"] != 0 {
		t.Errorf("a clock no call reaches was shifted by %d", got["dark/"])
	}
	if nKnown := slices.Index(append(slices.Clone(known), false), false); len(known) != n+1 || nKnown != n {
		t.Errorf("%d clocks, the first unknown %d; want %d, %d (the dark one, last by span id)", len(known), nKnown, n+1, n)
	}
}

// Two ways to one clock that disagree (the flights differ): each offset is read along the fewest
// calls from the root's clock, forward or back along a call.
func TestClockShiftsTakeTheShortestChainOfCalls(t *testing.T) {
	const n = 12
	off := func(i int) int64 { return int64(i) * 3e6 }
	ss := clockChainTrace(n, off, 2e6) // every hop adds 2 ms of flight
	// The root also calls instance 8 directly: by this call its clock is 5 ms ahead of the root's,
	// by the chain 3*8+2*8 ms. Instances 9-11 are nearer the root through it, and so are 5-7,
	// back along the chain's calls; 1-4 are nearer along the chain.
	root := ss[0]
	for _, s := range ss {
		if s.ParentID.IsZero() {
			root = s
		}
	}
	var deep spans.Span
	for _, s := range ss {
		if s.Instance() == "i-8" && s.Kind == spans.KindServer {
			deep = s
		}
	}
	cli := spans.Span{SpanID: spans.SpanID{7}, ParentID: root.SpanID, Kind: spans.KindClient, Resource: root.Resource,
		StartUnixNano: root.StartUnixNano + 1e6, EndUnixNano: root.StartUnixNano + 2e6}
	srv := spans.Span{SpanID: spans.SpanID{6}, ParentID: cli.SpanID, Kind: spans.KindServer, Resource: deep.Resource,
		StartUnixNano: cli.StartUnixNano + 5e6, EndUnixNano: cli.StartUnixNano + 6e6}
	got, _ := shiftsByInstance(t, append(ss, cli, srv))
	for i := range n {
		want := off(i) + int64(i)*2e6 // along the chain: each hop's flight
		if i >= 5 {
			want = 5e6 + off(i) - off(8) + int64(i-8)*2e6 // from the direct call
		}
		if k := "svc/i-" + strconv.Itoa(i); got[k] != want {
			t.Errorf("%s: shift %d, want %d", k, got[k], want)
		}
	}
}

// The estimate reuses the scratch's buffers and clock index: a trace after the first of its size
// allocates nothing for it.
func TestClockShiftsAllocateNothingOnAReusedScratch(t *testing.T) {
	var tr trace
	sc := &scratch{}
	buildTrace(&tr, spans.TraceID{1}, clockChainTrace(50, func(i int) int64 { return int64(i) * 1e6 }, 0), 0, sc)
	tr.clockShifts(sc)
	if n := testing.AllocsPerRun(20, func() { tr.clockShifts(sc) }); n != 0 {
		t.Errorf("%v allocations a trace", n)
	}
}
