package tui

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/internal/words"
)

// depRow is one dependency with what the screen derives from the snapshot, computed once per
// snapshot.
type depRow struct {
	d         *analyzer.DependencyStats
	errShare  float64 // share of physical calls that did not end ok
	errText   string  // "75% 503" - the share and the commonest failure
	breaker   string  // "open", "was open" or ""
	history   []float64
	worst     bool
	label     string // dependency, with the service when it adds something
	callerTxt string
	added     string // the latency retries added, p99 per request that called it ("-" when none)
}

type depSort int

const (
	depByAmplification depSort = iota
	depByCalls
	depByLogical
	depByErrors
	depByName
	depSortCount
)

var depSortNames = [...]string{"amplification", "calls", "intents", "errors", "dependency"}

// depsModel is the landing screen: one row per dependency, the worst amplification first.
type depsModel struct {
	ctx     *shared
	all     []depRow
	rows    []depRow
	filter  filter
	sort    depSort
	reverse bool
	cur     cursor
	width   int
	height  int
	// anyBreaker is true when some dependency has a breaker state to show.
	anyBreaker bool
	// watching is what the screen says while traffic arrives and nothing is wrong yet: what is
	// watched and what would count as a storm. Empty once there is a finding.
	watching []string
	// at is the shown snapshot's time; base, when set (b), is what the figures are compared with.
	at   int64
	base *baseline
}

func newDepsModel(ctx *shared) depsModel { return depsModel{ctx: ctx} }

// depLegendLines are the lines under the table that define its columns.
const depLegendLines = 3

func (m *depsModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.cur.setHeight(h - 3 - depLegendLines) // headline, blank, column titles, legend
}

// SetSnapshot rebuilds the rows.
func (m *depsModel) SetSnapshot(s *engine.Snapshot) {
	m.at = s.AtUnixNano
	deps := s.Report.Dependencies
	// The breaker state is not in the report; the latest attempt to each dependency says whether
	// calls are being refused right now (refused = a breaker or budget said no). The analyzer
	// keeps it per dependency (Snapshot.LastAttempts): nothing of the operations is read back.
	// A refusal counts whether or not a call went out: an open breaker refuses before the call,
	// so a client that records only the operation leaves no refused call in the outcomes.
	m.all = m.all[:0]
	m.anyBreaker = false
	added := addedByDependency(s.Report.Costs)
	for i := range deps {
		d := &deps[i]
		r := depRow{d: d, history: s.History[d.Dependency], label: d.Dependency, added: cmp.Or(added[d.Dependency], "-")}
		if d.Service != "" && !strings.Contains(d.Dependency, d.Service) {
			r.label += " (" + d.Service + ")"
		}
		r.errShare, r.errText = errorShare(d.Outcomes)
		if l := s.LastAttempts[d.Dependency]; l.Refused {
			r.breaker = "was open"
			if l.RefusedStartUnixNano >= l.StartUnixNano {
				r.breaker = "open"
			}
		}
		if _, ok := d.Outcomes["refused"]; ok && r.breaker == "" {
			r.breaker = "refusing"
		}
		r.callerTxt = strings.Join(d.Callers, ", ")
		if r.breaker != "" {
			m.anyBreaker = true
		}
		m.all = append(m.all, r)
	}
	// The worst is the highest amplification above 1, whatever the sort or filter.
	worst, wv := -1, 1.0
	for i := range m.all {
		if a := m.all[i].d.Amplification; a > wv {
			worst, wv = i, a
		}
	}
	if worst >= 0 {
		m.all[worst].worst = true
	}
	m.watching = watchingText(s)
	m.rebuild()
}

// setHistory gives the rows the sparklines of s, a snapshot whose only change is its history.
func (m *depsModel) setHistory(s *engine.Snapshot) {
	for i := range m.all {
		m.all[i].history = s.History[m.all[i].d.Dependency]
	}
	for i := range m.rows {
		m.rows[i].history = s.History[m.rows[i].d.Dependency]
	}
}

// watchingText explains a quiet screen: traffic is arriving (or settling) and no detector has
// anything to say. It names what is watched and the shapes a storm takes, with the defaults.
func watchingText(s *engine.Snapshot) []string {
	if len(s.Report.Findings) > 0 {
		return nil
	}
	callers := map[string]bool{}
	for i := range s.Report.Dependencies {
		for _, c := range s.Report.Dependencies[i].Callers {
			callers[c] = true
		}
	}
	analyzed := "  " + words.Count(s.Report.Input.Traces, "trace") + " analyzed"
	if n := s.Stats.PendingTraces; n > 0 {
		analyzed += ", " + humanInt(n) + " settling"
	}
	return []string{
		fmt.Sprintf("  No storm so far. Watching %s called by %s:",
			words.Plural(len(s.Report.Dependencies), "dependency", "dependencies"), words.Count(len(callers), "service")),
		analyzed + " (a trace is analyzed after --settle of quiet).",
		"  A storm: a dependency getting many calls per intent. Findings (screen 3) for:",
		"    retry-amplification    2+ layers retry one request: 3 x 3 x 3 = 27 calls",
		"    retry-budget-exceeded  retries over 10% of first attempts, caller -> dep",
		"    no-backoff, unbounded-retries  retries with no pause, or over 5 attempts",
		"  (the defaults; a --policy file changes them)",
	}
}

// errorShare is the share of outcomes that are not a success, and a short text naming the commonest
// failure, e.g. "75% 503".
func errorShare(outcomes map[string]int) (float64, string) {
	total, bad, kinds := 0, 0, 0
	top, topN := "", 0
	for k, n := range outcomes {
		total += n
		if isOKOutcome(k) || n == 0 {
			continue
		}
		bad += n
		kinds++
		if n > topN || (n == topN && k < top) {
			top, topN = k, n
		}
	}
	if total == 0 || bad == 0 {
		return 0, "-"
	}
	share := float64(bad) / float64(total)
	text := fmt.Sprintf("%.0f%% %s", share*100, top)
	if kinds > 1 {
		text += fmt.Sprintf(" +%d", kinds-1) // more failure kinds: the Operations screen has them
	}
	return share, text
}

func isOKOutcome(k string) bool {
	switch k {
	case "ok", "OK":
		return true
	}
	if n, err := strconv.Atoi(k); err == nil {
		return n >= 200 && n < 400
	}
	return false
}

func (m *depsModel) setFilter(s string) {
	m.filter = parseFilter(s)
	m.rebuild()
}

func (m *depsModel) rebuild() {
	m.rows = m.rows[:0]
	for i := range m.all {
		r := &m.all[i]
		text := []string{r.d.Dependency, r.d.Service, r.callerTxt}
		ok := m.filter.matches(text, func(k string) ([]string, bool) {
			switch k {
			case "dependency":
				// The name, or any address it was reached at (a URL pasted from a log).
				return append([]string{r.d.Dependency}, r.d.Origins...), true
			case "service":
				return []string{r.d.Service}, true
			case "caller":
				return r.d.Callers, true
			}
			return nil, false
		})
		if ok {
			m.rows = append(m.rows, *r)
		}
	}
	less := func(a, b *depRow) bool {
		switch m.sort {
		case depByCalls:
			return a.d.PhysicalCalls > b.d.PhysicalCalls
		case depByLogical:
			return a.d.LogicalOperations > b.d.LogicalOperations
		case depByErrors:
			return a.errShare > b.errShare
		case depByName:
			return a.d.Dependency < b.d.Dependency
		}
		return a.d.Amplification > b.d.Amplification
	}
	sort.SliceStable(m.rows, func(i, j int) bool {
		if m.reverse {
			return less(&m.rows[j], &m.rows[i])
		}
		return less(&m.rows[i], &m.rows[j])
	})
	m.cur.setLen(len(m.rows))
}

func (m depsModel) Update(msg tea.Msg) (depsModel, tea.Cmd) {
	k := m.ctx.keys
	if m.cur.navigate(k, msg) {
		return m, nil
	}
	if msg, ok := msg.(tea.KeyMsg); ok {
		switch {
		case key.Matches(msg, k.Sort):
			m.sort = (m.sort + 1) % depSortCount
			m.rebuild()
		case key.Matches(msg, k.Reverse):
			m.reverse = !m.reverse
			m.rebuild()
		case key.Matches(msg, k.Baseline):
			m.base = newBaseline(m.at, m.all)
			return m, func() tea.Msg {
				return statusMsg("baseline marked: the figures now show the change since this moment (B clears)")
			}
		case key.Matches(msg, k.ClearBaseline):
			if m.base == nil {
				return m, nil
			}
			m.base = nil
			return m, func() tea.Msg { return statusMsg("baseline cleared") }
		case key.Matches(msg, k.Enter):
			if m.cur.pos < len(m.rows) {
				dep := m.rows[m.cur.pos].d.Dependency
				return m, func() tea.Msg { return showOpsMsg{filter: "dependency=" + dep} }
			}
		}
	}
	return m, nil
}

var depCols = []column{
	{title: "", width: 2},
	{title: "DEPENDENCY"},
	{title: "CALLS", width: 7, right: true},
	{title: "INTENTS", width: 7, right: true},
	{title: "AMPLIF", width: 8, right: true},
	{title: "ADDED", width: 7, right: true},
	{title: "ERRORS", width: 15},
	{title: "BREAKER", width: 8},
	{title: "TREND", width: 12},
}

// depAddedCol is the latency retries added (p99 per request that called the dependency), the
// column before the errors.
const depTrendCol, depBreakerCol, depAddedCol, depErrorsCol = 8, 7, 5, 6

// sinceCols replace the trend while a baseline is set: the comparison over time is what the
// baseline gives.
var sinceCols = []column{
	{title: "+CALLS", width: 7, right: true},
	{title: "+INTENTS", width: 8, right: true},
	{title: "SINCE b", width: 17},
}

// columns lays out the table for the current width, breakers and baseline.
func (m depsModel) columns() []column {
	narrow := m.width < 100
	spec := append([]column(nil), depCols...)
	if narrow {
		spec[depErrorsCol].width, spec[depTrendCol].width = 12, 8
	}
	// The breaker column only takes room when some dependency has refused calls.
	if !m.anyBreaker {
		spec[depBreakerCol].width = 0
		spec[depBreakerCol].title = ""
		spec[depBreakerCol].weight = -1
	}
	if m.base != nil {
		spec = append(spec[:depTrendCol], sinceCols...)
		if narrow {
			// What changed matters more here than the error share, which the findings keep, and
			// the added latency, which the costs keep.
			spec[depErrorsCol].width, spec[depErrorsCol].title, spec[depErrorsCol].weight = 0, "", -1
			spec[depAddedCol].width, spec[depAddedCol].title, spec[depAddedCol].weight = 0, "", -1
		}
	}
	return layout(spec, m.width)
}

// sameTrend reports whether the sparklines would look the same with s's history: each row shows
// the last values that fit its trend column (none while a baseline replaces the trend), so an
// idle history that only shifts in empty intervals past a flat window draws the same table.
func (m depsModel) sameTrend(s *engine.Snapshot) bool {
	if m.base != nil {
		return true
	}
	w := m.columns()[depTrendCol].width
	for i := range m.all { // every row, not only those the filter shows: a new filter shows them
		if !slices.Equal(lastN(m.all[i].history, w), lastN(s.History[m.all[i].d.Dependency], w)) {
			return false
		}
	}
	return true
}

func lastN(v []float64, n int) []float64 { return v[len(v)-min(n, len(v)):] }

func (m depsModel) View() string {
	t := &m.ctx.theme
	narrow := m.width < 100
	cols := m.columns()
	lines := make([]string, 0, m.height)

	// The headline answers the first question before the table is read; the callers go first
	// when the line is too long, then the scheme, so the figures are never cut.
	head := t.Dim.Render("No dependency is amplified: every intent made one call.")
	for i := range m.all {
		if r := &m.all[i]; r.worst {
			figures := fmt.Sprintf(" saw %s for %s (%.2fx)", words.Count(r.d.PhysicalCalls, "call"),
				words.Count(r.d.LogicalOperations, "intent"), r.d.Amplification)
			head = t.Worst.Render("▲ WORST "+r.label+figures) + t.Dim.Render("  callers: "+r.callerTxt)
			if o := r.d.OriginsText(); o != "" && r.callerTxt != "" {
				// The addresses are detail: shown when the line has room for them.
				if h := head + t.Dim.Render("  at "+o); ansi.StringWidth(h) <= m.width {
					head = h
				}
			}
			if r.callerTxt == "" || ansi.StringWidth(head) > m.width {
				head = t.Worst.Render("▲ WORST " + r.label + figures)
			}
			if ansi.StringWidth(head) > m.width {
				head = t.Worst.Render("▲ WORST " + shortURL(r.label, true) + figures)
			}
			break
		}
	}
	if m.base != nil {
		head = t.Bold.Render(m.base.headline(m.at, m.all, m.width))
	}
	lines = append(lines, fit(head, m.width), "")

	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	sortIdx := map[depSort]int{depByAmplification: 4, depByCalls: 2, depByLogical: 3, depByErrors: depErrorsCol, depByName: 1}[m.sort]
	titles[sortIdx] += sortArrow(m.reverse)
	lines = append(lines, t.Dim.Render(row(cols, titles...)))

	switch {
	case len(m.all) == 0:
		lines = append(lines, t.Dim.Render("  no dependencies yet: a trace is analyzed once it has been quiet for the settle period (--settle)"))
	case len(m.rows) == 0:
		lines = append(lines, t.Dim.Render("  nothing matches the filter"))
	}
	from, to := m.cur.window()
	// The names on screen are cut together, so that two rows never read the same.
	shown := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		shown = append(shown, shortURL(m.rows[i].label, narrow))
	}
	shown = cutDistinct(shown, cols[1].width)
	for i := from; i < to; i++ {
		r := &m.rows[i]
		// The cursor has the first cell and the marker the second, so the cursor never hides it.
		mark := "  "
		switch {
		case r.worst:
			mark = " ▲"
		case r.d.Amplification >= 1.5:
			mark = " !"
		}
		if i == m.cur.pos {
			_, rest := utf8.DecodeRuneInString(mark)
			mark = ">" + mark[rest:]
		}
		ampl := fmt.Sprintf("%.2fx", r.d.Amplification)
		cells := []string{mark, shown[i-from], humanInt(r.d.PhysicalCalls), humanInt(r.d.LogicalOperations),
			ampl, r.added, r.errText, r.breaker}
		if m.base != nil {
			c, l, a := m.base.since(r.d).cells()
			cells = append(cells, c, l, a)
		} else {
			cells = append(cells, sparkline(r.history, cols[depTrendCol].width))
		}
		line := row(cols, cells...)
		switch {
		case i == m.cur.pos:
			line = t.Rows.Selected.Render(line)
		case r.worst:
			line = t.Rows.Worst.Render(line)
		case r.d.Amplification >= 1.5:
			line = t.Rows.Warn.Render(line)
		}
		lines = append(lines, line)
	}
	if len(m.watching) > 0 && m.filter.empty() && len(lines)+1+len(m.watching) <= m.height-depLegendLines {
		lines = append(lines, "")
		for _, l := range m.watching {
			lines = append(lines, fit(t.Dim.Render(l), m.width))
		}
	}
	body := padLines(lines, m.height-depLegendLines)
	return body + "\n" + m.legend()
}

// legend defines the columns under the table, in two lines: the words first, as the numbers in
// the other screens count something else (operations at every layer, findings).
func (m depsModel) legend() string {
	t := &m.ctx.theme
	defs := []string{
		"CALLS requests it received · INTENTS what the top layer asked, once however many layers retried",
		"AMPLIF = CALLS / INTENTS · ▲ worst, ! over 1.5x · sorted by " + depSortNames[m.sort] + " · enter: its operations",
	}
	if m.width < 96 {
		defs = []string{
			"CALLS received · INTENTS asked by the top layer, once however often retried",
			"AMPLIF = CALLS/INTENTS · ▲ worst ! over 1.5x · by " + depSortNames[m.sort] + " · enter: its ops",
		}
	}
	if m.base != nil {
		defs = []string{
			"+CALLS, +INTENTS: added since the baseline (b) · B clears it",
			"SINCE b: amplification at the baseline → of the traffic since · sorted by " + depSortNames[m.sort],
		}
	}
	added := "ADDED p99 of the latency its retries added to a request: failed attempts and pauses on the request's critical path"
	if m.width < 96 {
		added = "ADDED p99 latency its retries added to a request (failed tries + pauses)"
	}
	return fit(t.Dim.Render(defs[0]), m.width) + "\n" + fit(t.Dim.Render(defs[1]), m.width) + "\n" + fit(t.Dim.Render(added), m.width)
}

func sortArrow(reverse bool) string {
	if reverse {
		return "▲"
	}
	return "▼"
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the last w values right-aligned (now is always the right edge), scaled from
// 1.0 (no amplification) to the largest; an interval without calls (0) is a blank.
func sparkline(vals []float64, w int) string {
	if len(vals) == 0 || w <= 0 {
		return ""
	}
	if len(vals) > w {
		vals = vals[len(vals)-w:]
	}
	lo, hi := 1.0, 1.0
	for _, v := range vals {
		if v > hi {
			hi = v
		}
	}
	out := make([]rune, w)
	for i := range out {
		out[i] = ' '
	}
	pad := w - len(vals)
	for i, v := range vals {
		if v <= 0 {
			continue
		}
		idx := 0
		if hi > lo {
			idx = int((v - lo) / (hi - lo) * float64(len(sparks)-1))
		}
		if idx < 0 {
			idx = 0
		}
		if idx >= len(sparks) {
			idx = len(sparks) - 1
		}
		out[pad+i] = sparks[idx]
	}
	return string(out)
}

// addedByDependency is each dependency's ADDED cell: the p99 of the latency retries toward it
// added to the requests that called it (docs/costs.md), "-" when they added none.
func addedByDependency(cs []analyzer.CostEntry) map[string]string {
	out := make(map[string]string, len(cs))
	for i := range cs {
		if e := &cs[i]; e.Kind == analyzer.CostDependency {
			out[e.Dependency] = "-"
			if e.AddedLatencyMs.P99 > 0 {
				out[e.Dependency] = render.Ms(e.AddedLatencyMs.P99)
			}
		}
	}
	return out
}
