package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// spanAnn is what the waterfall knows about one span beyond the span itself, computed once when the
// trace is opened.
type spanAnn struct {
	op      *analyzer.Operation // the operation whose own span this is
	att     *analyzer.Attempt   // the attempt this CLIENT span is a physical call of
	attOp   *analyzer.Operation
	fanIdx  int // 1-based position among the attempt's calls
	fanOf   int
	finding bool // named by a finding
	focus   bool // the spans the user came here to see
	err     bool
	late    bool // started after a deadline that applies to it
	parent  int  // index of the parent in the display order, -1 at a root
	end     int  // one past the last index of the subtree
	// path are the stretches of a request's critical path this span has (analyzer/cost).
	path []cost.Segment
}

// traceModel is the waterfall of one trace.
type traceModel struct {
	ctx       *shared
	snap      *engine.Snapshot
	view      *engine.TraceView
	ann       []spanAnn
	collapsed []bool
	visible   []int // indices into view.Spans of the rows not hidden by a collapse
	cur       cursor
	search    filter
	match     []bool
	nMatches  int
	t0, t1    int64
	deadline  int64
	late      int
	// parts are the critical paths' time by part (engine.TraceView.Path).
	parts  cost.Parts
	width  int
	height int
}

const traceHeadLines = 3

func newTraceModel(ctx *shared) traceModel { return traceModel{ctx: ctx} }

func (m *traceModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.cur.setHeight(h - traceHeadLines)
}

func (m *traceModel) unload() {
	m.view, m.ann, m.visible, m.collapsed, m.match = nil, nil, nil, nil, nil
	m.cur.setLen(0)
}

// load opens v with the cursor on the first of focus (the spans a finding names, or an operation's
// span).
func (m *traceModel) load(v *engine.TraceView, snap *engine.Snapshot, focus []spans.SpanID) {
	m.view, m.snap = v, snap
	n := len(v.Spans)
	m.ann = make([]spanAnn, n)
	m.collapsed = make([]bool, n)
	m.search = filter{}
	m.match = nil
	m.nMatches = 0
	index := make(map[spans.SpanID]int, n)
	for i := range v.Spans {
		index[v.Spans[i].SpanID] = i
	}

	// Parents and subtree ends from the display order (parents first, depth given).
	var stack []int
	for i := 0; i < n; i++ {
		d := depthAt(v, i)
		for len(stack) > 0 && depthAt(v, stack[len(stack)-1]) >= d {
			m.ann[stack[len(stack)-1]].end = i
			stack = stack[:len(stack)-1]
		}
		m.ann[i].parent = -1
		if len(stack) > 0 {
			m.ann[i].parent = stack[len(stack)-1]
		}
		stack = append(stack, i)
		s := &v.Spans[i]
		m.ann[i].err = s.Status == spans.StatusError
		if i == 0 || s.StartUnixNano < m.t0 {
			m.t0 = s.StartUnixNano
		}
		if i == 0 || s.EndUnixNano > m.t1 {
			m.t1 = s.EndUnixNano
		}
	}
	for _, j := range stack {
		m.ann[j].end = n
	}

	// Operations and their attempts; the top-most known deadline is the one drawn.
	m.deadline = 0
	topDepth := -1
	for _, op := range v.Operations {
		if i, ok := index[op.SpanID]; ok {
			m.ann[i].op = op
			if op.DeadlineUnixNano > 0 && (topDepth < 0 || depthAt(v, i) < topDepth) {
				topDepth, m.deadline = depthAt(v, i), op.DeadlineUnixNano
			}
		}
		for ai := range op.Attempts {
			a := &op.Attempts[ai]
			calls := a.Calls
			if len(calls) == 0 {
				calls = []spans.SpanID{a.SpanID}
			}
			for ci, c := range calls {
				if i, ok := index[c]; ok {
					m.ann[i].att, m.ann[i].attOp = a, op
					m.ann[i].fanIdx, m.ann[i].fanOf = ci+1, len(calls)
				}
			}
		}
	}
	if m.deadline == 0 {
		for _, op := range v.Operations {
			if op.DeadlineUnixNano > 0 && (m.deadline == 0 || op.DeadlineUnixNano < m.deadline) {
				m.deadline = op.DeadlineUnixNano
			}
		}
	}
	// A span is late when it started after the deadline of an operation it runs under.
	m.late = 0
	for _, op := range v.Operations {
		p, ok := index[op.SpanID]
		if !ok || op.DeadlineUnixNano == 0 {
			continue
		}
		for i := p + 1; i < m.ann[p].end; i++ {
			if v.Spans[i].StartUnixNano > op.DeadlineUnixNano && !m.ann[i].late {
				m.ann[i].late = true
				m.late++
			}
		}
	}
	for _, f := range v.Findings {
		for _, id := range parseSpanIDs(f.SpanIDs) {
			if i, ok := index[id]; ok {
				m.ann[i].finding = true
			}
		}
	}
	first := -1
	for _, id := range focus {
		if i, ok := index[id]; ok {
			m.ann[i].focus = true
			if first < 0 || i < first {
				first = i
			}
		}
	}
	m.parts = cost.Parts{}
	for _, s := range v.Path {
		if int(s.Span) < n {
			m.ann[s.Span].path = append(m.ann[s.Span].path, s)
		}
		switch s.Part {
		case cost.PartFailed:
			m.parts.Failed += s.To - s.From
		case cost.PartPause:
			m.parts.Paused += s.To - s.From
		case cost.PartHedge:
			m.parts.Hedged += s.To - s.From
		default:
			m.parts.Rest += s.To - s.From
		}
	}
	m.rebuildVisible()
	m.cur.set(0)
	if first >= 0 {
		m.goTo(first)
	}
}

func depthAt(v *engine.TraceView, i int) int {
	if i < len(v.Depth) {
		return v.Depth[i]
	}
	return 0
}

func (m *traceModel) rebuildVisible() {
	m.visible = m.visible[:0]
	for i := 0; i < len(m.ann); {
		m.visible = append(m.visible, i)
		if m.collapsed[i] {
			i = m.ann[i].end
		} else {
			i++
		}
	}
	m.cur.setLen(len(m.visible))
}

// selectedIndex is the span under the cursor, -1 when none.
func (m traceModel) selectedIndex() int {
	if m.cur.pos < len(m.visible) {
		return m.visible[m.cur.pos]
	}
	return -1
}

// goTo puts the cursor on span i, expanding whatever hides it.
func (m *traceModel) goTo(i int) {
	changed := false
	for p := m.ann[i].parent; p >= 0; p = m.ann[p].parent {
		if m.collapsed[p] {
			m.collapsed[p] = false
			changed = true
		}
	}
	if changed {
		m.rebuildVisible()
	}
	// visible is sorted, so a binary search finds the row.
	lo, hi := 0, len(m.visible)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.visible[mid] < i {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	m.cur.set(lo)
	// Keep some context above the target rather than pinning it to the bottom edge.
	if m.cur.pos-m.cur.offset > m.cur.height*2/3 {
		m.cur.offset = m.cur.pos - m.cur.height/3
		m.cur.clamp()
	}
}

func (m *traceModel) setSearch(s string) {
	m.search = parseFilter(s)
	m.nMatches = 0
	if m.view == nil || m.search.empty() {
		m.match = nil
		return
	}
	m.match = make([]bool, len(m.view.Spans))
	for i := range m.view.Spans {
		sp := &m.view.Spans[i]
		if m.search.matches([]string{sp.Name, sp.Service(), sp.StatusMessage, sp.SpanID.String()},
			func(k string) ([]string, bool) { return spanField(sp, k) }) {
			m.match[i] = true
			m.nMatches++
		}
	}
}

// spanField answers key=value searches: a few names people type, then any span or resource
// attribute by its full key.
func spanField(sp *spans.Span, k string) ([]string, bool) {
	switch k {
	case "service":
		return []string{sp.Service()}, true
	case "name":
		return []string{sp.Name}, true
	case "kind":
		return []string{sp.Kind.String()}, true
	case "status":
		out := []string{sp.Status.String()}
		if v := sp.Str(spans.AttrHTTPStatus); v != "" {
			out = append(out, v)
		}
		return out, true
	case "span", "span_id":
		return []string{sp.SpanID.String()}, true
	case "instance":
		return []string{sp.Instance()}, true
	}
	if a, ok := sp.Attr(k); ok {
		return []string{a.AsString()}, true
	}
	if sp.Resource != nil {
		for _, a := range sp.Resource.Attrs {
			if a.Key == k {
				return []string{a.AsString()}, true
			}
		}
	}
	return nil, false
}

// nextMatch moves to the next (d=1) or previous (d=-1) search hit; inclusive counts the current row.
func (m *traceModel) nextMatch(d int, inclusive bool) bool {
	return m.seek(d, inclusive, func(i int) bool { return m.match != nil && m.match[i] })
}

func (m *traceModel) nextProblem(d int) bool {
	return m.seek(d, false, func(i int) bool { a := &m.ann[i]; return a.finding || a.err || a.late })
}

// seek walks the whole trace (collapsed parts included) from the cursor, wrapping around.
func (m *traceModel) seek(d int, inclusive bool, ok func(int) bool) bool {
	n := len(m.ann)
	if n == 0 {
		return false
	}
	start := m.selectedIndex()
	if start < 0 {
		start = 0
	}
	for step := 0; step < n; step++ {
		k := step
		if !inclusive {
			k++
		}
		i := ((start+d*k)%n + n) % n
		if ok(i) {
			m.goTo(i)
			return true
		}
	}
	return false
}

func (m traceModel) Update(msg tea.Msg) (traceModel, tea.Cmd) {
	if m.view == nil {
		return m, nil
	}
	k := m.ctx.keys
	if m.cur.navigate(k, msg) {
		return m, nil
	}
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return m, nil
	}
	i := m.selectedIndex()
	switch {
	case key.Matches(km, k.Enter):
		if i >= 0 {
			return m, func() tea.Msg { return openSpanMsg{index: i} }
		}
	case key.Matches(km, k.Collapse):
		if i < 0 {
			break
		}
		if m.ann[i].end > i+1 && !m.collapsed[i] {
			m.collapsed[i] = true
			m.rebuildVisible()
			m.goTo(i)
		} else if p := m.ann[i].parent; p >= 0 {
			m.goTo(p)
		}
	case key.Matches(km, k.Expand):
		if i < 0 {
			break
		}
		if m.collapsed[i] {
			m.collapsed[i] = false
			m.rebuildVisible()
			m.goTo(i)
		} else if m.ann[i].end > i+1 {
			m.goTo(i + 1)
		}
	case key.Matches(km, k.NextMatch):
		if !m.nextMatch(1, false) {
			return m, status("no search matches: / to search")
		}
	case key.Matches(km, k.PrevMatch):
		if !m.nextMatch(-1, false) {
			return m, status("no search matches: / to search")
		}
	case key.Matches(km, k.NextProblem):
		if !m.nextProblem(1) {
			return m, status("no findings, errors or late spans in this trace")
		}
	case key.Matches(km, k.PrevProblem):
		if !m.nextProblem(-1) {
			return m, status("no findings, errors or late spans in this trace")
		}
	}
	return m, nil
}

func status(s string) tea.Cmd { return func() tea.Msg { return statusMsg(s) } }

// Widths of the waterfall's fixed columns.
const (
	trFlagW   = 2
	trDurW    = 7
	trStatusW = 24
)

func (m traceModel) View() string {
	t := &m.ctx.theme
	v := m.view
	if v == nil {
		return padLines([]string{"", "  No trace open. Press enter on an operation or a finding."}, m.height)
	}
	lines := make([]string, 0, m.height)

	// Line 1: what this trace is.
	info := fmt.Sprintf("trace %s  %s · %s · %s", v.TraceID, words.Count(len(v.Spans), "span"),
		words.Count(len(v.Operations), "operation"), words.Count(len(v.Findings), "finding"))
	if m.late > 0 {
		info += fmt.Sprintf(" · %d late", m.late)
	}
	if p := m.parts; p.Added() > 0 {
		// Where the line has room: the waterfall's shading says it too.
		more := fmt.Sprintf(" · retries added %s of %s", fmtDur(time.Duration(p.Added())), fmtDur(time.Duration(p.Sum())))
		if ansi.StringWidth(info+more) <= m.width {
			info += more
		}
	}
	if v.Truncated {
		info += " · TRUNCATED"
	}
	if !m.search.empty() {
		info += fmt.Sprintf(" · %d match %q", m.nMatches, m.search.raw)
	}
	lines = append(lines, fit(t.Bold.Render(info), m.width))

	// Line 2: the amplification product, the answer to "who multiplies the load".
	lines = append(lines, fit(layersLine(t, v, m.width), m.width))

	statusW := trStatusW
	if m.width < 100 {
		statusW = trStatusW - 4
	}
	nameW := m.width - trFlagW - trDurW - statusW - 3
	barW := max(nameW*2/5, 10)
	if m.width < 100 {
		barW = max(nameW/3, 10)
	}
	nameW -= barW + 1
	tEnd := m.t1
	if m.deadline > tEnd && m.deadline-m.t0 <= 2*(m.t1-m.t0) {
		tEnd = m.deadline
	}
	span := tEnd - m.t0
	if span <= 0 {
		span = 1
	}
	dlCol := -1
	if m.deadline > 0 && m.deadline <= tEnd {
		dlCol = int((m.deadline - m.t0) * int64(barW) / span)
		if dlCol >= barW {
			dlCol = barW - 1
		}
	}

	// Line 3: column titles and the time axis.
	axis := []rune(strings.Repeat(" ", barW))
	total := fmtDur(time.Duration(tEnd - m.t0))
	copy(axis[barW-len([]rune(total)):], []rune(total))
	axis[0] = '0'
	if dlCol >= 0 {
		axis[dlCol] = '┃'
	}
	head := fit("", trFlagW) + fit("SPAN", nameW) + " " + fitLeft("DUR", trDurW) + " " + fit("ATTEMPT / OUTCOME", statusW) + " " + string(axis)
	if dlCol >= 0 {
		head = fit("", trFlagW) + fit(fmt.Sprintf("SPAN  (┃ deadline at +%s)", fmtDur(time.Duration(m.deadline-m.t0))), nameW) +
			" " + fitLeft("DUR", trDurW) + " " + fit("ATTEMPT / OUTCOME", statusW) + " " + string(axis)
	}
	lines = append(lines, t.Dim.Render(fit(head, m.width)))

	from, to := m.cur.window()
	for r := from; r < to; r++ {
		i := m.visible[r]
		lines = append(lines, m.rowView(i, r == m.cur.pos, nameW, statusW, barW, dlCol, span))
	}
	return padLines(lines, m.height)
}

func layersLine(t *Theme, v *engine.TraceView, w int) string {
	if len(v.Layers) == 0 {
		return t.Dim.Render("no layer retried in this trace: every operation made one attempt")
	}
	nums := make([]string, len(v.Layers))
	prod := 1
	for i, l := range v.Layers {
		nums[i] = strconv.Itoa(l.Attempts)
		prod *= l.Attempts
	}
	dep := v.LeafDependency
	if dep == "" {
		dep = "the leaf dependency"
	}
	s := fmt.Sprintf("%s = %d calls to %s", strings.Join(nums, " x "), prod, dep)
	if len(v.Layers) == 1 {
		s = fmt.Sprintf("one retrying layer: %d calls to %s", prod, dep)
	}
	style := t.Warn
	if len(v.Layers) > 1 {
		style = t.Crit
	}
	full := style.Render(s) + t.Dim.Render("   layers: ") + render.Layers(v.Layers)
	if w > 0 && ansi.StringWidth(full) > w {
		// Narrow: the chain without its label, the dependency without its scheme.
		s = strings.Replace(s, dep, shortURL(dep, true), 1)
		return style.Render(s) + "  " + render.Layers(v.Layers)
	}
	return full
}

func (m traceModel) rowView(i int, selected bool, nameW, statusW, barW, dlCol int, span int64) string {
	t := &m.ctx.theme
	v := m.view
	sp := &v.Spans[i]
	a := &m.ann[i]

	cursorMark := " "
	switch {
	case selected:
		cursorMark = ">"
	case m.match != nil && m.match[i]:
		cursorMark = "*"
	}
	flag := " "
	switch {
	case a.finding || a.focus:
		flag = "◆"
	case a.err:
		flag = "✗"
	case a.late:
		flag = "†"
	}

	// Name: indented by depth; the service is named where it changes, so layers stand out.
	depth := depthAt(v, i)
	indent := depth
	if indent > 16 {
		indent = 16
	}
	var name strings.Builder
	name.WriteString(strings.Repeat(" ", indent))
	switch {
	case m.collapsed[i]:
		fmt.Fprintf(&name, "▸[%d] ", a.end-i-1)
	case a.end > i+1:
		name.WriteString("▾ ")
	default:
		name.WriteString("  ")
	}
	svc := sp.Service()
	if p := a.parent; p < 0 || v.Spans[p].Service() != svc {
		name.WriteString(svc + ": ")
	}
	if a.fanOf > 1 {
		// Fan-out is about where the copies went: the origin says more than the span name.
		fmt.Fprintf(&name, "fan-out %d/%d → %s", a.fanIdx, a.fanOf, orDash(spanOrigin(sp)))
	} else {
		name.WriteString(sp.Name)
	}

	// Attempt / outcome.
	var st string
	switch {
	case a.att != nil:
		n := len(a.attOp.Attempts)
		st = fmt.Sprintf("#%d/%d %s %s", a.att.Number, n, a.att.Kind, attemptOutcome(a.att))
	case a.op != nil:
		term := a.op.Terminal
		if term == "" {
			term = a.op.StopReason
		}
		st = fmt.Sprintf("op %d att → %s", len(a.op.Attempts), term)
	case a.err:
		st = "error"
		if c := sp.Str(spans.AttrHTTPStatus); c != "" {
			st += " " + c
		}
	}
	if a.late {
		st = "LATE " + st
	}

	// The bar, with the deadline line drawn through the column.
	bar := []rune(strings.Repeat(" ", barW))
	s := int((sp.StartUnixNano - m.t0) * int64(barW) / span)
	e := int((sp.EndUnixNano - m.t0) * int64(barW) / span)
	if s < 0 {
		s = 0
	}
	if s >= barW {
		s = barW - 1
	}
	if e <= s {
		e = s + 1
	}
	if e > barW {
		e = barW
	}
	glyph := '█'
	switch {
	case a.late:
		glyph = '░'
	case a.err:
		glyph = '▒'
	}
	// Off a request's critical path the span's time is a low bar; on it, full, and shaded by what
	// it was spent on: ▓ a failed attempt that was retried, ┄ a pause between attempts, ▚ a
	// losing hedge.
	if len(m.view.Path) > 0 && glyph == '█' {
		glyph = '▁'
	}
	for c := s; c < e; c++ {
		bar[c] = glyph
	}
	styles := make([]int8, barW) // 0 the span's own, 1 failed or hedge, 2 pause
	for _, seg := range a.path {
		ps := int((seg.From - m.t0) * int64(barW) / span)
		pe := int((seg.To - m.t0) * int64(barW) / span)
		// Within the span's own bar: a stretch of a callee moved by clock skew (analyzer/cost)
		// stays on its row's bar.
		ps = min(max(ps, s), e-1)
		pe = min(max(pe, ps+1), e)
		g, st := '█', int8(0)
		switch seg.Part {
		case cost.PartFailed:
			g, st = '▓', 1
		case cost.PartPause:
			g, st = '┄', 2
		case cost.PartHedge:
			g, st = '▚', 1
		}
		for c := ps; c < pe; c++ {
			bar[c], styles[c] = g, st
		}
	}
	if dlCol >= 0 && bar[dlCol] == ' ' {
		bar[dlCol] = '┊'
	}
	base := t.Rows.Bar
	switch {
	case a.late:
		base = t.Rows.BarLate
	case a.err:
		base = t.Rows.BarErr
	}
	var barB strings.Builder
	for c := 0; c < barW; {
		d := c + 1
		for d < barW && styles[d] == styles[c] {
			d++
		}
		run := string(bar[c:d])
		switch styles[c] {
		case 1:
			barB.WriteString(t.Rows.BarErr.Render(run))
		case 2:
			barB.WriteString(t.Rows.BarLate.Render(run))
		default:
			barB.WriteString(base.Render(run))
		}
		c = d
	}
	barStr := barB.String()

	left := cursorMark + flag + fit(name.String(), nameW) + " " + fitLeft(fmtDur(time.Duration(sp.DurationNanos())), trDurW) +
		" " + fit(st, statusW) + " "
	switch {
	case selected:
		left = t.Rows.Selected.Render(left)
	case m.match != nil && m.match[i]:
		left = t.Rows.Match.Render(left)
	case a.finding || a.err:
		left = t.Rows.Crit.Render(left)
	case a.late:
		left = t.Rows.Warn.Render(left)
	}
	return left + barStr
}

// spanOrigin is host:port of a CLIENT span's destination, from server.address/port or url.full.
func spanOrigin(sp *spans.Span) string {
	if h := sp.Str(spans.AttrServerAddress); h != "" {
		if p := sp.Str(spans.AttrServerPort); p != "" {
			return h + ":" + p
		}
		return h
	}
	u := sp.Str(spans.AttrURLFull)
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	return u
}
