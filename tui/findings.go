package tui

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// findEntry is a line of the findings list: a group (one detector at one caller -> dependency) or,
// under an expanded group, one of its findings.
type findEntry struct {
	g *analyzer.FindingGroup
	f *analyzer.Finding // nil on a group's line
}

// findingsModel lists findings grouped by detector and place, the most severe and largest groups
// first (analyzer.GroupFindings, as the reports group them), with the selected group's example
// evidence and suggested action below. A storm makes one finding per request; the group is the
// row to read, and l or → lists its findings.
type findingsModel struct {
	ctx      *shared
	all      []analyzer.Finding
	sel      []analyzer.Finding // those the filter keeps; the groups index into it
	groups   []analyzer.FindingGroup
	expanded map[groupKey]bool
	entries  []findEntry
	filter   filter
	reverse  bool
	cur      cursor
	width    int
	height   int
}

type groupKey struct{ det, caller, dep string }

func keyOf(g *analyzer.FindingGroup) groupKey { return groupKey{g.Detector, g.Caller, g.Dependency} }

const findDetailLines = 8

func newFindingsModel(ctx *shared) findingsModel {
	return findingsModel{ctx: ctx, expanded: map[groupKey]bool{}}
}

func (m *findingsModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.cur.setHeight(h - findDetailLines - 1) // and the column titles
}

func (m *findingsModel) SetSnapshot(s *engine.Snapshot) {
	m.all = s.Report.Findings
	m.rebuild()
}

func (m *findingsModel) setFilter(s string) {
	m.filter = parseFilter(s)
	m.rebuild()
}

func findingField(f *analyzer.Finding, k string) ([]string, bool) {
	switch k {
	case "detector":
		return []string{f.Detector}, true
	case "severity":
		return []string{f.Severity.String()}, true
	case "service", "caller", "owner":
		return []string{f.Service}, true
	case "dependency":
		return []string{f.Dependency}, true
	case "trace", "trace_id":
		return []string{f.TraceID}, true
	}
	if v, ok := f.Evidence[k]; ok {
		return []string{fmt.Sprint(v)}, true
	}
	return nil, false
}

func (m *findingsModel) rebuild() {
	m.sel = m.sel[:0]
	for i := range m.all {
		f := &m.all[i]
		if m.filter.matches([]string{f.Detector, f.Service, f.Dependency, f.Summary, f.TraceID},
			func(k string) ([]string, bool) { return findingField(f, k) }) {
			m.sel = append(m.sel, *f)
		}
	}
	var keep groupKey
	if e := m.current(); e != nil {
		keep = keyOf(e.g)
	}
	m.groups = analyzer.GroupFindings(m.sel)
	if m.reverse {
		slices.Reverse(m.groups)
	}
	m.entries = m.entries[:0]
	pos := -1
	for gi := range m.groups {
		g := &m.groups[gi]
		if keyOf(g) == keep && pos < 0 {
			pos = len(m.entries)
		}
		m.entries = append(m.entries, findEntry{g: g})
		if m.expanded[keyOf(g)] {
			for _, fi := range g.Findings {
				m.entries = append(m.entries, findEntry{g: g, f: &m.sel[fi]})
			}
		}
	}
	m.cur.setLen(len(m.entries))
	if pos >= 0 && (m.cur.pos >= len(m.entries) || m.entries[m.cur.pos].g != m.entries[pos].g) {
		// The selection follows its group when new findings reorder the list.
		m.cur.set(pos)
	}
}

func (m findingsModel) current() *findEntry {
	if m.cur.pos < len(m.entries) {
		return &m.entries[m.cur.pos]
	}
	return nil
}

// example is the finding the selected line stands for: its own, or its group's first.
func (m findingsModel) example() *analyzer.Finding {
	e := m.current()
	switch {
	case e == nil:
		return nil
	case e.f != nil:
		return e.f
	}
	return &m.sel[e.g.Findings[0]]
}

func (m findingsModel) Update(msg tea.Msg) (findingsModel, tea.Cmd) {
	k := m.ctx.keys
	if m.cur.navigate(k, msg) {
		return m, nil
	}
	if msg, ok := msg.(tea.KeyMsg); ok {
		switch {
		case key.Matches(msg, k.Sort), key.Matches(msg, k.Reverse):
			// One order makes sense here (the most severe, largest first); s and S flip it.
			m.reverse = !m.reverse
			m.rebuild()
		case key.Matches(msg, k.Expand):
			if e := m.current(); e != nil && e.f == nil {
				m.expanded[keyOf(e.g)] = true
				m.rebuild()
			}
		case key.Matches(msg, k.Collapse):
			if e := m.current(); e != nil {
				g := e.g
				delete(m.expanded, keyOf(g))
				m.rebuild()
				for i := range m.entries {
					if m.entries[i].g == g || keyOf(m.entries[i].g) == keyOf(g) {
						m.cur.set(i)
						break
					}
				}
			}
		case key.Matches(msg, k.Enter):
			if f := m.example(); f != nil {
				id, err := parseTraceID(f.TraceID)
				if err != nil {
					return m, func() tea.Msg { return statusMsg("this finding names no trace (it is about many of them)") }
				}
				focus := parseSpanIDs(f.SpanIDs)
				return m, func() tea.Msg { return openTraceMsg{trace: id, focus: focus} }
			}
		}
	}
	return m, nil
}

func parseTraceID(s string) (spans.TraceID, error) {
	var id spans.TraceID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("trace id %q is not 32 hex digits", s)
	}
	copy(id[:], b)
	return id, nil
}

func parseSpanIDs(ss []string) []spans.SpanID {
	var out []spans.SpanID
	for _, s := range ss {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != 8 {
			continue
		}
		var id spans.SpanID
		copy(id[:], b)
		out = append(out, id)
	}
	return out
}

func (m findingsModel) sevStyle(s analyzer.Severity, text string) string {
	t := &m.ctx.theme
	switch s {
	case analyzer.SeverityCritical:
		return t.Crit.Render(text)
	case analyzer.SeverityWarning:
		return t.Warn.Render(text)
	}
	return text
}

var findCols = []column{
	{title: "", width: 3},
	{title: "DETECTOR", width: 23},
	{title: "WHERE (caller → dependency)"},
	{title: "COUNT", width: 6, right: true},
	{title: "LAST", width: 8},
}

func (m findingsModel) View() string {
	t := &m.ctx.theme
	listH := m.height - findDetailLines
	cols := layout(findCols, m.width)
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	lines := make([]string, 0, m.height)
	lines = append(lines, t.Dim.Render(row(cols, titles...)))
	if len(m.entries) == 0 {
		if len(m.all) == 0 {
			lines = append(lines, t.Dim.Render("  no findings: nothing retries in a way the detectors object to (yet)"))
		} else {
			lines = append(lines, t.Dim.Render("  nothing matches the filter"))
		}
	}
	from, to := m.cur.window()
	for i := from; i < to; i++ {
		e := &m.entries[i]
		var line string
		if e.f == nil {
			g := e.g
			mark := " " + sevMark(g.Severity) + " "
			if i == m.cur.pos {
				mark = ">" + sevMark(g.Severity) + " "
			}
			path := render.Path(g, &m.sel[g.Findings[0]])
			if g.Dependency != "" {
				path[len(path)-1] = shortURL(g.Dependency, m.width < 100)
			}
			where := strings.Join(path, " → ")
			last := g.LastUnixNano
			if last == 0 { // a cross-trace finding: the end of the window it judged
				_, last = render.Window(&m.sel[g.Findings[0]])
			}
			line = row(cols, mark, g.Detector, where, humanInt(g.Count), clock(last))
		} else {
			f := e.f
			mark := "   "
			if i == m.cur.pos {
				mark = ">  "
			}
			line = fit(mark+"  └ trace "+shortID(f.TraceID)+"  "+clock(f.TimeUnixNano)+"  "+f.Summary, m.width)
		}
		switch {
		case i == m.cur.pos:
			line = t.Rows.Selected.Render(line)
		case e.f == nil && e.g.Severity == analyzer.SeverityCritical:
			line = t.Rows.Crit.Render(line)
		case e.f == nil && e.g.Severity == analyzer.SeverityWarning:
			line = t.Rows.Warn.Render(line)
		}
		lines = append(lines, line)
	}
	out := padLines(lines, listH)

	// The detail pane: what the selected group (or finding) proves and what to do about it. Long
	// summaries and actions wrap at words rather than lose their end, where the numbers often are.
	d := []string{t.Dim.Render(strings.Repeat("─", m.width))}
	field := func(label, text string, maxLines int) {
		ls := strings.Split(ansi.Wrap(text, m.width-10, " "), "\n")
		if len(ls) > maxLines {
			ls = ls[:maxLines]
			ls[maxLines-1] = fit(ls[maxLines-1]+" …", m.width-10)
		}
		for i, l := range ls {
			if i == 0 {
				d = append(d, fit(t.Dim.Render(fmt.Sprintf("%-10s", label))+l, m.width))
			} else {
				d = append(d, fit("          "+l, m.width))
			}
		}
	}
	if e, f := m.current(), m.example(); e != nil && f != nil {
		g := e.g
		d = append(d, fit(m.sevStyle(g.Severity, sevMark(g.Severity)+" "+g.Severity.String())+"  "+t.Bold.Render(g.Detector)+
			t.Dim.Render("  "+render.Place(g, &m.sel[g.Findings[0]])), m.width))
		if e.f == nil {
			count := words.Count(g.Count, "finding")
			if n := len(g.TraceIDs); n != g.Count {
				count += " in " + words.Count(n, "trace")
			}
			if tr := render.When(g, f); tr != "" {
				count += " · " + tr
			}
			field("count", count, 1)
		} else {
			field("trace", f.TraceID+" · "+clock(f.TimeUnixNano)+" · "+words.Count(len(f.SpanIDs), "span")+" named", 1)
		}
		label := "summary"
		if e.f == nil && g.Count > 1 {
			label = "example"
		}
		field(label, f.Summary, 2)
		field("evidence", render.Evidence(f.Evidence), 1)
		if ids, ok := f.Evidence["trace_ids"].Texts(); ok && len(ids) > 0 {
			// A cross-trace finding counts many traces; it cites one as its example.
			short := make([]string, len(ids))
			for i, id := range ids {
				short[i] = shortID(id)
			}
			text := strings.Join(short, " ")
			if n, ok := f.Evidence["traces"].Int(); ok && n > len(ids) {
				text += fmt.Sprintf(" (%d of %d)", len(ids), n)
			}
			field("traces", text+" · :trace ID opens one", 2)
		}
		field("action", f.Action, 2)
	} else {
		d = append(d, t.Dim.Render(words.Count(len(m.sel), "finding")+" in "+words.Count(len(m.groups), "group")+" · s: flip order"))
	}
	return out + "\n" + padLines(d, findDetailLines)
}

// clock is the time of day of a Unix-nanosecond time, UTC, as the reports print it; "" for none.
func clock(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format("15:04:05")
}

// shortID is the first 12 hex digits of an id: enough to tell traces apart on screen, and :trace
// takes a prefix.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

func sevMark(s analyzer.Severity) string {
	switch s {
	case analyzer.SeverityCritical:
		return "‼"
	case analyzer.SeverityWarning:
		return "!"
	}
	return "·"
}
