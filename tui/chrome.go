package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/words"
)

// The header is three lines (state, counters, tabs) and the footer two (status or filter, keys).
const (
	headerLines = 3
	footerLines = 2
)

func (m Model) headerView() string {
	t := &m.ctx.theme
	w := m.termW

	// Line 1: who we are, what state the view is in, where to send data.
	var state string
	switch {
	case m.opt.Replay != nil && m.opt.Replay.Paused():
		state = t.Paused.Render(fmt.Sprintf("❚❚ REPLAY PAUSED %sx", fmtSpeed(m.opt.Replay.Speed())))
	case m.opt.Replay != nil:
		state = t.Replay.Render(fmt.Sprintf("▶ REPLAY %sx", fmtSpeed(m.opt.Replay.Speed())))
	default:
		state = t.Live.Render("● LIVE")
	}
	if m.frozen {
		frozen := "❚❚ VIEW FROZEN (p)"
		if m.pending != nil {
			frozen += " - newer data waiting"
		}
		state += " " + t.Paused.Render(frozen)
	}
	line1 := t.Title.Render("stormwatch") + "  " + state
	if m.opt.Replay != nil {
		if p := m.opt.Replay.Progress(); p != "" {
			line1 += "  " + t.Dim.Render(p)
		}
	}
	if m.opt.Upstream != nil {
		// The health of the source stays on the line, cut to fit (an error can be long).
		st, ok := m.opt.Upstream()
		st = ansi.Truncate(st, max(w-ansi.StringWidth(line1)-2, 0), "…")
		if ok {
			line1 += "  " + t.Dim.Render(st)
		} else {
			line1 += "  " + t.Warn.Render(st)
		}
	}
	// The endpoints are on the start screen too: they give way first in a narrow terminal.
	if eps := "  " + t.Dim.Render(strings.Join(m.opt.Endpoints, " · ")); len(m.opt.Endpoints) > 0 && ansi.StringWidth(line1+eps) <= w {
		line1 += eps
	}

	// Line 2: the counters.
	var parts []string
	if s := m.snap; s != nil {
		parts = append(parts,
			"spans/s "+t.Bold.Render(humanInt(int(m.rate+0.5))),
			"traces "+t.Bold.Render(humanInt(s.Stats.TracesHeld))+settling(s.Stats.PendingTraces),
			"operations "+t.Bold.Render(humanInt(s.HeldOperations)),
		)
		var bySev [3]int
		for i := range s.Report.Findings {
			if sv := s.Report.Findings[i].Severity; sv >= 0 && int(sv) < len(bySev) {
				bySev[sv]++
			}
		}
		f := "findings " + t.Crit.Render(strconv.Itoa(bySev[analyzer.SeverityCritical])+" critical") +
			" " + t.Warn.Render(strconv.Itoa(bySev[analyzer.SeverityWarning])+" warning") +
			" " + strconv.Itoa(bySev[analyzer.SeverityInfo]) + " info"
		parts = append(parts, f)
		var drops []string
		if m.opt.Dropped != nil {
			if d := m.opt.Dropped(); d > 0 {
				drops = append(drops, "dropped "+humanInt(int(d))+" spans")
			}
		}
		if n := s.Stats.EvictedTraces; n > 0 {
			drops = append(drops, "evicted "+humanInt(n)+" traces")
		}
		if n := s.Stats.TruncatedTraces; n > 0 {
			drops = append(drops, "truncated "+humanInt(n))
		}
		if n := s.Stats.DuplicateSpans; n > 0 {
			drops = append(drops, "duplicates "+humanInt(n))
		}
		if len(drops) > 0 {
			parts = append(parts, t.Warn.Render(strings.Join(drops, " · ")))
		}
	} else {
		parts = append(parts, t.Dim.Render("waiting for the first snapshot"))
	}
	// In a narrow terminal the rate gives way to what went missing (drops, evictions).
	if len(parts) > 1 && ansi.StringWidth(strings.Join(parts, "  ")) > w {
		parts = parts[1:]
	}
	line2 := strings.Join(parts, "  ")

	// Line 3: the tabs. The active one is bracketed as well as styled, for monochrome terminals.
	var tabs []string
	n := 3
	if m.trace.view != nil {
		n = 4
	}
	for i := 0; i < n; i++ {
		name := strconv.Itoa(i+1) + " " + screenNames[i]
		switch screen(i) {
		case screenOps:
			if m.snap != nil {
				name += " (" + humanInt(m.ops.shown()) + ")"
			}
		case screenFindings:
			if m.snap != nil {
				name += " (" + humanInt(len(m.snap.Report.Findings)) + ")"
			}
		}
		active := screen(i) == m.screen || (m.screen == screenSpan && screen(i) == screenTrace)
		if active {
			tabs = append(tabs, t.TabActive.Render("["+name+"]"))
		} else {
			tabs = append(tabs, t.Tab.Render(" "+name+" "))
		}
	}
	if m.screen == screenSpan {
		tabs = append(tabs, t.TabActive.Render("> Span"))
	}
	line3 := strings.Join(tabs, " ")
	return fit(line1, w) + "\n" + fit(line2, w) + "\n" + fit(line3, w)
}

func (m Model) footerView() string {
	t := &m.ctx.theme
	w := m.termW
	var status string
	switch {
	case m.cmdActive:
		status = m.cmd.View() + t.Dim.Render("   "+commandHint)
		if ansi.StringWidth(status) > w {
			status = m.cmd.View() + t.Dim.Render("   "+commandHintShort)
		}
		if ansi.StringWidth(status) > w {
			status = m.cmd.View() // a long completion leaves no room for the hint
		}
	case m.input.active:
		status = t.Bold.Render(m.input.view()) + t.Dim.Render("   enter keep · esc clear · key=value: service= dependency= detector= severity= or any attribute")
	case m.status != "":
		status = t.Status.Render(m.status)
	case m.currentFilter() != "":
		label := "filter: "
		if m.screen == screenTrace {
			label = "search: "
		}
		status = t.Dim.Render(label) + m.currentFilter() + t.Dim.Render("  (esc clears)")
	case m.opt.IgnoredSignals != nil:
		if n := m.opt.IgnoredSignals(); n > 0 {
			status = t.Dim.Render(ignoredSignalsNote + " (" + words.Count(int(n), "request") + "): only traces are analyzed")
		}
	}
	return fit(status, w) + "\n" + fit(m.shortHelp(), w)
}

// ignoredSignalsNote says what happens to the other OTLP signals an SDK sends to the same endpoint.
const ignoredSignalsNote = "metrics and logs are received and ignored"

// shortHelp is the footer's key list, dropping keys from the end (quit stays last) until it fits
// the terminal: a cut "p freeze vi…" helps nobody, and ? lists every key.
func (m Model) shortHelp() string {
	keys := m.helpKeys().ShortHelp()
	h := m.help
	h.Width = 0
	v := h.ShortHelpView(keys)
	for len(keys) > 2 && ansi.StringWidth(v) > m.termW {
		keys = append(keys[:len(keys)-2:len(keys)-2], keys[len(keys)-1])
		v = h.ShortHelpView(keys)
	}
	return v
}

func (m Model) helpView() string {
	t := &m.ctx.theme
	h := m.help
	h.ShowAll = true
	h.Width = 0 // unbounded: the loop below narrows the table by whole groups instead
	keys := m.helpKeys()
	title := t.Bold.Render("Keys on "+m.screenTitle()) + t.Dim.Render("   (any key closes)")
	groups := keys.FullHelp()
	table := h.FullHelpView(groups)
	// In a narrow terminal the screen-switching keys go first (the tabs and the footer show
	// them), then the movement keys, rather than wrapping the table into nonsense.
	for _, drop := range []int{1, 0} {
		if lipgloss.Width(table) <= m.termW-6 || len(groups) <= drop+1 {
			break
		}
		groups = append(groups[:drop:drop], groups[drop+1:]...)
		table = h.FullHelpView(groups)
	}
	// As wide as the key table (never wrapping it), within the terminal.
	w := min(m.termW-4, max(lipgloss.Width(table), 60)+2)
	box := t.Overlay.Width(w).Render(title + "\n\n" + table + "\n\n" +
		t.Dim.Render("Filter: substring, or key=value on service, dependency, detector, severity, caller, owner, name, or a span attribute."))
	return lipgloss.Place(m.termW, m.bodyH, lipgloss.Center, lipgloss.Center, box)
}

func (m Model) screenTitle() string {
	if m.showingEmpty() {
		return "the start screen"
	}
	return screenNames[m.screen]
}

func (m Model) emptyView() string {
	t := &m.ctx.theme
	var lines []string
	add := func(s ...string) { lines = append(lines, s...) }
	add("", t.Bold.Render("  No traces yet."), "")
	if r := m.opt.Replay; r != nil {
		add("  Replaying a recording: "+r.Progress()+".",
			"  Traces appear once they have been quiet for the settle period (--settle).",
			"  space pauses the replay, + and - change its speed.", "")
	}
	if len(m.opt.Endpoints) > 0 {
		add("  stormwatch is listening for OTLP traces on:")
		for _, e := range m.opt.Endpoints {
			add("      " + t.Bold.Render(e))
		}
		add("")
	}
	httpURL := m.opt.HTTPEndpoint
	if httpURL == "" {
		httpURL = "http://127.0.0.1:4318"
	}
	add("  Point any OpenTelemetry SDK or Collector at it, for example:",
		"",
		"      export OTEL_EXPORTER_OTLP_ENDPOINT="+httpURL,
		"      export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"      export OTEL_TRACES_SAMPLER=always_on",
		"",
		"  or replay a recording:  stormwatch replay traces.jsonl",
		"  Only traces are analyzed: "+ignoredSignalsNote+".",
		"")
	if m.opt.StartDemo != nil {
		if m.demoOn {
			add("  " + t.Live.Render("Demo traffic is starting: a retry storm will appear in a few seconds."))
		} else {
			add("  Press " + t.Bold.Render("d") + " to start built-in demo traffic: a three-layer retry storm to explore.")
		}
	}
	add("  Press " + t.Bold.Render("?") + " for every key, " + t.Bold.Render("q") + " to quit.")
	return padLines(lines, m.bodyH)
}

func fmtSpeed(s float64) string {
	return strconv.FormatFloat(s, 'g', 4, 64)
}

// humanInt writes 1234567 as 1,234,567: counts are read from across the room.
func humanInt(n int) string { return words.Int(int64(n)) }

// settling says how many traces wait for their settle period, so an engineer watching an empty
// table knows data is arriving.
func settling(n int) string {
	if n == 0 {
		return ""
	}
	return " (" + humanInt(n) + " settling)"
}
