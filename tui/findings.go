package tui

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// findEntry is a line of the findings list: a group header (severity and detector) or a finding.
type findEntry struct {
	header bool
	sev    analyzer.Severity
	det    string
	count  int
	f      *analyzer.Finding
}

// findingsModel lists findings grouped by severity (worst first) and detector, with the selected
// one's evidence and suggested action below.
type findingsModel struct {
	ctx     *shared
	all     []analyzer.Finding
	entries []findEntry
	shownN  int
	filter  filter
	reverse bool
	cur     cursor
	width   int
	height  int
}

const findDetailLines = 7

func newFindingsModel(ctx *shared) findingsModel { return findingsModel{ctx: ctx} }

func (m *findingsModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.cur.setHeight(h - findDetailLines - 1)
}

func (m *findingsModel) SetSnapshot(s *analyzer.Snapshot) {
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
	var sel []*analyzer.Finding
	for i := range m.all {
		f := &m.all[i]
		if m.filter.matches([]string{f.Detector, f.Service, f.Dependency, f.Summary, f.TraceID},
			func(k string) ([]string, bool) { return findingField(f, k) }) {
			sel = append(sel, f)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		a, b := sel[i], sel[j]
		if a.Severity != b.Severity {
			return (a.Severity > b.Severity) != m.reverse
		}
		if a.Detector != b.Detector {
			return a.Detector < b.Detector
		}
		if a.Dependency != b.Dependency {
			return a.Dependency < b.Dependency
		}
		return a.TraceID < b.TraceID
	})
	m.shownN = len(sel)
	m.entries = m.entries[:0]
	for i := 0; i < len(sel); {
		j := i
		for j < len(sel) && sel[j].Severity == sel[i].Severity && sel[j].Detector == sel[i].Detector {
			j++
		}
		m.entries = append(m.entries, findEntry{header: true, sev: sel[i].Severity, det: sel[i].Detector, count: j - i})
		for _, f := range sel[i:j] {
			m.entries = append(m.entries, findEntry{f: f, sev: f.Severity, det: f.Detector})
		}
		i = j
	}
	m.cur.setLen(len(m.entries))
	m.skipHeader(1)
}

// skipHeader moves the cursor off a group header, in direction d.
func (m *findingsModel) skipHeader(d int) {
	for m.cur.pos >= 0 && m.cur.pos < len(m.entries) && m.entries[m.cur.pos].header {
		next := m.cur.pos + d
		if next < 0 || next >= len(m.entries) {
			d = -d
			next = m.cur.pos + d
			if next < 0 || next >= len(m.entries) {
				return
			}
		}
		m.cur.set(next)
	}
}

func (m findingsModel) selected() *analyzer.Finding {
	if m.cur.pos < len(m.entries) && !m.entries[m.cur.pos].header {
		return m.entries[m.cur.pos].f
	}
	return nil
}

func (m findingsModel) Update(msg tea.Msg) (findingsModel, tea.Cmd) {
	k := m.ctx.keys
	before := m.cur.pos
	if m.cur.navigate(k, msg) {
		d := 1
		if m.cur.pos < before {
			d = -1
		}
		m.skipHeader(d)
		return m, nil
	}
	if msg, ok := msg.(tea.KeyMsg); ok {
		switch {
		case key.Matches(msg, k.Sort), key.Matches(msg, k.Reverse):
			// One order makes sense here (by severity); s and S flip it so info can be read first.
			m.reverse = !m.reverse
			m.rebuild()
		case key.Matches(msg, k.Enter):
			if f := m.selected(); f != nil {
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

func (m findingsModel) View() string {
	t := &m.ctx.theme
	listH := m.height - findDetailLines - 1
	lines := make([]string, 0, m.height)
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
		if e.header {
			h := fmt.Sprintf("%s %s  %s (%d)", sevMark(e.sev), strings.ToUpper(e.sev.String()), e.det, e.count)
			lines = append(lines, fit(m.sevStyle(e.sev, h), m.width))
			continue
		}
		f := e.f
		mark := "   "
		if i == m.cur.pos {
			mark = " > "
		}
		where := f.Service
		if f.Dependency != "" {
			where += " → " + f.Dependency
		}
		line := fit(mark+fit(where, 34)+" "+f.Summary, m.width)
		if i == m.cur.pos {
			line = t.Selected.Render(line)
		}
		lines = append(lines, line)
	}
	out := padLines(lines, listH)

	// The detail pane: what the selected finding proves and what to do about it. Long summaries
	// and actions wrap rather than lose their end, which is where the numbers often are.
	d := []string{t.Dim.Render(strings.Repeat("─", m.width))}
	if f := m.selected(); f != nil {
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
		d = append(d, fit(m.sevStyle(f.Severity, sevMark(f.Severity)+" "+f.Severity.String())+"  "+t.Bold.Render(f.Detector)+
			t.Dim.Render(fmt.Sprintf("  %s → %s · trace %s · enter opens it at the %d spans named", f.Service, f.Dependency, f.TraceID, len(f.SpanIDs))), m.width))
		field("summary", f.Summary, 2)
		field("evidence", evidenceText(f.Evidence), 1)
		field("action", f.Action, 2)
	} else {
		d = append(d, t.Dim.Render(fmt.Sprintf("%d findings · grouped by severity and detector · s: flip order", m.shownN)))
	}
	return out + "\n" + padLines(d, findDetailLines)
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

// evidenceText prints evidence compactly, keys sorted, the layers chain as the TUI draws it.
func evidenceText(ev map[string]any) string {
	keys := make([]string, 0, len(ev))
	for k := range ev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+evidenceValue(ev[k]))
	}
	return strings.Join(parts, "  ")
}

func evidenceValue(v any) string {
	switch v := v.(type) {
	case []analyzer.Layer:
		return layerChain(v)
	case []map[string]any:
		if ls, ok := layersFromMaps(v); ok {
			return layerChain(ls)
		}
	case []any:
		maps := make([]map[string]any, 0, len(v))
		for _, x := range v {
			mm, ok := x.(map[string]any)
			if !ok {
				return fmt.Sprint(v)
			}
			maps = append(maps, mm)
		}
		if ls, ok := layersFromMaps(maps); ok {
			return layerChain(ls)
		}
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// layersFromMaps reads the retry-amplification evidence's layers, as the detector builds them or as
// they come back from JSON.
func layersFromMaps(ms []map[string]any) ([]analyzer.Layer, bool) {
	ls := make([]analyzer.Layer, 0, len(ms))
	for _, mm := range ms {
		svc, ok := mm["service"].(string)
		if !ok {
			return nil, false
		}
		var n int
		switch a := mm["attempts"].(type) {
		case float64:
			n = int(a)
		case int:
			n = a
		default:
			return nil, false
		}
		ls = append(ls, analyzer.Layer{Service: svc, Attempts: n})
	}
	return ls, true
}

func layerChain(ls []analyzer.Layer) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s x%d", l.Service, l.Attempts)
	}
	return strings.Join(parts, " → ")
}
