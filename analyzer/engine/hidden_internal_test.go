package engine

import (
	"cmp"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// walkByPasses is the order the attached orphans were walked in when inferBridged ran its passes:
// over the attachments again and again, walking each orphan whose span had been walked, until a
// pass walked none; then those left, as roots of their own.
func walkByPasses(t *trace, bridges []bridge) []int32 {
	visited := make([]bool, len(t.Spans))
	isBridged := func(i int32) bool { return slices.ContainsFunc(bridges, func(b bridge) bool { return b.orphan == i }) }
	walk := func(root int32) {
		for k := t.Index().Pos[root]; k < t.Index().Pos[root]+t.Index().Size[root]; k++ {
			visited[t.Index().Order[k]] = true
		}
	}
	for _, r := range t.Index().Roots {
		if !isBridged(r) {
			walk(r)
		}
	}
	var order []int32
	for {
		progress, left := false, false
		for _, b := range bridges {
			if visited[b.orphan] {
				continue
			}
			if !visited[b.attach] {
				left = true
				continue
			}
			walk(b.orphan)
			order = append(order, b.orphan)
			progress = true
		}
		if !left {
			return order
		}
		if !progress {
			for _, b := range bridges {
				if !visited[b.orphan] {
					walk(b.orphan)
					order = append(order, b.orphan)
				}
			}
			return order
		}
	}
}

// Attached orphans are walked in the order the passes walked them, wherever their spans hang: in
// the trace's tree, under an orphan attached before or after them, in a loop of attachments or
// under one.
func TestBridgedOrphansWalkedAsThePassesDid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	loops, later := 0, 0
	for trial := range 500 {
		n := 5 + rng.IntN(60)
		id := func(k int) spans.SpanID { return spans.SpanID{1, byte(k)} }
		ss := []spans.Span{{SpanID: id(0), Kind: spans.KindServer}}
		for k := 1; k < n; k++ {
			s := spans.Span{SpanID: id(k), Kind: spans.KindServer, StartUnixNano: int64(k)}
			if rng.IntN(3) == 0 {
				s.ParentID = spans.SpanID{2, byte(k)} // an orphan: a root
			} else {
				s.ParentID = id(rng.IntN(k))
			}
			ss = append(ss, s)
		}
		var tr trace
		sc := &scratch{}
		buildTrace(&tr, spans.TraceID{1}, ss, 0, sc)
		ix := tr.Index()
		var bridges []bridge
		for _, r := range ix.Roots[1:] {
			if rng.IntN(4) == 0 {
				continue // left as a root
			}
			for {
				a := int32(rng.IntN(len(tr.Spans)))
				if p := ix.Pos[a]; p < ix.Pos[r] || p >= ix.Pos[r]+ix.Size[r] {
					bridges = append(bridges, bridge{orphan: r, attach: a})
					break
				}
			}
		}
		rng.Shuffle(len(bridges), func(a, b int) { bridges[a], bridges[b] = bridges[b], bridges[a] })
		sc.bridge = bridges
		var got []int32
		for _, q := range tr.walkOrder(sc) {
			got = append(got, bridges[q].orphan)
		}
		want := walkByPasses(&tr, bridges)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: orphans walked in order %v, want %v (attachments %v)", trial, got, want, bridges)
		}
		for q := range sc.walkPass[:len(bridges)] {
			switch p := sc.walkPass[:len(bridges)][q]; {
			case p > 1 && p < 1<<30:
				later++
			case p >= 1<<30:
				loops++
			}
		}
	}
	if loops < 50 || later < 50 {
		t.Errorf("%d orphans walked in a later pass, %d in none: the traces do not test the order", later, loops)
	}
}

// A scratch goes back to the pool after each trace: whatever one huge trace grew in it (by span,
// by root, by orphan) is dropped, as the arrays that hold more than maxScratch elements are, so
// that it does not stay pinned for the life of the pool.
func TestScratchDropsWhatAHugeTraceGrew(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := New(Config{})
	sc := &scratch{}
	ss := randomOrphanTrace(rng, 20_000)
	analyzeTrace(spans.TraceID{1}, ss, 0, &a.cfg, a.seed, a.intern, sc, nil, false)
	if len(sc.bridge) == 0 && len(sc.attached) == 0 {
		t.Fatal("no orphan was attached: the trace does not test the buffers that attaching grows")
	}
	if reflect.ValueOf(sc.costs).IsZero() {
		t.Fatal("the costs were not measured in the scratch: the trace does not test that their arrays go")
	}
	sc.reset()
	if !reflect.ValueOf(sc.costs).IsZero() {
		t.Error("scratch.costs keeps the arrays the huge trace grew after reset")
	}
	v := reflect.ValueOf(sc).Elem()
	for k := range v.NumField() {
		f := v.Field(k)
		if f.Kind() != reflect.Slice {
			continue
		}
		limit := maxScratch
		switch v.Type().Field(k).Name {
		case "arena":
			limit = 12 * maxScratch
		case "clockAdj":
			limit = 2 * maxScratch
		}
		if f.Cap() > limit {
			t.Errorf("scratch.%s keeps %d elements after reset", v.Type().Field(k).Name, f.Cap())
		}
	}
}

// bridgeByScan is how bridgeOrphans chooses each orphan's span, as plainly as it can be put: a scan
// of the whole trace per orphan, for the deepest span that may have called it open at its start
// (an attached orphan's subtree counting as deep as where it hangs), then the latest to start,
// then the first in the trace's order.
func bridgeByScan(t *trace, skew int64, sc *scratch) []bridge {
	var orphans []int32
	for _, r := range t.Index().Roots {
		s := &t.Spans[r]
		if s.Kind != spans.KindServer || s.ParentID.IsZero() || s.ParentID == s.SpanID {
			continue
		}
		if _, found := t.Lookup(s.ParentID); found || len(orphans) == maxBridged {
			continue
		}
		orphans = append(orphans, r)
	}
	shift := t.clockShifts(sc)
	t.fitUnknownClocks(orphans, shift, skew, sc)
	slices.SortStableFunc(orphans, func(a, b int32) int {
		return cmp.Compare(t.Spans[a].StartUnixNano-shift[a], t.Spans[b].StartUnixNano-shift[b])
	})
	lift := make([]int32, len(t.Spans))
	var out []bridge
	for _, r := range orphans {
		start := t.Spans[r].StartUnixNano - shift[r]
		best := int32(-1)
		depth := func(j int32) int32 { return t.depth[j] + lift[j] }
		for j := range t.Spans {
			c := &t.Spans[j]
			if !t.mayHaveCalled(int32(j), r) {
				continue
			}
			if cStart := c.StartUnixNano - shift[j]; start < cStart-skew || start > t.End(j)-shift[j]+skew {
				continue
			}
			if best < 0 || depth(int32(j)) > depth(best) || depth(int32(j)) == depth(best) && c.StartUnixNano-shift[j] > t.Spans[best].StartUnixNano-shift[best] {
				best = int32(j)
			}
		}
		if best >= 0 {
			out = append(out, bridge{orphan: r, attach: best})
			for k := t.Index().Pos[r]; k < t.Index().Pos[r]+t.Index().Size[r]; k++ {
				lift[t.Index().Order[k]] = depth(best) + 1
			}
		}
	}
	return out
}

// On random traces, each orphan is attached to the span the rule chooses: orphans under orphans
// (lifted), spans that started at one moment, clocks fitted or not.
func TestOrphansAttachedAsTheScanDid(t *testing.T) {
	const skew = int64(5e6)
	rng := rand.New(rand.NewPCG(7, 8))
	attached, lifted := 0, 0
	for trial := range 400 {
		tr, sc := randomOrphanAnalysis(rng)
		ix := tr.Index()
		want := bridgeByScan(tr, skew, sc)
		tr.bridgeOrphans(skew, sc)
		if !slices.Equal(sc.bridge, want) {
			t.Fatalf("trial %d: attached %v, want %v", trial, sc.bridge, want)
		}
		attached += len(want)
		for _, b := range want {
			if p := ix.Pos[b.attach]; slices.ContainsFunc(want, func(o bridge) bool { return p >= ix.Pos[o.orphan] && p < ix.Pos[o.orphan]+ix.Size[o.orphan] }) {
				lifted++
			}
		}
	}
	if attached < 1000 || lifted < 100 {
		t.Errorf("%d orphans attached, %d under other orphans: the traces do not test the choice", attached, lifted)
	}
}
