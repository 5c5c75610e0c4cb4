package engine

import (
	"cmp"
	"math/rand/v2"
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

// fitByScan is how fitUnknownClocks answered before its index: each offset judged by a scan of the
// whole trace per orphan, the offsets tried sorted by distance, the earlier span's first on a tie.
// The index must answer as it does.
func fitByScan(t *trace, orphans []int32, shift []int64, skew int64, clk []int32, known []bool) {
	for n, o := range orphans {
		c := clk[o]
		if known[c] || slices.ContainsFunc(orphans[:n], func(p int32) bool { return clk[p] == c }) {
			continue
		}
		fits := func(delta int64) int {
			in, seen := 0, 0
			for _, x := range orphans {
				if clk[x] != c {
					continue
				}
				if seen++; seen > maxClockSample {
					break
				}
				start := t.Spans[x].StartUnixNano - delta
				for j := range t.Spans {
					if known[clk[j]] && t.mayHaveCalled(int32(j), x) &&
						start >= t.Spans[j].StartUnixNano-shift[j]-skew && start <= t.End(j)-shift[j]+skew {
						in++
						break
					}
				}
			}
			return in
		}
		all := 0
		for _, x := range orphans {
			if clk[x] == c {
				all++
			}
		}
		all = min(all, maxClockSample)
		best, bestFit := shift[o], fits(shift[o])
		if bestFit == all {
			continue
		}
		var tries []int64
		o0 := t.Spans[o].StartUnixNano
		for j := range t.Spans {
			if !known[clk[j]] || !t.mayHaveCalled(int32(j), o) {
				continue
			}
			if d := o0 - (t.Spans[j].StartUnixNano - shift[j]); d >= -maxClockFit && d <= maxClockFit {
				tries = append(tries, d)
			}
		}
		slices.SortStableFunc(tries, func(a, b int64) int { return cmp.Compare(abs64(a), abs64(b)) })
		for _, d := range tries[:min(len(tries), maxClockTries)] {
			if f := fits(d); f > bestFit {
				best, bestFit = d, f
			}
		}
		for j := range t.Spans {
			if clk[j] == c {
				shift[j] = best
			}
		}
	}
}

// randomOrphanAnalysis is a random orphan trace (randomOrphanTrace) built, with a scratch, its
// CLIENT spans made calls: each one's callee traced or not, carrying the trace on or not.
func randomOrphanAnalysis(rng *rand.Rand) (*trace, *scratch) {
	tr, sc := &trace{}, &scratch{}
	buildTrace(tr, spans.TraceID{1}, randomOrphanTrace(rng, 20+rng.IntN(200)), 0, sc)
	ix := tr.Index()
	for j := range tr.Spans {
		ix.Call[j] = -1
		if tr.Spans[j].Kind == spans.KindClient {
			ix.Call[j] = int32(len(tr.calls))
			tr.calls = append(tr.calls, callInfo{servers: rng.Int32N(2), target: []string{"", "x"}[rng.IntN(2)]})
		}
	}
	return tr, sc
}

// randomOrphanTrace is a trace of a root and n spans of a few services and instances, on whole
// milliseconds within 150 ms of each other (so starts tie, forward and back), some of them SERVER
// spans whose parent never arrived, some of those with spans of the root's service under them.
func randomOrphanTrace(rng *rand.Rand, n int) []spans.Span {
	const ms = int64(1e6)
	var res []*spans.Resource
	for s := range 5 {
		for i := range 3 {
			res = append(res, &spans.Resource{ServiceName: "svc-" + strconv.Itoa(s), ServiceInstance: "i-" + strconv.Itoa(i)})
		}
	}
	id := func(k int) spans.SpanID { return spans.SpanID{1, byte(k >> 8), byte(k)} }
	ss := []spans.Span{{SpanID: id(0), Kind: spans.KindServer, Resource: res[0], StartUnixNano: 0, EndUnixNano: 200 * ms}}
	kinds := []spans.Kind{spans.KindServer, spans.KindClient, spans.KindInternal, spans.KindProducer}
	for k := 1; k <= n; k++ {
		start := (rng.Int64N(300) - 100) * ms
		s := spans.Span{SpanID: id(k), Kind: kinds[rng.IntN(len(kinds))], Resource: res[rng.IntN(len(res))],
			StartUnixNano: start, EndUnixNano: start + rng.Int64N(60)*ms}
		switch p := rng.IntN(k); {
		case rng.IntN(4) == 0: // an orphan
			s.Kind, s.ParentID = spans.KindServer, spans.SpanID{2, byte(k >> 8), byte(k)}
		case rng.IntN(3) == 0 && ss[p].ParentID[0] == 2: // under an orphan, on the root's clock
			s.ParentID, s.Resource = ss[p].SpanID, res[0]
		default:
			s.ParentID = ss[p].SpanID
		}
		ss = append(ss, s)
	}
	return ss
}

// On random traces, the index fits every clock no traced call reaches as the scan of the trace did,
// orphans with spans of known clocks under them included; were the work bound to run out, the
// clocks not fitted would keep the root's offset and be counted.
func TestFitUnknownClocksAnswersAsTheScanDid(t *testing.T) {
	const skew = int64(5e6)
	rng := rand.New(rand.NewPCG(1, 2))
	fitted, tangled := 0, 0
	for trial := range 400 {
		tr, sc := randomOrphanAnalysis(rng)
		ix := tr.Index()
		var orphans []int32
		for _, r := range ix.Roots {
			if s := &tr.Spans[r]; s.Kind == spans.KindServer && !s.ParentID.IsZero() {
				orphans = append(orphans, r)
			}
		}
		shift := tr.clockShifts(sc)
		clk, known := slices.Clone(sc.clockOf), slices.Clone(sc.clockKnown)
		want := slices.Clone(shift)
		fitByScan(tr, orphans, want, skew, clk, known)
		tr.fitUnknownClocks(orphans, shift, skew, sc)
		// The clocks the bound left are the last the index came to, in clock order.
		var unknown []int32
		for _, o := range orphans {
			if c := clk[o]; !known[c] && !slices.Contains(unknown, c) {
				unknown = append(unknown, c)
			}
		}
		slices.Sort(unknown)
		left := unknown[len(unknown)-tr.issues.unfitted:]
		for j := range tr.Spans {
			w := want[j]
			if slices.Contains(left, clk[j]) {
				w = 0
			}
			if shift[j] != w {
				t.Fatalf("trial %d: span %d (%s/%s) shifted by %d, want %d", trial, j, tr.Spans[j].Service(), tr.Spans[j].Instance(), shift[j], w)
			}
		}
		for _, c := range unknown[:len(unknown)-len(left)] {
			if want[slices.Index(clk, c)] != 0 {
				fitted++
			}
		}
		for _, o := range orphans {
			for _, j := range ix.Order[ix.Pos[o]+1 : ix.Pos[o]+ix.Size[o]] {
				if !known[clk[o]] && known[clk[j]] && tr.Spans[j].Service() != tr.Spans[o].Service() {
					tangled++
					break
				}
			}
		}
	}
	if fitted < 100 || tangled < 20 {
		t.Errorf("%d clocks fitted off the root's, %d orphans with spans of known clocks under them: the traces do not test the index", fitted, tangled)
	}
}
