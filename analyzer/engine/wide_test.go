package engine_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
)

var update = flag.Bool("update", false, "rewrite the wide-shape goldens under testdata/wide")

// The wide shapes, small: a few siblings, just past the few that are compared pairwise, and
// several tens. The report and the operations read from each are the goldens' (written by the
// pairwise scans that the indexes replaced), so the indexes change no figure.
func TestWideShapesReportUnchanged(t *testing.T) {
	for _, shape := range wideShapes {
		for _, n := range []int{3, 12, 40} {
			t.Run(fmt.Sprintf("%s/%d", shape.name, n), func(t *testing.T) {
				a, r := run(t, wideConfig(t, engine.Config{}, shape.policy), shape.make(n)...)
				var got bytes.Buffer
				if err := render.JSON(&got, &r); err != nil {
					t.Fatal(err)
				}
				for _, op := range a.Snapshot(testNow).Operations() {
					fmt.Fprintf(&got, "op %s owner=%q caller=%q dep=%q tries=%d terminal=%q attempts=[", op.ID, op.Owner, op.Caller, op.Dependency, op.Tries(), op.Terminal)
					for _, at := range op.Attempts {
						fmt.Fprintf(&got, " %d:%s:%s:%d", at.Number, at.Kind, at.Outcome, len(at.Calls))
					}
					fmt.Fprintln(&got, " ]")
				}
				path := filepath.Join("testdata", "wide", fmt.Sprintf("%s-%d.golden", shape.name, n))
				if *update {
					if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Errorf("report of %s with %d siblings changed:\n got: %s\nwant: %s", shape.name, n, got.Bytes(), want)
				}
			})
		}
	}
}

// stillSquare are the shapes whose analysis still costs the square, and where: each is to leave
// this list with the fix that makes it linear. Their goldens still pin their reports.
var stillSquare = map[string]string{}

// One trace of each wide shape costs about as much per span at 20,000 siblings as at 2,000: a
// pass that compares each sibling with every earlier one costs ten times as much per span there.
// A ratio of CPU times, the best of three runs each, with room for a shared machine's noise -
// not a speed.
func TestWideShapesCostNoSquare(t *testing.T) {
	if testing.Short() {
		t.Skip("analyzes traces of 20,000 siblings")
	}
	skipUnderRace(t)
	for _, shape := range wideShapes {
		if why, ok := stillSquare[shape.name]; ok {
			t.Logf("%s not judged: %s", shape.name, why)
			continue
		}
		small, large, grows := costGrows(func(n int) time.Duration { return cpuPerSpan(t, shape.make(n), shape.policy, 0) })
		if grows {
			t.Errorf("%s: %v a span at 20,000 siblings, %v at 2,000: the cost grows with the width", shape.name, large, small)
		}
	}
}

// A trace attaches at most 256 orphans to the spans that made their calls (each costs a scan of
// the trace); the report says how many it left as roots instead of leaving them out silently.
func TestOrphansPastTheBoundAreCountedAndNoted(t *testing.T) {
	for _, shape := range wideShapes {
		if shape.name != "orphans" {
			continue
		}
		_, r := run(t, engine.Config{}, shape.make(300)...)
		if !hasNote(r, "44 SERVER spans whose parent span never arrived were left as roots") {
			t.Errorf("no note counts the 44 orphans past the bound: %q", r.Notes)
		}
		if !hasNote(r, "256 SERVER spans whose parent span never arrived were attached") {
			t.Errorf("no note counts the 256 orphans attached: %q", r.Notes)
		}
	}
}

// A clock no traced call reaches is fitted from where its orphans fall, each judgement a binary
// search; an orphan whose own subtree holds spans of a known clock is judged by a scan, and the
// trace pays at most a few steps a span for those. Past that, the clocks left keep the root's
// offset and the report says how many (and says nothing when the bound is not reached).
func TestUnfittedClocksPastTheBoundAreNoted(t *testing.T) {
	const note = "clocks that no traced call reaches (services seen only in SERVER spans whose parent span never arrived) were read as the root's"
	_, r := run(t, engine.Config{}, tangledClocks(500, 4, false)...)
	if hasNote(r, note) {
		t.Errorf("a note says clocks were not fitted, though none was past the bound: %q", r.Notes)
	}
	_, r = run(t, engine.Config{}, tangledClocks(500, 4, true)...)
	if !hasNote(r, "4 "+note) {
		t.Errorf("no note counts the 4 clocks not fitted: %q", r.Notes)
	}
	// One more dark service, fitted after the bound ran out, whose orphans all fall inside the
	// root's span at the root's offset: it needed no step past a binary search, so it is no
	// clock left unfitted.
	ss := tangledClocks(500, 4, true)
	for i := range 16 {
		ss = append(ss, sp(1, 1<<22+i, 1<<23+1<<22+i, spans.KindServer, "calm", 10+int64(i), 11+int64(i), server(200)...))
	}
	if _, r = run(t, engine.Config{}, ss...); !hasNote(r, "4 "+note) {
		t.Errorf("no note counts the 4 clocks not fitted, beside one that fits as it is: %q", r.Notes)
	}
}

// tangledClocks is a root SERVER span of api with n INTERNAL spans of api under it, beside k
// services seen only in 16 orphans each, 300 ms apart on their own clocks, which run 20 ms behind
// the root's: no offset puts more than one of them inside a span, so each offset tried is judged
// on all 16. With tangled, an INTERNAL span of api hangs under each orphan.
func tangledClocks(n, k int, tangled bool) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 100)}
	for i := range n {
		ss = append(ss, sp(1, 2+i, 1, spans.KindInternal, "api", 1, 99))
	}
	id := 1 << 20
	for c := range k {
		for i := range 16 {
			start := -20 + 300*int64(i) + int64(c)
			ss = append(ss, sp(1, id, 1<<23+id, spans.KindServer, "dark-"+strconv.Itoa(c), start, start+2, server(200)...))
			id++
			if tangled {
				ss = append(ss, sp(1, id, id-1, spans.KindInternal, "api", start+1, start+2))
				id++
			}
		}
	}
	return ss
}

// A finding that names the calls of many operations (a fallback that called the failed
// dependency forty times, once per path) is credited to each of them once, and to no other: the
// Operations screen counts an operation's findings from it. Forty is past the few operations a
// finding's credit is checked against one by one.
func TestAFindingNamingManyOperationsCreditsEachOnce(t *testing.T) {
	a, r := run(t, engine.Config{}, fallbackCalls(40)...)
	if len(r.Findings) != 1 || r.Findings[0].Detector != "hidden-fallback-retry" || len(r.Findings[0].SpanIDs) != 41 {
		t.Fatalf("want one hidden-fallback-retry finding naming 41 spans, got %d findings", len(r.Findings))
	}
	credited := map[string]int{}
	for _, op := range a.Snapshot(testNow).Operations() {
		credited[op.Caller+" -> "+op.Dependency] += op.Findings
		if op.Findings > 1 {
			t.Errorf("operation %s (%s -> %s) credited %d times for one finding", op.ID, op.Caller, op.Dependency, op.Findings)
		}
	}
	want := map[string]int{"fallback -> dep": 40, "api -> fallback": 1, "api -> dep": 0}
	for k, n := range want {
		if credited[k] != n {
			t.Errorf("%s: %d operations credited, want %d", k, credited[k], n)
		}
	}
}

// A finding that names two calls of each of many operations credits each operation once: under
// a loop of forty tries, each leaf's two calls are named by retry-amplification (80 spans, 40
// operations) and its retry by no-backoff, so each leaf counts two findings, not three.
func TestAFindingNamingOperationsTwiceCreditsThemOnce(t *testing.T) {
	a, _ := run(t, engine.Config{}, amplifiedLoop(40)...)
	leaves := 0
	for _, op := range a.Snapshot(testNow).Operations() {
		if op.Tries() != 2 {
			continue
		}
		leaves++
		if op.Findings != 2 {
			t.Errorf("leaf operation %s credited with %d findings, want 2", op.ID, op.Findings)
		}
	}
	if leaves != 40 {
		t.Errorf("%d leaf operations of two tries, want 40", leaves)
	}
}

// Calls sent at once to one service are one attempt, which names each address it reached once:
// forty calls to twenty replicas, each twice, reach twenty origins (past the few an attempt's
// origins are compared with one by one), as unbounded-fanout counts them.
func TestAnAttemptToManyReplicasNamesEachOriginOnce(t *testing.T) {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 10)}
	for i := range 40 {
		url := "http://10.0.0." + strconv.Itoa(i%20) + ":8080/x"
		ss = append(ss, sp(1, 2+2*i, 1, spans.KindClient, "api", 1, 5, get(url, 200)...),
			sp(1, 3+2*i, 2+2*i, spans.KindServer, "dep", 2, 4, server(200)...))
	}
	a, r := run(t, engine.Config{}, ss...)
	ops := a.Snapshot(testNow).Operations()
	if len(ops) != 1 || len(ops[0].Attempts) != 1 {
		t.Fatalf("want one operation of one attempt, got %d operations", len(ops))
	}
	at := ops[0].Attempts[0]
	if len(at.Calls) != 40 || len(at.Origins) != 20 {
		t.Errorf("the attempt made %d calls to %d origins, want 40 to 20: %v", len(at.Calls), len(at.Origins), at.Origins)
	}
	if len(r.Findings) != 1 || !r.Findings[0].Evidence["fanout"].Equal(analyzer.Int(20)) {
		t.Errorf("want one unbounded-fanout finding of fanout 20, got %+v", r.Findings)
	}
}

// A fallback branch lists at most 64 of the calls under it and counts the rest: under 100 nested
// branches, the outermost called the failed dependency again 99 times, through the branches
// below it, and its finding says so, naming the first 64 calls.
func TestNestedFallbackBranchesListABoundedNumberOfCalls(t *testing.T) {
	_, r := run(t, engine.Config{}, combFallbackBranches(100)...)
	outer := 0
	for _, f := range r.Findings {
		if f.Detector != "hidden-fallback-retry" {
			continue
		}
		if len(f.SpanIDs) > 64 {
			t.Errorf("a finding lists %d calls, past 64: %s", len(f.SpanIDs), f.Summary)
		}
		if again, _ := f.Evidence["calls_to_failed"].Int(); again == 99 {
			outer++
			if left, _ := f.Evidence["calls_not_listed"].Int(); len(f.SpanIDs) != 64 || left != 35 {
				t.Errorf("the outermost branch lists %d calls and leaves %d unlisted, want 64 and 35", len(f.SpanIDs), left)
			}
		}
	}
	if outer != 1 {
		t.Errorf("%d findings of a branch that called the failed dependency 99 times, want 1", outer)
	}
}

// A chain lists at most 64 retrying layers, the 32 at the top and the 32 nearest the leaf, and
// counts the rest: under a recursive service retrying at every level 100 deep, the deepest leaf's
// finding says 100 layers retried and lists 64 of them.
func TestDeepChainsListABoundedNumberOfLayers(t *testing.T) {
	_, r := run(t, engine.Config{}, combAmplified(100)...)
	deepest := 0
	for _, f := range r.Findings {
		if f.Detector != "retry-amplification" {
			continue
		}
		layers, _ := f.Evidence["layers"].Records()
		if len(layers) > 64 {
			t.Errorf("a finding lists %d layers, past 64: %s", len(layers), f.Summary)
		}
		if f.Dependency != "leaf-99" {
			continue
		}
		deepest++
		left, _ := f.Evidence["layers_not_listed"].Int()
		if len(layers) != 64 || left != 36 || !strings.HasPrefix(f.Summary, "100 layers retried (api x2, rec x2") || !strings.Contains(f.Summary, ", 36 more, rec x2") {
			t.Errorf("the deepest chain lists %d layers and leaves %d unlisted, want 64 and 36: %s", len(layers), left, f.Summary)
		}
	}
	if deepest != 1 {
		t.Errorf("%d findings of the deepest leaf, want 1", deepest)
	}
}

// A trace whose spans arrive one a batch - an exporter that sends each span as it ends, a
// trace trickling in across a settle period - costs about as much per span at 20,000
// deliveries as at 2,000: its held deliveries are many, and nothing may look through all of
// them for every string the analysis keeps. A ratio of CPU times as above, not a speed.
func TestManyDeliveriesCostNoSquare(t *testing.T) {
	if testing.Short() {
		t.Skip("analyzes a trace delivered in 20,000 batches")
	}
	skipUnderRace(t)
	shape := func(n int) []spans.Span { return clientSiblings(n, true) }
	small, large, grows := costGrows(func(n int) time.Duration { return cpuPerSpan(t, shape(n), "", 1) })
	if grows {
		t.Errorf("%v a span delivered in 20,000 batches, %v in 2,000: the cost grows with the deliveries", large, small)
	}
}

// costGrows weighs the CPU a span costs at 2,000 and at 20,000 of a shape (perSpan(n)) and says
// whether the larger costs more than 4x the smaller (plus a microsecond): a square would cost 10x.
// A machine shared with other work can slow one measurement by that much on its own, so a pair
// over the bound is weighed again, up to three times; a square is over it every time.
func costGrows(perSpan func(n int) time.Duration) (small, large time.Duration, grows bool) {
	for range 3 {
		small, large = perSpan(2_000), perSpan(20_000)
		if large <= 4*small+time.Microsecond {
			return small, large, false
		}
	}
	return small, large, true
}

// skipUnderRace skips a cost test under the race detector (see raceEnabled).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("weighs CPU over traces too wide for the race detector's pace; make test runs it without")
	}
}

// cpuPerSpan is the CPU an analyzer without bounds takes per span of ss under policyYAML ("" for
// the built-in policy), the best of three runs: ss given in batches of perBatch spans (0: one
// batch), then flushed.
func cpuPerSpan(t *testing.T, ss []spans.Span, policyYAML string, perBatch int) time.Duration {
	t.Helper()
	if perBatch <= 0 {
		perBatch = len(ss)
	}
	best := time.Duration(1<<63 - 1)
	for range 3 {
		batches := append([]spans.Span(nil), ss...) // a copy for each run: the batches are the analyzer's once given
		a := engine.New(wideConfig(t, engine.Config{MaxSpans: -1, MaxTraceSpans: -1, WindowInterval: -1}, policyYAML))
		cpu0 := cputime.Process()
		for i := 0; i < len(batches); i += perBatch {
			end := min(i+perBatch, len(batches))
			if err := a.ConsumeBatch(t.Context(), &spans.Batch{Spans: batches[i:end:end]}); err != nil {
				t.Fatal(err)
			}
		}
		a.Flush()
		best = min(best, (cputime.Process()-cpu0)/time.Duration(len(ss)))
	}
	return best
}
