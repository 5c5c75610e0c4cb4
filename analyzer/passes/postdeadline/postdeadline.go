package postdeadline

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the post-deadline-work detector.
var Detector = &analyzer.Detector{
	Name:     "post-deadline-work",
	Title:    "Work started after the caller gave up",
	Doc:      "calls started after their operation's deadline, or after the caller gave up (its CLIENT span ended, or its deadline passed, while the callee worked on, whatever the status); evidence: spans_after_deadline, wasted_ms, deadline_source, worker",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	t := pass.Trace
	if t == nil {
		return nil
	}
	skew := pass.RunSettings.Skew()
	// The cheap first look, so that a trace with neither a deadline nor a caller that gave up
	// costs no allocation and no walk: most traces.
	explicit := slices.ContainsFunc(pass.Operations, func(op *analyzer.Operation) bool { return op.DeadlineUnixNano > 0 })
	gaveUp := false
	for i := range t.Len() {
		if gaveUp = t.GiveUp(i) > 0; gaveUp {
			break
		}
	}
	if !explicit && !gaveUp {
		return nil
	}
	counted := make([]bool, t.Len())
	off := clockOffsets(t)
	start := func(j int) int64 { return t.Start(j) + off[j] }
	end := func(j int) int64 { return t.End(j) + off[j] }

	// Explicit deadlines first: they are the operation's own word.
	if explicit {
		deadlines(pass, counted, start, end, skew)
	}

	// Then callers that gave up: outer ones first, so work nested under several give-ups is
	// counted once, against the first caller that stopped waiting.
	if gaveUp {
		givenUp(pass, counted, start, end, off, skew)
	}
	return nil
}

// deadlines reports the calls started after their operation's deadline: each call of an operation
// with a deadline, and each call under one short of CONSUMER spans, late and not yet counted,
// against the first operation (in pass.Operations' order, then its calls') it was late for; each
// operation's in one finding, in that order, the calls in the order of the operation's calls, each
// one's subtree in pre-order.
//
// One walk of the trace, in pre-order, keeps the operations' calls above the current span (zones):
// when they are met in the order of the operations, as the engine lists them (outer first), the
// first one a call is late for is a binary search of their earliest deadlines; otherwise a scan of
// them. Nested operations with deadlines, each walking everything under its calls, would otherwise
// cost a deep trace the square.
func deadlines(pass *analyzer.Pass, counted []bool, start, end func(int) int64, skew int64) {
	t := pass.Trace
	type zone struct {
		seq   int32 // the operation's calls numbered in order
		late  int64 // a call that starts after it is late: the deadline and the skew allowed
		first int64 // the earliest late of this zone and those above it (since base)
		inOrd bool  // the zones since base are in seq order
	}
	var (
		ops    []*analyzer.Operation // of each seq
		head   = make([]int32, t.Len())
		next   []int32 // the next seq rooted at the same span, -1 for none
		zones  []zone
		claims []struct{ seq, call, pre int32 }
		n      int32
	)
	for i := range head {
		head[i] = -1
	}
	for _, op := range pass.Operations {
		if op.DeadlineUnixNano <= 0 {
			continue
		}
		for _, a := range op.Attempts {
			for _, id := range a.Calls {
				if i, ok := t.Lookup(id); ok {
					// Rooted at i in seq order: prepended, then read in reverse below.
					next = append(next, head[i])
					head[i] = int32(len(ops))
					ops = append(ops, op)
				}
			}
		}
	}
	lateAt := func(seq int32) int64 { return ops[seq].DeadlineUnixNano + skew }
	walkTree(t, func(j int, base int32) (int32, int32) {
		pre := n
		n++
		if isAsync(t, j) {
			base = int32(len(zones)) // a message outlives its publisher
		}
		best := int32(-1)
		for seq := head[j]; seq >= 0; seq = next[seq] {
			if start(j) > lateAt(seq) {
				best = seq // the last read is the first in seq order
			}
		}
		if active := zones[base:]; isCall(t, j) && len(active) > 0 {
			k := -1
			if active[len(active)-1].inOrd {
				if k = sort.Search(len(active), func(k int) bool { return start(j) > active[k].first }); k == len(active) {
					k = -1
				}
			} else {
				for z := range active {
					if start(j) > active[z].late && (k < 0 || active[z].seq < active[k].seq) {
						k = z
					}
				}
			}
			if k >= 0 && (best < 0 || active[k].seq < best) {
				best = active[k].seq
			}
		}
		if best >= 0 && !counted[j] {
			counted[j] = true
			claims = append(claims, struct{ seq, call, pre int32 }{best, int32(j), pre})
		}
		opened := int32(0)
		for seq := head[j]; seq >= 0; seq = next[seq] {
			z := zone{seq: seq, late: lateAt(seq), first: lateAt(seq), inOrd: true}
			if k := len(zones); k > int(base) {
				prev := zones[k-1]
				z.first = min(z.first, prev.first)
				z.inOrd = prev.inOrd && prev.seq < seq
			}
			zones = append(zones, z)
			opened++
		}
		return opened, base
	}, func(opened int32) { zones = zones[:len(zones)-int(opened)] })
	slices.SortFunc(claims, func(a, b struct{ seq, call, pre int32 }) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(a.pre, b.pre)
	})
	var late []int
	for i := 0; i < len(claims); {
		op := ops[claims[i].seq]
		late = late[:0]
		for ; i < len(claims) && ops[claims[i].seq] == op; i++ {
			late = append(late, int(claims[i].call))
		}
		report(pass, late, "explicit", t.Spans[late[0]].Service(), pastBy(late, end, op.DeadlineUnixNano),
			fmt.Sprintf("%s's operation %s passed its deadline", op.Caller, opName(op)), -1)
	}
}

// walkTree visits the trace's spans in pre-order, root after root. enter is given the first zone
// that span j's calls may be claimed by (zones the caller keeps on a stack; a CONSUMER span moves
// it past those above it) and returns how many zones j opened and the first zone for its subtree;
// leave closes j's zones once its subtree is visited.
func walkTree(t *analyzer.Trace, enter func(j int, base int32) (opened, subBase int32), leave func(opened int32)) {
	type frame struct{ span, child, opened, base int32 }
	var frames []frame
	push := func(j int, base int32) {
		opened, sub := enter(j, base)
		frames = append(frames, frame{span: int32(j), opened: opened, base: sub})
	}
	for _, r := range t.Roots() {
		push(int(r), 0)
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if ch := t.Children(int(f.span)); int(f.child) < len(ch) {
				f.child++
				push(int(ch[f.child-1]), f.base)
				continue
			}
			leave(f.opened)
			frames = frames[:len(frames)-1]
		}
	}
}

// givenUp reports the calls started after a caller gave up: each late call (not yet counted)
// against the outermost caller above it that had given up when it started, each caller's in one
// finding, the callers in pre-order. A caller's calls are those under the SERVER spans that
// answered it - its SERVER children and, where each try is a span of its own between the call and
// the callee (gRPC's call span over its per-attempt spans), the SERVER children of its INTERNAL
// children - short of CONSUMER spans.
//
// One walk of the trace, in pre-order, keeps the callers above the current span that gave up, outer
// first, with the earliest point any of them gave up by then: a call finds its caller by a binary
// search of those, not by a walk down from each caller. A cascade of n timeouts, each callee working
// on and calling again, would otherwise walk its n levels once per caller.
func givenUp(pass *analyzer.Pass, counted []bool, start, end func(int) int64, off []int64, skew int64) {
	t := pass.Trace
	type zone struct {
		caller int32
		first  int64 // the earliest give-up point of this zone's caller and those above it
	}
	type claim struct{ caller, call int32 }
	var (
		zones  []zone
		claims []claim
		pre    = make([]int32, t.Len()) // each span's place in pre-order
		depth  = make([]int32, t.Len()) // SERVER spans at or above each span
		near   = make([]int32, t.Len()) // the nearest SERVER span at or above each span, -1 for none
		n      int32
	)
	walkTree(t, func(j int, base int32) (int32, int32) {
		pre[j] = n
		n++
		p := t.Parent(j)
		depth[j], near[j] = 0, -1
		if p >= 0 {
			depth[j], near[j] = depth[p], near[p]
		}
		if t.Spans[j].Kind == spans.KindServer {
			depth[j]++
			near[j] = int32(j)
		}
		pushed := int32(0)
		if isAsync(t, j) {
			// A message outlives its publisher: no caller above it waited for what it does.
			base = int32(len(zones))
		} else if p >= 0 && t.Spans[j].Kind == spans.KindServer {
			// j answers its parent, or its grandparent through a per-try INTERNAL span: the
			// outer caller's zone first.
			g := -1
			if t.Spans[p].Kind == spans.KindInternal {
				g = t.Parent(p)
			}
			for _, c := range [2]int{g, p} {
				if c < 0 {
					continue
				}
				point := t.GiveUp(c)
				if point <= 0 {
					continue
				}
				z := zone{caller: int32(c), first: point + off[c]}
				if k := len(zones); k > int(base) {
					z.first = min(z.first, zones[k-1].first)
				}
				zones = append(zones, z)
				pushed++
			}
		} else if isCall(t, j) && !counted[j] && int(base) < len(zones) {
			// The outermost zone whose caller had given up when j started: the earliest
			// points only fall going in.
			active := zones[base:]
			if k := sort.Search(len(active), func(k int) bool { return start(j) > active[k].first+skew }); k < len(active) {
				// active[k] is the first zone whose earliest point is early enough; its own
				// caller gave up that early (the points above it were all later).
				counted[j] = true
				claims = append(claims, claim{active[k].caller, int32(j)})
			}
		}
		return pushed, base
	}, func(opened int32) { zones = zones[:len(zones)-int(opened)] })
	// Each caller's late calls in pre-order, the callers in pre-order.
	slices.SortStableFunc(claims, func(a, b claim) int { return cmp.Compare(pre[a.caller], pre[b.caller]) })
	var late []int
	for i := 0; i < len(claims); {
		c := int(claims[i].caller)
		late = late[:0]
		for ; i < len(claims) && int(claims[i].caller) == c; i++ {
			late = append(late, int(claims[i].call))
		}
		point := t.GiveUp(c) + off[c]
		worker, work := deepestWorker(t, c, late, depth, near)
		report(pass, late, "caller-gave-up", worker, pastBy(work, end, point), gaveUpOn(t, c, point-off[c]), c)
	}
}

// clockOffsets says, for each span, what to add to its times to read them on the trace root's
// clock. A callee's SERVER span is set to start when its CLIENT parent did (the request's flight is
// too short to matter, a skew of tens of milliseconds is not) - by at most maxSkew when it starts
// later, since past that the request waited - and every span below it moves with it, its own
// callees aligned again in turn. The callee's duration
// is kept, so a callee that worked on after its caller ended still shows it.
func clockOffsets(t *analyzer.Trace) []int64 {
	off := make([]int64, t.Len())
	for _, r := range t.Roots() {
		// Pre-order: a span's parent is aligned before it.
		t.Walk(int(r), func(j int) bool {
			p := t.Parent(j)
			off[j] = off[p]
			// The callee's SERVER span under its caller's span: a call, or a per-attempt span
			// between the call and the callee (gRPC's); never a second server instrumentation of
			// one process.
			if t.Spans[j].Kind == spans.KindServer && t.Spans[p].Kind != spans.KindServer {
				for _, ch := range t.Children(p) { // by start: the first SERVER child is the earliest
					if t.Spans[ch].Kind == spans.KindServer {
						// A callee that seems to start before its caller is skewed by all of it;
						// one that seems to start later may also have waited in a queue, so only
						// up to maxSkew of the gap is taken as skew.
						off[j] += max(t.Start(p)-t.Start(int(ch)), -int64(maxSkew))
						break
					}
				}
			}
			return true
		})
	}
	return off
}

// maxSkew is the clock skew between services that alignment removes when a callee seems to start
// late: beyond it the gap is the request's own wait (a queue, a pool, a backlog), work done late.
const maxSkew = 100 * time.Millisecond

// pastBy is how long the work in spans went on after point, on the aligned clock.
func pastBy(work []int, end func(int) int64, point int64) int64 {
	var last int64
	for _, j := range work {
		last = max(last, end(j))
	}
	return max(0, last-point)
}

// gaveUpOn says who gave up on what, and how the trace shows it: the caller's own word (a
// timeout or a cancellation), or only time - its span ended, or its deadline passed, while the
// callee worked on, whatever its status said.
func gaveUpOn(t *analyzer.Trace, c int, point int64) string {
	who, what := t.Spans[c].Service(), t.Origin(c)
	if outcome, _ := t.Outcome(c); outcome == analyzer.OutcomeTimeout || outcome == analyzer.OutcomeCancelled {
		return fmt.Sprintf("%s gave up on %s (%s)", who, what, outcome)
	}
	ms := float64(point-t.Start(c)) / float64(time.Millisecond)
	return fmt.Sprintf("%s stopped waiting for %s after %.1f ms", who, what, ms)
}

// deepestWorker names the service that went on working after the caller of c gave up: along a
// cancellation chain (the caller times out, the middle service's call is cancelled, the service
// below ignores its context and calls on) the one furthest below c, which is the one that
// ignored the cancellation. It returns the worker and its work: its SERVER spans under c and the
// late calls it made. depth counts the SERVER spans at or above each span, near is the nearest
// (-1 for none).
func deepestWorker(t *analyzer.Trace, c int, late []int, depth, near []int32) (string, []int) {
	best := late[0]
	for _, j := range late[1:] {
		if depth[j] > depth[best] {
			best = j
		}
	}
	worker := t.Spans[best].Service()
	if s := near[best]; s >= 0 && t.Spans[s].Service() != "" {
		worker = t.Spans[s].Service()
	}
	var work []int
	for _, j := range late {
		if s := near[j]; s >= 0 && t.Spans[s].Service() == worker {
			work = append(work, int(s), j)
		} else if t.Spans[j].Service() == worker {
			work = append(work, j)
		}
	}
	return worker, work
}

// isAsync reports whether span i is a message's consumer (a CONSUMER span): it works when the
// broker delivers, on its own time and for nobody waiting, so neither it nor anything under it is
// work after a caller upstream of the publisher gave up. Publishing itself (the PRODUCER span) is a
// call like any other.
func isAsync(t *analyzer.Trace, i int) bool { return t.Spans[i].Kind == spans.KindConsumer }

func isCall(t *analyzer.Trace, i int) bool {
	k := t.Spans[i].Kind
	return k == spans.KindClient || k == spans.KindProducer
}

func opName(op *analyzer.Operation) string {
	if op.Name != "" {
		return op.Name
	}
	return op.ID
}

func report(pass *analyzer.Pass, late []int, source, service string, wasted int64, what string, caller int) {
	t := pass.Trace
	var ids []string
	if caller >= 0 {
		ids = append(ids, t.Spans[caller].SpanID.String())
	}
	for _, j := range late {
		ids = append(ids, t.Spans[j].SpanID.String())
	}
	ms := math.Round(float64(wasted)/float64(time.Millisecond)*10) / 10
	// The dependency is the one that received the wasted calls.
	dep := t.Dependency(late[0])
	calls := words.Count(len(late), "call")
	pass.Report(analyzer.Finding{
		Severity:   pass.Detector.Severity,
		SpanIDs:    ids,
		Service:    service,
		Dependency: dep,
		Summary: fmt.Sprintf("%s, but %s started %s to %s after that and worked %.1f ms past it, for nobody",
			what, service, calls, dep, ms),
		Action: "propagate the deadline downstream (context deadline, Request-Deadline header or baggage) and check it before every call, so work stops when the caller gives up",
		Evidence: analyzer.Evidence{
			"spans_after_deadline": analyzer.Int(len(late)),
			"wasted_ms":            analyzer.Float(ms),
			"deadline_source":      analyzer.Text(source),
			"worker":               analyzer.Text(service),
		},
	})
}
