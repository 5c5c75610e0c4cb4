package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

func size(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }

// TestPauseFreezesViewWhileIngestContinues: p keeps the shown snapshot while newer ones arrive,
// says so in the header, and shows the newest on the second p.
func TestPauseFreezesViewWhileIngestContinues(t *testing.T) {
	src := &switchSource{}
	src.set(fakeSnapshot(0))
	tm := startTUI(t, New(testOptions(src)), "WORST")
	tm.Send(press("p"))
	waitFor(t, tm, "VIEW FROZEN")
	more := fakeSnapshot(500)
	src.set(more)
	waitFor(t, tm, "newer data waiting")
	// While frozen the operation count must still be the old one.
	tm.Send(press("p"))
	waitFor(t, tm, "operations 561")
	view := finalView(t, tm)
	if strings.Contains(view, "FROZEN") {
		t.Errorf("second p did not unfreeze:\n%s", view)
	}
}

func TestPauseKeepsOldSnapshot(t *testing.T) {
	src := &switchSource{}
	first := fakeSnapshot(0)
	src.set(first)
	m := drive(t, New(testOptions(src)), size(testW, testH), press("p"))
	m = step(t, m, snapshotMsg{snap: fakeSnapshot(100)}, 0)
	if m.snap != first {
		t.Fatal("a snapshot replaced the frozen view")
	}
	if !strings.Contains(m.View(), "operations 61") {
		t.Errorf("frozen view shows new counts:\n%s", m.View())
	}
	m = step(t, m, press("p"), 0)
	if !strings.Contains(m.View(), "operations 161") {
		t.Errorf("unfrozen view does not show the newest snapshot:\n%s", m.View())
	}
}

type fakeReplay struct {
	mu     sync.Mutex
	paused bool
	speed  float64
}

func (r *fakeReplay) Paused() bool       { r.mu.Lock(); defer r.mu.Unlock(); return r.paused }
func (r *fakeReplay) SetPaused(p bool)   { r.mu.Lock(); r.paused = p; r.mu.Unlock() }
func (r *fakeReplay) Speed() float64     { r.mu.Lock(); defer r.mu.Unlock(); return r.speed }
func (r *fakeReplay) SetSpeed(s float64) { r.mu.Lock(); r.speed = s; r.mu.Unlock() }
func (r *fakeReplay) Progress() string   { return "storm.jsonl 65/65 spans" }

func TestReplayKeys(t *testing.T) {
	rp := &fakeReplay{speed: 1}
	opt := testOptions(fixedSource(fakeSnapshot(0)))
	opt.Replay = rp
	m := drive(t, New(opt), size(testW, testH))
	if !strings.Contains(m.View(), "▶ REPLAY 1x") {
		t.Fatalf("header lacks the replay state:\n%s", m.View())
	}
	m = drive(t, m, press("+"), press("+"), press("space"))
	if rp.Speed() != 4 || !rp.Paused() {
		t.Fatalf("after + + space: speed %v paused %v, want 4 true", rp.Speed(), rp.Paused())
	}
	if v := m.View(); !strings.Contains(v, "REPLAY PAUSED 4x") || !strings.Contains(v, "storm.jsonl 65/65 spans") {
		t.Errorf("header does not show the paused replay:\n%s", v)
	}
	drive(t, m, press("-"), press("-"), press("-"), press("space"))
	if rp.Speed() != 0.5 || rp.Paused() {
		t.Errorf("after - - - space: speed %v paused %v, want 0.5 false", rp.Speed(), rp.Paused())
	}
}

// TestOperationsScreen100k: a hundred thousand operations still render, sort and filter.
func TestOperationsScreen100k(t *testing.T) {
	snap := fakeSnapshot(100_000)
	m := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH), press("2"))
	v := m.View()
	if !strings.Contains(v, "100,061 of 100,061 operations") {
		t.Fatalf("operations legend wrong:\n%s", v)
	}
	if got := strings.Count(v, "\n") + 1; got != testH {
		t.Errorf("frame has %d lines, want %d", got, testH)
	}
	// Sort by latency (s once): the slowest is the storm's edge operation, 3.27s.
	m = drive(t, m, press("s"))
	if sel := selectedLine(m.View()); !strings.Contains(sel, "3.27s") {
		t.Errorf("after sorting by latency the first row is %q", sel)
	}
	m = drive(t, m, press("G"))
	if sel := selectedLine(m.View()); sel == "" {
		t.Error("G lost the cursor")
	}
	m = drive(t, m, press("/"), press("c"), press("a"), press("l"), press("l"), press("e"), press("r"), press("="),
		press("e"), press("d"), press("g"), press("e"), press("enter"))
	if v := m.View(); !strings.Contains(v, "1 of 100,061 operations") {
		t.Errorf("filter caller=edge over 100k operations:\n%s", v)
	}
}

func TestOperationsSortCyclesEveryColumn(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("2"))
	seen := map[string]bool{}
	for i := 0; i < int(opSortCount); i++ {
		v := m.View()
		for _, name := range opSortNames {
			if strings.Contains(v, "sorted by "+name+" ") {
				seen[name] = true
			}
		}
		m = drive(t, m, press("s"))
	}
	if len(seen) != int(opSortCount) {
		t.Errorf("s visited %v, want all of %v", seen, opSortNames)
	}
	// Sorted by caller, reversed: web first.
	for m.ops.sort != opByCaller {
		m = drive(t, m, press("s"))
	}
	m = drive(t, m, press("S"))
	if sel := selectedLine(m.View()); !strings.Contains(sel, "web") {
		t.Errorf("reverse caller sort starts with %q", sel)
	}
}

func TestEnterOnDependencyFiltersOperations(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("j"), press("enter"))
	v := m.View()
	if m.screen != screenOps || !strings.Contains(v, "filter: dependency=http://adapter:8080") {
		t.Fatalf("enter on the second dependency did not open its operations:\n%s", v)
	}
	if !strings.Contains(v, "3 of 61 operations") {
		t.Errorf("operations of http://adapter:8080: %s", v)
	}
	m = drive(t, m, press("esc"))
	if !strings.Contains(m.View(), "61 of 61 operations") {
		t.Error("esc did not clear the filter")
	}
}

func TestFilterKeyValueOnFindings(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("3"))
	m = typeFilter(t, m, "detector=post-deadline")
	v := m.View()
	if !strings.Contains(v, "post-deadline-work") || strings.Contains(v, "retry-amplification (1)") {
		t.Errorf("detector= filter:\n%s", v)
	}
	m = drive(t, m, press("esc"))
	m = typeFilter(t, m, "severity=info")
	if v := m.View(); !strings.Contains(v, "no-backoff") || strings.Contains(v, "CRITICAL") {
		t.Errorf("severity= filter:\n%s", v)
	}
	m = drive(t, m, press("esc"))
	m = typeFilter(t, m, "nosuchthing")
	if v := m.View(); !strings.Contains(v, "nothing matches the filter") {
		t.Errorf("a filter that matches nothing must say so:\n%s", v)
	}
}

func typeFilter(t *testing.T, m Model, s string) Model {
	t.Helper()
	msgs := []tea.Msg{press("/")}
	for _, r := range s {
		msgs = append(msgs, press(string(r)))
	}
	msgs = append(msgs, press("enter"))
	return drive(t, m, msgs...)
}

func openStorm(t *testing.T) Model {
	t.Helper()
	return drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("3"), press("enter"))
}

func TestTraceCollapseExpand(t *testing.T) {
	m := openStorm(t)
	m = drive(t, m, press("g")) // the root
	rows := len(m.trace.visible)
	m = drive(t, m, press("j"), press("h")) // collapse the edge operation
	if got := len(m.trace.visible); got != 2 {
		t.Fatalf("collapsing the operation left %d of %d rows, want 2", got, rows)
	}
	if sel := selectedLine(m.View()); !strings.Contains(sel, "▸[63]") {
		t.Errorf("collapsed row does not say how many spans it hides: %q", sel)
	}
	m = drive(t, m, press("l"))
	if got := len(m.trace.visible); got != rows {
		t.Errorf("expanding restored %d rows, want %d", got, rows)
	}
	// h on a leaf goes to its parent.
	m = drive(t, m, press("G"), press("h"))
	if i := m.trace.selectedIndex(); m.trace.ann[i].op == nil {
		t.Errorf("h on a leaf did not move to its operation: %q", selectedLine(m.View()))
	}
}

func TestTraceSearchAndJumps(t *testing.T) {
	m := openStorm(t)
	m = drive(t, m, press("g"), press("h")) // collapse everything under the root
	if len(m.trace.visible) != 1 {
		t.Fatalf("root collapse left %d rows", len(m.trace.visible))
	}
	m = typeFilter(t, m, "service=api")
	if m.trace.nMatches == 0 {
		t.Fatal("service=api matched nothing")
	}
	i := m.trace.selectedIndex()
	if sp := m.trace.view.Spans[i]; sp.Service() != "api" {
		t.Errorf("search did not move to an api span: %s %s", sp.Service(), sp.Name)
	}
	first := i
	m = drive(t, m, press("n"))
	if m.trace.selectedIndex() <= first {
		t.Errorf("n did not move forward: %d -> %d", first, m.trace.selectedIndex())
	}
	m = drive(t, m, press("N"))
	if m.trace.selectedIndex() != first {
		t.Errorf("N did not come back: %d", m.trace.selectedIndex())
	}
	if !strings.Contains(m.View(), "search: service=api") {
		t.Errorf("the trace header does not show the search:\n%s", m.View())
	}

	// Attribute search.
	m = drive(t, m, press("esc"))
	m = typeFilter(t, m, "resilience.attempt=3")
	if sp := m.trace.view.Spans[m.trace.selectedIndex()]; sp.Str(spans.AttrAttempt) != "3" {
		t.Errorf("attribute search landed on %v", sp.Attrs)
	}

	// f walks findings, errors and late spans; on the storm every later attempt is late.
	m = drive(t, m, press("esc"), press("g"))
	for k := 0; k < 70; k++ {
		m = drive(t, m, press("f"))
		if m.trace.ann[m.trace.selectedIndex()].late {
			break
		}
	}
	if sel := selectedLine(m.View()); !strings.Contains(sel, "LATE") || !strings.Contains(sel, "†") && !strings.Contains(sel, "◆") {
		t.Errorf("f never reached a late span: %q", sel)
	}
}

func TestBigTraceNavigable(t *testing.T) {
	v := bigTrace(10_000)
	snap := fakeSnapshot(0)
	inner := snap.TraceLookup
	snap.TraceLookup = func(id spans.TraceID) (*engine.TraceView, bool) {
		if id == v.TraceID {
			return v, true
		}
		return inner(id)
	}
	m := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH), openTraceMsg{trace: v.TraceID})
	if m.screen != screenTrace {
		t.Fatal("trace did not open")
	}
	m = drive(t, m, press("G"))
	if got, want := m.trace.selectedIndex(), len(v.Spans)-1; got != want {
		t.Errorf("G went to %d, want %d", got, want)
	}
	m = drive(t, m, press("pgdown"), press("g"), press("pgdown"), press("pgdown"))
	if got := m.trace.selectedIndex(); got != 2*(testH-headerLines-footerLines-traceHeadLines) {
		t.Errorf("two pages down is row %d", got)
	}
	if got := strings.Count(m.View(), "\n") + 1; got != testH {
		t.Errorf("frame of a %d-span trace has %d lines", len(v.Spans), got)
	}
}

func TestMouseWheelScrolls(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("2"),
		tea.MouseMsg{Button: tea.MouseButtonWheelDown, Action: tea.MouseActionPress})
	if m.ops.cur.pos != 3 {
		t.Errorf("wheel down moved to %d, want 3", m.ops.cur.pos)
	}
}

func TestTabsAndNumberKeys(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH))
	want := []screen{screenOps, screenFindings, screenDeps}
	for _, w := range want {
		m = drive(t, m, press("tab"))
		if m.screen != w {
			t.Fatalf("tab went to %d, want %d", m.screen, w)
		}
	}
	m = drive(t, m, press("shift+tab"))
	if m.screen != screenFindings {
		t.Errorf("shift+tab went to %d", m.screen)
	}
	m = drive(t, m, press("4"))
	if m.screen != screenFindings || !strings.Contains(m.View(), "no trace open") {
		t.Errorf("4 without an open trace must stay and say why:\n%s", m.View())
	}
	m = drive(t, m, press("enter"), press("1"), press("4"))
	if m.screen != screenTrace {
		t.Errorf("4 with an open trace went to %d", m.screen)
	}
}

func TestEvictedTraceSaysSo(t *testing.T) {
	snap := fakeSnapshot(0)
	m := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH), press("2"), press("G"), press("enter"))
	if m.screen != screenOps || !strings.Contains(m.View(), "is no longer held") {
		t.Errorf("opening a trace that is not held:\n%s", m.View())
	}
}

func TestClear(t *testing.T) {
	src := &switchSource{}
	src.set(fakeSnapshot(0))
	opt := testOptions(src)
	opt.Clear = func() { src.set(&engine.Snapshot{}) }
	m := drive(t, New(opt), size(testW, testH), press("C"))
	if v := m.View(); !strings.Contains(v, "No traces yet") || !strings.Contains(v, "cleared") {
		t.Errorf("C did not clear:\n%s", v)
	}
	opt.Clear = nil
	m = drive(t, New(opt), size(testW, testH), press("C"))
	if !strings.Contains(m.View(), "clear is not available") {
		t.Errorf("C without a clear function must say so")
	}
}

// TestNoColor: with a colour terminal, Color false leaves no colour escape in the frame, and the
// worst dependency and the cursor are still marked by characters.
func TestNoColor(t *testing.T) {
	r := lipgloss.NewRenderer(&strings.Builder{})
	r.SetColorProfile(termenv.TrueColor)
	for _, color := range []bool{true, false} {
		opt := testOptions(fixedSource(fakeSnapshot(0)))
		opt.Renderer = r
		opt.Color = color
		v := drive(t, New(opt), size(testW, testH)).View()
		hasColor := strings.Contains(v, "\x1b[38;") || strings.Contains(v, "\x1b[48;")
		if hasColor != color {
			t.Errorf("Color=%v: colour escapes present=%v", color, hasColor)
		}
		if !strings.Contains(v, "▲ WORST") || !strings.Contains(v, ">▲") {
			t.Errorf("Color=%v: the worst row is not marked by characters", color)
		}
	}
}

func TestHumanInt(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100061: "100,061", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := humanInt(n); got != want {
			t.Errorf("humanInt(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f := parseFilter("svc=Edge  503 dep=dep:8080")
	want := []term{{"service", "Edge"}, {"", "503"}, {"dependency", "dep:8080"}}
	if fmt.Sprint(f.terms) != fmt.Sprint(want) {
		t.Fatalf("terms %v, want %v", f.terms, want)
	}
	field := func(k string) ([]string, bool) {
		switch k {
		case "service":
			return []string{"edge"}, true
		case "dependency":
			return []string{"http://dep:8080"}, true
		}
		return nil, false
	}
	if !f.matches([]string{"status 503"}, field) {
		t.Error("should match")
	}
	if parseFilter("owner=x").matches(nil, field) {
		t.Error("an unknown key must not match")
	}
	if !containsFold("HTTP://DEP", "dep") || containsFold("abc", "abcd") || !containsFold("x", "") {
		t.Error("containsFold")
	}
}

func TestSparkline(t *testing.T) {
	if got := sparkline([]float64{1, 1, 3, 27}, 3); got != "▁▁█" {
		t.Errorf("sparkline = %q", got)
	}
	if got := sparkline([]float64{27, 0, 3}, 5); got != "  █ ▁" {
		t.Errorf("sparkline with a quiet interval, right-aligned = %q", got)
	}
	if got := sparkline(nil, 5); got != "" {
		t.Errorf("empty sparkline = %q", got)
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{850 * time.Microsecond: "850µs", 3270 * time.Millisecond: "3.27s",
		5 * time.Millisecond: "5.0ms", 340 * time.Millisecond: "340ms", 3*time.Minute + 2*time.Second: "3m2s"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestExportWritesOTLPJSON: e on the open trace writes a file that decodes back to the same spans.
func TestExportWritesOTLPJSON(t *testing.T) {
	dir := t.TempDir()
	opt := testOptions(fixedSource(fakeSnapshot(0)))
	opt.ExportDir = dir
	m := drive(t, New(opt), size(testW, testH), press("3"), press("enter"), press("e"))
	v := m.View()
	if !strings.Contains(v, "exported 65 spans to "+dir) {
		t.Fatalf("export status:\n%s", v)
	}
	body, err := os.ReadFile(filepath.Join(dir, "stormwatch-trace-4b000000000000000000000000000001.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := spans.DecodeJSON(body, spans.DecodeOptions{AllAttributes: true})
	if err != nil {
		t.Fatalf("exported file does not decode as OTLP/JSON: %v", err)
	}
	if len(b.Spans) != 65 || b.Spans[0].Name != "GET /checkout" {
		t.Errorf("decoded %d spans, first %q", len(b.Spans), b.Spans[0].Name)
	}

	// From the operations list, the selected operation's trace; an unwritable directory says why.
	opt.ExportDir = filepath.Join(dir, "missing", "dir")
	m = drive(t, New(opt), size(testW, testH), press("2"), press("e"))
	if v := m.View(); !strings.Contains(v, "export failed: write "+opt.ExportDir) {
		t.Errorf("export to a missing directory:\n%s", v)
	}
}

// TestBreakerColumn: a dependency whose latest attempt was refused shows its breaker open; one
// that refused earlier but accepts now shows "was open".
func TestBreakerColumn(t *testing.T) {
	snap := fakeSnapshot(0)
	for i := range snap.Report.Dependencies {
		d := &snap.Report.Dependencies[i]
		switch d.Dependency {
		case "http://pricing:8080", "http://reviews:8080":
			d.Outcomes = map[string]int{"200": 5, "refused": 3}
		}
	}
	var pricing, reviews []*analyzer.Operation
	for _, op := range snap.Operations() {
		switch op.Dependency {
		case "http://pricing:8080":
			pricing = append(pricing, op)
		case "http://reviews:8080":
			reviews = append(reviews, op)
		}
	}
	latest := func(ops []*analyzer.Operation) *analyzer.Operation {
		l := ops[0]
		for _, op := range ops {
			if op.StartUnixNano > l.StartUnixNano {
				l = op
			}
		}
		return l
	}
	latest(pricing).Attempts[0].Outcome = "refused"
	reviews[0].Attempts[0].Outcome = "refused"
	snap.SetOperations(snap.Operations()) // the last attempts are made with the operations
	checkBreakerColumn(t, snap)

	// The analyzer keeps the last attempts itself: the column needs no operation read back.
	bare := *snap
	bare.SetOperations(nil)
	bare.LastAttempts = snap.LastAttempts
	checkBreakerColumn(t, &bare)
}

// An open breaker refuses before any call goes out: a client that records only the operation
// (breaker-counts-attempts-reference, recorded from the reference client) leaves refused attempts
// and no refused call. The column must still say the breaker is open.
func TestBreakerColumnWithoutRefusedCalls(t *testing.T) {
	snap := fixtureSnapshot(t, "breaker-counts-attempts-reference")
	for _, d := range snap.Report.Dependencies {
		if d.Outcomes["refused"] > 0 {
			t.Fatalf("the fixture has refused calls to %s: it no longer shows the case", d.Dependency)
		}
	}
	v := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH)).View()
	row := "" // the table's row: the last line naming the dependency (the banner above names it too)
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, "inventory ") {
			row = l
		}
	}
	if !strings.Contains(row, " open ") || strings.Contains(row, "was open") {
		t.Errorf("inventory's breaker is open (its latest attempt was refused): %q\n%s", row, v)
	}
}

// checkBreakerColumn: pricing's breaker is open, reviews' was open.
func checkBreakerColumn(t *testing.T, snap *engine.Snapshot) {
	t.Helper()
	v := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH)).View()
	for _, want := range []string{"http://pricing:8080", "http://reviews:8080"} {
		line := ""
		for _, l := range strings.Split(v, "\n") {
			if strings.Contains(l, want) {
				line = l
			}
		}
		wantState := "open"
		if want == "http://reviews:8080" {
			wantState = "was open"
		}
		if !strings.Contains(line, " "+wantState+" ") || (wantState == "open" && strings.Contains(line, "was open")) {
			t.Errorf("%s (%d operations held): breaker column should say %q: %q", want, snap.HeldOperations, wantState, line)
		}
	}
}

// TestHelpFitsSmallTerminal: the widest help (trace screen, replay keys) at 80x24 keeps the frame
// 80 wide and 24 high, and still lists the trace and replay keys.
func TestHelpFitsSmallTerminal(t *testing.T) {
	opt := testOptions(fixedSource(fakeSnapshot(0)))
	opt.Replay = &fakeReplay{speed: 1}
	m := drive(t, New(opt), size(80, 24), press("3"), press("enter"), press("?"))
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != 24 {
		t.Errorf("help frame has %d lines", len(lines))
	}
	for i, l := range lines {
		if w := lipgloss.Width(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i, w, l)
		}
	}
	for _, want := range []string{"collapse", "next finding/error", "pause replay", "faster", "quit"} {
		if !strings.Contains(v, want) {
			t.Errorf("narrow help lacks %q:\n%s", want, v)
		}
	}
}

// TestSpansButNoAnalysisYet: spans held but nothing settled says why the table is empty instead of
// blaming a filter.
func TestSpansButNoAnalysisYet(t *testing.T) {
	snap := &engine.Snapshot{Stats: engine.StoreStats{SpansHeld: 12, TracesHeld: 2, PendingTraces: 2}}
	v := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH)).View()
	if !strings.Contains(v, "no dependencies yet") || strings.Contains(v, "nothing matches") || !strings.Contains(v, "traces 2 (2 settling)") {
		t.Errorf("pending traces:\n%s", v)
	}
}

func TestErrorShare(t *testing.T) {
	for _, c := range []struct {
		in   map[string]int
		want string
	}{
		{map[string]int{"200": 10}, "-"},
		{map[string]int{"503": 3, "200": 1}, "75% 503"},
		{map[string]int{"503": 2, "timeout": 1, "ok": 1}, "75% 503 +1"},
		{map[string]int{"UNAVAILABLE": 4, "OK": 4, "302": 2}, "40% UNAVAILABLE"},
		{nil, "-"},
	} {
		if _, got := errorShare(c.in); got != c.want {
			t.Errorf("errorShare(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPaintMatchesLipgloss: the row painter writes what lipgloss would, in colour and without.
func TestPaintMatchesLipgloss(t *testing.T) {
	for _, profile := range []termenv.Profile{termenv.TrueColor, termenv.ANSI256, termenv.Ascii} {
		r := lipgloss.NewRenderer(&strings.Builder{})
		r.SetColorProfile(profile)
		th := NewTheme(r, true)
		for name, c := range map[string]struct {
			st lipgloss.Style
			p  paint
		}{"selected": {th.Selected, th.Rows.Selected}, "warn": {th.Warn, th.Rows.Warn}, "worst": {th.Worst, th.Rows.Worst},
			"bar": {th.Bar, th.Rows.Bar}, "barerr": {th.BarErr, th.Rows.BarErr}} {
			const row = "> adapter   http://dep:8080   3  503 503 503   ▒▒▒"
			if got, want := c.p.Render(row), c.st.Render(row); got != want {
				t.Errorf("profile %v, %s: paint %q, lipgloss %q", profile, name, got, want)
			}
		}
	}
}

// Keys that arrive in one read come as one message of several runes: every one is applied, in
// order - "jjj" moves three rows, "jjk" two down and one up, and "/adap" opens the filter and
// types into it.
func TestBatchedKeysAllApplied(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH))
	one := drive(t, m, press("j"), press("j"), press("j"))
	batched := drive(t, m, press("jjj"))
	if batched.deps.cur.pos != 3 || one.deps.cur.pos != 3 {
		t.Fatalf("jjj in one read moved to row %d, three presses to row %d; want 3", batched.deps.cur.pos, one.deps.cur.pos)
	}
	if got := drive(t, m, press("jjk")).deps.cur.pos; got != 1 {
		t.Errorf("jjk moved to row %d, want 1", got)
	}
	f := drive(t, m, press("/adap"))
	if !f.input.active || f.input.value != "adap" {
		t.Errorf("'/adap' in one read: filter active %v, value %q; want the filter open with \"adap\"", f.input.active, f.input.value)
	}
}

// The Operations tab counts what its screen lists, on every screen: drilled into a dependency's
// operations and on into a trace, it still says how many operations that dependency's list holds,
// not 0 because the hidden screen let go of its rows.
func TestOperationsCountAgreesAfterDrillingIn(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(testW, testH), press("j"), press("enter"))
	if v := m.View(); !strings.Contains(v, "3 of 61 operations") || !strings.Contains(v, "Operations (3)") {
		t.Fatalf("the operations of http://adapter:8080:\n%s", v)
	}
	m = drive(t, m, press("enter"))
	if m.screen != screenTrace {
		t.Fatalf("enter on an operation did not open its trace:\n%s", m.View())
	}
	if v := m.View(); !strings.Contains(v, "2 Operations (3)") {
		t.Errorf("on the trace the tab lost the count of the list it came from:\n%s", v)
	}
	m = drive(t, m, press("esc"))
	if v := m.View(); !strings.Contains(v, "Operations (3)") || !strings.Contains(v, "3 of 61 operations") {
		t.Errorf("back on the operations, the tab and the list disagree:\n%s", v)
	}
	// To another list and back: the hidden screen lets go of its rows, not of its count.
	for _, k := range []string{"1", "3"} {
		m = drive(t, m, press(k))
		if v := m.View(); !strings.Contains(v, "2 Operations (3)") {
			t.Errorf("on screen %s the tab lost the filtered list's count:\n%s", k, v)
		}
	}
	m = drive(t, m, press("2"))
	if v := m.View(); !strings.Contains(v, "[2 Operations (3)]") || !strings.Contains(v, "3 of 61 operations") {
		t.Errorf("back on the operations:\n%s", v)
	}
}
