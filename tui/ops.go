package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

type opSort int

const (
	opByAttempts opSort = iota
	opByLatency
	opByFindings
	opByCaller
	opByDependency
	opByOwner
	opByTerminal
	opSortCount
)

var opSortNames = [...]string{"attempts", "latency", "findings", "caller", "dependency", "owner", "terminal"}

// opSortColumn maps a sort to the column whose title gets the arrow.
var opSortColumn = [...]int{3, 7, 8, 1, 2, 4, 5}

// opsModel lists operations: the retry loops of every layer (an intent of the top layer makes
// one per attempt of each layer above). The analyzer holds operations packed: the screen reads
// them back from the snapshot while it is shown (see release) and formats only the rows on
// screen, so a hundred thousand operations cost one read and one sort per snapshot that changed
// them, and nothing per frame.
type opsModel struct {
	ctx *shared
	// snap is the snapshot shown; all are its operations once read back (nil until then), total
	// how many it has.
	snap    *engine.Snapshot
	all     []*analyzer.Operation
	total   int
	rows    []*analyzer.Operation
	filter  filter
	sort    opSort
	reverse bool
	keys    []opKey // reused sort buffer
	cur     cursor
	width   int
	height  int
	// stale is set when a snapshot arrived while the screen was hidden: the sort waits until
	// the screen is shown, so a hundred thousand operations cost nothing on other screens.
	stale *engine.Snapshot
	// intents are the dependencies' intents, so a list filtered to one dependency reconciles
	// with the figure on the dependencies screen.
	intents map[string]int
	// oneDep is the dependency every row is toward when the filter picked one (rebuild).
	oneDep string
	// Above asyncAbove operations the filter and sort run in a command, off the update loop, so
	// a key never waits for a hundred thousand rows to sort: gen numbers each rebuild asked for,
	// building says the one asked for last has not been handed out yet, and a result of an older
	// generation is dropped when it arrives. Until it does the rows on screen stay as they were.
	asyncAbove int
	gen        uint64
	building   bool
	inFlight   bool
	// releasedShown is how many rows the list held when release let go of them.
	releasedShown int
}

// asyncOps is how many operations the ops screen filters and sorts in place: below it the work
// takes a few milliseconds, above it a command does it.
const asyncOps = 20_000

// opsRowsMsg carries the rows a rebuild command made, for the generation it was made for.
type opsRowsMsg struct {
	gen  uint64
	all  []*analyzer.Operation // the snapshot's operations, read back for the rows
	rows []*analyzer.Operation
	took time.Duration // how long the filter and sort took, for the refresh's back-off
}

func newOpsModel(ctx *shared) opsModel { return opsModel{ctx: ctx, asyncAbove: asyncOps} }

func (m *opsModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.cur.setHeight(h - 3) // column titles, the selected row in full, legend
}

func (m *opsModel) SetSnapshot(s *engine.Snapshot) {
	m.stale = nil
	if !s.SameOperations(m.snap) {
		m.all = nil
	}
	m.snap, m.total = s, s.HeldOperations
	m.intents = make(map[string]int, len(s.Report.Dependencies))
	for i := range s.Report.Dependencies {
		d := &s.Report.Dependencies[i]
		m.intents[d.Dependency] = d.LogicalOperations
	}
	m.rebuild()
}

// deferSnapshot records s to be applied when the screen is next shown.
func (m *opsModel) deferSnapshot(s *engine.Snapshot) { m.stale = s }

// refresh applies a deferred snapshot.
func (m *opsModel) refresh() {
	if m.stale != nil {
		m.SetSnapshot(m.stale)
	}
}

// release lets go of the operations read back and the rows, once the screen is left for another
// list: the analyzer keeps them packed, and a screen not shown should not hold them as values.
// They are read again when the screen is shown again.
func (m *opsModel) release() {
	if m.snap != nil && m.stale == nil {
		m.stale = m.snap
	}
	if m.snap != nil {
		m.releasedShown = len(m.rows)
	}
	m.snap, m.all, m.rows = nil, nil, nil
	m.gen++ // a rebuild in flight is of no use now
	m.building = false
}

func (m *opsModel) setFilter(s string) {
	m.filter = parseFilter(s)
	m.rebuild()
}

func (m opsModel) shown() int {
	if m.stale != nil && m.filter.empty() {
		return m.stale.HeldOperations
	}
	if m.snap == nil && m.stale != nil {
		// Released with a filter: the rows are gone until the screen is shown again, and
		// filtering every operation to count them would undo the release. The count the list
		// showed last stands until then.
		return m.releasedShown
	}
	return len(m.rows)
}

func opField(op *analyzer.Operation, k string) ([]string, bool) {
	switch k {
	case "caller":
		return []string{op.Caller}, true
	case "owner":
		return []string{op.Owner}, true
	case "dependency":
		return []string{op.Dependency, op.DependencyService}, true
	case "service":
		return []string{op.Caller, op.Owner, op.DependencyService}, true
	case "name":
		return []string{op.Name}, true
	case "terminal":
		return []string{op.Terminal}, true
	case "stop_reason", "stop":
		return []string{op.StopReason}, true
	case "trace", "trace_id":
		return []string{op.TraceID.String()}, true
	case "id":
		return []string{op.ID}, true
	case "outcome", "resilience.outcome":
		out := make([]string, len(op.Attempts))
		for i := range op.Attempts {
			out[i] = op.Attempts[i].Outcome
		}
		return out, true
	case "status", spans.AttrHTTPStatus, spans.AttrRPCStatus:
		out := make([]string, len(op.Attempts))
		for i := range op.Attempts {
			out[i] = op.Attempts[i].Status
		}
		return out, true
	}
	return nil, false
}

func (m *opsModel) rebuild() {
	m.gen++
	if m.total > m.asyncAbove {
		m.building = true
		return
	}
	m.building = false
	if m.all == nil {
		m.all = m.snap.Operations()
	}
	m.rows, m.keys = opRows(m.rows[:0], m.keys, m.all, m.filter, m.sort, m.reverse)
	m.applied()
}

// applied resets what follows from the rows: the cursor's range and the one dependency.
func (m *opsModel) applied() {
	m.cur.setLen(len(m.rows))
	m.oneDep, _ = m.oneDependency()
}

// takeBuild hands out the command for the rebuild asked for last, once; nil when there is none.
// The command works on its own copies: the snapshot and its operations are immutable, the filter
// and sort are values. It reads the operations back when they have not been yet.
func (m *opsModel) takeBuild() tea.Cmd {
	if !m.building || m.inFlight {
		return nil // one at a time: the latest request goes out when the one in flight lands
	}
	m.building, m.inFlight = false, true
	gen, snap, all, f, by, rev := m.gen, m.snap, m.all, m.filter, m.sort, m.reverse
	return func() tea.Msg {
		began := time.Now()
		if all == nil {
			all = snap.Operations()
		}
		rows, _ := opRows(nil, nil, all, f, by, rev)
		return opsRowsMsg{gen: gen, all: all, rows: rows, took: time.Since(began)}
	}
}

// setRows takes a rebuild command's rows when they are the latest asked for.
func (m *opsModel) setRows(msg opsRowsMsg) {
	m.inFlight = false
	if msg.gen != m.gen {
		return // a newer snapshot, filter or sort was asked for since
	}
	m.all, m.rows = msg.all, msg.rows
	m.applied()
}

// opRows filters all into rows and sorts them; keys is the sort's buffer. Both are returned for
// reuse.
func opRows(rows []*analyzer.Operation, keys []opKey, all []*analyzer.Operation, f filter, by opSort, reverse bool) ([]*analyzer.Operation, []opKey) {
	if f.empty() {
		rows = append(rows, all...)
	} else {
		text := make([]string, 6)
		for _, op := range all {
			text = append(text[:0], op.Caller, op.Owner, op.Dependency, op.DependencyService, op.Name, op.Terminal)
			if f.matches(text, func(k string) ([]string, bool) { return opField(op, k) }) {
				rows = append(rows, op)
			}
		}
	}
	return rows, sortOps(rows, keys, by, reverse)
}

// opKey is a row with its sort key pulled out, so the comparison the sort runs two million times
// on a hundred thousand rows is two integer compares instead of a switch and pointer chases.
type opKey struct {
	num   int64  // numeric column, negated so that larger sorts first
	str   string // text column
	start int64
	op    *analyzer.Operation
}

// sortOps sorts rows in place by the column by, keys being the reused buffer it returns.
func sortOps(rows []*analyzer.Operation, keys []opKey, by opSort, reverse bool) []opKey {
	keys = keys[:0]
	// Newest first: the analyzer lists operations oldest first, so walking backwards hands the sort
	// an input already in tie-break order, which pdqsort finishes in close to one pass.
	for i := len(rows) - 1; i >= 0; i-- {
		op := rows[i]
		k := opKey{start: op.StartUnixNano, op: op}
		switch by {
		case opByAttempts:
			k.num = -int64(len(op.Attempts))
		case opByLatency:
			k.num = -(op.EndUnixNano - op.StartUnixNano)
		case opByFindings:
			k.num = -int64(op.Findings)
		case opByCaller:
			k.str = op.Caller
		case opByDependency:
			k.str = op.Dependency
		case opByOwner:
			k.str = op.Owner
		case opByTerminal:
			k.str = op.Terminal
		}
		keys = append(keys, k)
	}
	rev := 1
	if reverse {
		rev = -1
	}
	slices.SortFunc(keys, func(a, b opKey) int {
		if a.num != b.num {
			return rev * cmp.Compare(a.num, b.num)
		}
		if c := strings.Compare(a.str, b.str); c != 0 {
			return rev * c
		}
		// Ties: newest first, then by id, so equal rows never swap places between frames.
		if a.start != b.start {
			return cmp.Compare(b.start, a.start)
		}
		return strings.Compare(a.op.ID, b.op.ID)
	})
	for i := range keys {
		rows[i] = keys[i].op
	}
	clear(keys) // drop the pointers into the old snapshot
	return keys
}

func (m opsModel) selected() *analyzer.Operation {
	if m.cur.pos < len(m.rows) {
		return m.rows[m.cur.pos]
	}
	return nil
}

func (m opsModel) Update(msg tea.Msg) (opsModel, tea.Cmd) {
	k := m.ctx.keys
	if m.cur.navigate(k, msg) {
		return m, nil
	}
	if msg, ok := msg.(tea.KeyMsg); ok {
		switch {
		case key.Matches(msg, k.Sort):
			m.sort = (m.sort + 1) % opSortCount
			m.rebuild()
		case key.Matches(msg, k.Reverse):
			m.reverse = !m.reverse
			m.rebuild()
		case key.Matches(msg, k.Enter):
			if op := m.selected(); op != nil {
				return m, func() tea.Msg { return openTraceMsg{trace: op.TraceID, focus: []spans.SpanID{op.SpanID}} }
			}
		}
	}
	return m, nil
}

var opCols = []column{
	{title: "", width: 1},
	{title: "CALLER", width: 12},
	{title: "DEPENDENCY", weight: 3},
	{title: "ATTEMPTS", width: 9, right: true},
	{title: "OWNER", width: 10},
	{title: "TERMINAL", width: 14},
	{title: "OUTCOMES", weight: 2},
	{title: "LATENCY", width: 8, right: true},
	{title: "FIND", width: 4, right: true},
}

// opColsNarrow is the layout below 100 columns: the flexible columns get the room.
var opColsNarrow = []column{
	{title: "", width: 1},
	{title: "CALLER", width: 10},
	{title: "DEPENDENCY", weight: 3},
	{title: "ATT", width: 6, right: true},
	{title: "OWNER", width: 8},
	{title: "TERMINAL", width: 10},
	{title: "OUTCOMES", weight: 2},
	{title: "LATENCY", width: 7, right: true},
	{title: "FIND", width: 4, right: true},
}

func (m opsModel) View() string {
	t := &m.ctx.theme
	narrow := m.width < 100
	cols := layout(opCols, m.width)
	if narrow {
		cols = layout(opColsNarrow, m.width)
	}
	lines := make([]string, 0, m.height)
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	titles[opSortColumn[m.sort]] += sortArrow(m.reverse)
	lines = append(lines, t.Dim.Render(row(cols, titles...)))
	if len(m.rows) == 0 {
		if m.total == 0 {
			lines = append(lines, t.Dim.Render("  no operations yet"))
		} else {
			lines = append(lines, t.Dim.Render("  nothing matches the filter"))
		}
	}
	from, to := m.cur.window()
	// Names on screen are cut together, so that two rows never read the same.
	shownDeps := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		shownDeps = append(shownDeps, shortURL(m.rows[i].Dependency, narrow))
	}
	shownDeps = cutDistinct(shownDeps, cols[2].width)
	for i := from; i < to; i++ {
		op := m.rows[i]
		mark := " "
		if i == m.cur.pos {
			mark = ">"
		}
		att := strconv.Itoa(len(op.Attempts))
		if calls := op.PhysicalCalls(); calls != len(op.Attempts) {
			att += fmt.Sprintf(" (%d)", calls)
		}
		find := ""
		if op.Findings > 0 {
			find = strconv.Itoa(op.Findings)
		}
		terminal := op.Terminal
		if terminal == "" {
			terminal = op.StopReason
		}
		line := row(cols, mark, op.Caller, shownDeps[i-from], att, op.Owner, terminal, outcomeTrail(op),
			fmtDur(op.Latency()), find)
		switch {
		case i == m.cur.pos:
			line = t.Rows.Selected.Render(line)
		case op.Findings > 0:
			line = t.Rows.Warn.Render(line)
		}
		lines = append(lines, line)
	}
	body := padLines(lines, m.height-2)
	return body + "\n" + fit(m.selectedLine(), m.width) + "\n" + fit(t.Dim.Render(m.legend()), m.width)
}

// selectedLine is the selected operation in full, as the narrow columns cut names (OWNER above
// all, where the retrying service has a long name).
func (m opsModel) selectedLine() string {
	op := m.selected()
	if op == nil {
		return ""
	}
	s := "▸ " + op.Caller + " → " + op.Dependency + " · owner " + orDash(op.Owner)
	if op.Name != "" {
		s += " · " + op.Name
	}
	s += " · " + words.Count(op.Tries(), "attempt")
	if calls := op.PhysicalCalls(); calls != op.Tries() {
		s += ", " + words.Count(calls, "call")
	}
	return m.ctx.theme.Bold.Render(s)
}

// legend says what an operation is, and, when the list is one dependency's, how its count
// reconciles with the intents on the dependencies screen.
func (m opsModel) legend() string {
	if m.inFlight || m.building {
		return "sorting " + words.Count(m.total, "operation") + " by " + opSortNames[m.sort] + "..."
	}
	count := humanInt(len(m.rows)) + " of " + words.Count(m.total, "operation")
	if dep := m.oneDep; dep != "" {
		intents := words.Count(m.intents[dep], "intent")
		if m.width < 100 {
			return fmt.Sprintf("%s to %s for %s: one per attempt of the layers above",
				words.Count(len(m.rows), "operation"), shortURL(dep, true), intents)
		}
		return fmt.Sprintf("%s to %s, for %s: one per attempt of the layers above", count, dep, intents)
	}
	if m.width < 100 {
		return count + ": retry loops at every layer · by " + opSortNames[m.sort]
	}
	return count + ": retry loops at every layer, one per attempt above · sorted by " + opSortNames[m.sort] + " (s, S)"
}

// oneDependency reports the dependency every row is toward, when the filter picked one.
func (m *opsModel) oneDependency() (string, bool) {
	if len(m.rows) == 0 || m.filter.empty() {
		return "", false
	}
	dep := m.rows[0].Dependency
	if _, ok := m.intents[dep]; !ok {
		return "", false
	}
	for _, op := range m.rows {
		if op.Dependency != dep {
			return "", false
		}
	}
	return dep, true
}

// outcomeTrail shows each attempt's outcome in order, e.g. "503 503 ok" or "timeout ok".
func outcomeTrail(op *analyzer.Operation) string {
	var b strings.Builder
	for i := range op.Attempts {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == 8 {
			fmt.Fprintf(&b, "+%d", len(op.Attempts)-i)
			break
		}
		b.WriteString(attemptOutcome(&op.Attempts[i]))
	}
	return b.String()
}

// attemptOutcome is the status when there was one, else the outcome class.
func attemptOutcome(a *analyzer.Attempt) string {
	switch {
	case a.Outcome == "ok" || a.Outcome == "":
		if a.Status != "" && a.Status != "200" && a.Status != "OK" {
			return a.Status
		}
		return "ok"
	case a.Status != "":
		return a.Status
	}
	return a.Outcome
}

// fmtDur prints durations at a precision that fits a column: 850µs, 12.3ms, 1.25s, 3m2s.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDur(-d)
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return d.Round(time.Second).String()
}
