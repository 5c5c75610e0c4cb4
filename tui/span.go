package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
)

// spanModel shows one span in full. Its lines are plain "key = value" text without borders or
// truncation markers inside values, so selecting them with the mouse copies something usable.
type spanModel struct {
	ctx    *shared
	raw    []string // one per fact
	lines  []string // raw, wrapped to the width
	offset int
	width  int
	height int
}

func newSpanModel(ctx *shared) spanModel { return spanModel{ctx: ctx} }

func (m *spanModel) SetSize(w, h int) {
	m.width, m.height = w, h
	m.wrap()
}

// wrap breaks long values over several lines instead of cutting them: a truncated id or URL is
// worse than none when it is copied. Sentences break between words (a word longer than the line,
// an id or a URL, is cut where it must), and a labelled line continues under its value.
func (m *spanModel) wrap() {
	m.lines = m.lines[:0]
	for _, l := range m.raw {
		if m.width <= 0 || ansi.StringWidth(l) <= m.width {
			m.lines = append(m.lines, l)
			continue
		}
		label, value := "", l
		if len(l) > spanLabelW && strings.TrimRight(l[:spanLabelW], " ") != "" && !strings.Contains(strings.TrimRight(l[:spanLabelW], " "), " ") &&
			l[spanLabelW-1] == ' ' {
			label, value = l[:spanLabelW], l[spanLabelW:]
		}
		indent := strings.Repeat(" ", len(label))
		for i, part := range strings.Split(ansi.Wrap(value, m.width-len(label), ""), "\n") {
			if i == 0 {
				m.lines = append(m.lines, label+part)
			} else {
				m.lines = append(m.lines, indent+part)
			}
		}
	}
	m.scroll(0)
}

// spanLabelW is the width of the labels ("attempt     ") the detail lines start with.
const spanLabelW = 12

func (m *spanModel) scroll(d int) {
	m.offset += d
	if max := len(m.lines) - m.height; m.offset > max {
		m.offset = max
	}
	if m.offset < 0 {
		m.offset = 0
	}
}

func (m *spanModel) load(v *engine.TraceView, i int, ann []spanAnn) {
	sp := &v.Spans[i]
	var t0 int64
	for j := range v.Spans {
		if j == 0 || v.Spans[j].StartUnixNano < t0 {
			t0 = v.Spans[j].StartUnixNano
		}
	}
	var l []string
	add := func(format string, a ...any) { l = append(l, fmt.Sprintf(format, a...)) }
	add("span        %s", sp.Name)
	add("service     %s", sp.Service())
	if inst := sp.Instance(); inst != "" {
		add("instance    %s", inst)
	}
	add("kind        %s", sp.Kind)
	status := sp.Status.String()
	if sp.StatusMessage != "" {
		status += "  " + sp.StatusMessage
	}
	add("status      %s", status)
	add("trace_id    %s", sp.TraceID)
	add("span_id     %s", sp.SpanID)
	if !sp.ParentID.IsZero() {
		add("parent_id   %s", sp.ParentID)
	}
	add("start       %s  (+%s into the trace)", time.Unix(0, sp.StartUnixNano).UTC().Format(time.RFC3339Nano),
		fmtDur(time.Duration(sp.StartUnixNano-t0)))
	add("duration    %s", fmtDur(time.Duration(sp.DurationNanos())))
	if sp.Scope != "" {
		add("scope       %s", sp.Scope)
	}
	if i < len(ann) {
		a := &ann[i]
		if a.att != nil {
			op := a.attOp
			add("attempt     #%d of %d (%s) of operation %s %s: outcome %s, status %s, backoff before it %s",
				a.att.Number, len(op.Attempts), a.att.Kind, op.ID, op.Name, a.att.Outcome, orDash(a.att.Status),
				fmtDur(time.Duration(a.att.BackoffNanos)))
			if a.fanOf > 1 {
				add("fan-out     call %d of %d: %s", a.fanIdx, a.fanOf, strings.Join(a.att.Origins, ", "))
			}
		}
		if op := a.op; op != nil {
			add("operation   %s %s: %s → %s, owner %s, %s, terminal %s, stop reason %s",
				op.ID, op.Name, op.Caller, op.Dependency, op.Owner, words.Count(len(op.Attempts), "attempt"), orDash(op.Terminal), orDash(op.StopReason))
			if op.DeadlineUnixNano > 0 {
				add("deadline    %s", time.Unix(0, op.DeadlineUnixNano).UTC().Format(time.RFC3339Nano))
			}
		}
		if a.late {
			add("LATE        started after the deadline of an operation it runs under: work nobody waits for")
		}
	}
	l = append(l, "")
	add("attributes (%d)", len(sp.Attrs))
	for _, a := range sp.Attrs {
		add("  %s = %s", a.Key, a.AsString())
	}
	l = append(l, "")
	if r := sp.Resource; r != nil {
		add("resource")
		add("  service.name = %s", r.ServiceName)
		if r.ServiceInstance != "" {
			add("  service.instance.id = %s", r.ServiceInstance)
		}
		for _, a := range r.Attrs {
			add("  %s = %s", a.Key, a.AsString())
		}
		l = append(l, "")
	}
	add("events (%d)", len(sp.Events))
	for _, e := range sp.Events {
		add("  +%s  %s%s", fmtDur(time.Duration(e.TimeUnixNano-sp.StartUnixNano)), e.Name, attrsInline(e.Attrs))
	}
	l = append(l, "")
	add("links (%d)", len(sp.Links))
	for _, ln := range sp.Links {
		where := ""
		if ln.TraceID == sp.TraceID {
			for j := range v.Spans {
				if v.Spans[j].SpanID == ln.SpanID {
					where = "  (" + v.Spans[j].Service() + ": " + v.Spans[j].Name + ")"
					break
				}
			}
		}
		add("  trace_id=%s span_id=%s%s%s", ln.TraceID, ln.SpanID, attrsInline(ln.Attrs), where)
	}
	var named []string
	for _, f := range v.Findings {
		for _, id := range f.SpanIDs {
			if id == sp.SpanID.String() {
				named = append(named, fmt.Sprintf("  %s %s: %s", f.Severity, f.Detector, f.Summary))
				break
			}
		}
	}
	if len(named) > 0 {
		l = append(l, "")
		add("findings naming this span (%d)", len(named))
		l = append(l, named...)
	}
	m.raw = l
	m.offset = 0
	m.wrap()
}

func attrsInline(as []spans.Attr) string {
	if len(as) == 0 {
		return ""
	}
	var b strings.Builder
	for _, a := range as {
		b.WriteString("  ")
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(a.AsString())
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m spanModel) Update(msg tea.Msg) (spanModel, tea.Cmd) {
	k := m.ctx.keys
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, k.Up):
			m.scroll(-1)
		case key.Matches(msg, k.Down):
			m.scroll(1)
		case key.Matches(msg, k.PageUp):
			m.scroll(-m.height)
		case key.Matches(msg, k.PageDown):
			m.scroll(m.height)
		case key.Matches(msg, k.Top):
			m.offset = 0
		case key.Matches(msg, k.Bottom):
			m.scroll(len(m.lines))
		}
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			m.scroll(-3)
		case tea.MouseButtonWheelDown:
			m.scroll(3)
		}
	}
	return m, nil
}

func (m spanModel) View() string {
	end := m.offset + m.height
	if end > len(m.lines) {
		end = len(m.lines)
	}
	out := make([]string, 0, m.height)
	for _, l := range m.lines[m.offset:end] {
		out = append(out, fit(l, m.width))
	}
	return padLines(out, m.height)
}
