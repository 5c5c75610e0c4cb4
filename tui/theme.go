package tui

import (
	"io"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Theme holds every style the dashboard uses, built once and shared by all screens. Colour is an
// enhancement only: each thing a colour says is also said by a character (a marker, a word, a bar
// glyph), so the dashboard reads the same under NO_COLOR, in a monochrome terminal and in goldens.
type Theme struct {
	Title     lipgloss.Style // the product name in the header
	Live      lipgloss.Style // the LIVE badge
	Paused    lipgloss.Style // PAUSED / frozen badge
	Replay    lipgloss.Style // REPLAY badge
	Dim       lipgloss.Style // secondary text: column headers, hints, units
	Bold      lipgloss.Style
	TabActive lipgloss.Style
	Tab       lipgloss.Style
	Selected  lipgloss.Style // the cursor row
	Worst     lipgloss.Style // the worst dependency: the thing to look at first
	Warn      lipgloss.Style
	Crit      lipgloss.Style
	OK        lipgloss.Style
	Match     lipgloss.Style // search hits in the trace
	Bar       lipgloss.Style // waterfall bar of a span that ended well
	BarErr    lipgloss.Style // waterfall bar of a failed span
	BarLate   lipgloss.Style // waterfall bar of a span started after the deadline
	Deadline  lipgloss.Style // the deadline line
	Overlay   lipgloss.Style // the help box
	Status    lipgloss.Style // the bottom status line (filter, messages)
	Help      help.Styles
	// Rows are the styles applied to whole table rows and waterfall bars on every frame, reduced to
	// their escape sequences (see paint).
	Rows struct {
		Selected, Warn, Worst, Crit, Match, Bar, BarErr, BarLate paint
	}
}

// paint is a style reduced to the escape sequences around its text. lipgloss.Style.Render
// allocates a few dozen times per call; a row is painted on every frame, so the hot path
// concatenates instead. Only for one-line text without tabs, which is what rows are.
type paint struct{ pre, post string }

// paintMark is a private-use rune no row contains, rendered once to find where the text goes.
const paintMark = "\ue000"

func newPaint(st lipgloss.Style) paint {
	out := st.Render(paintMark)
	i := strings.Index(out, paintMark)
	if i < 0 {
		return paint{}
	}
	return paint{pre: out[:i], post: out[i+len(paintMark):]}
}

// Render wraps s in the style's sequences.
func (p paint) Render(s string) string {
	if p.pre == "" && p.post == "" {
		return s
	}
	return p.pre + s + p.post
}

// NewRenderer is the renderer the dashboard draws with on w. With color false (NO_COLOR) lipgloss
// would pick the Ascii profile, which drops bold and reverse video as well as colour, and leaves
// the cursor row and the active tab unmarked; the theme sets no colour then, so the ANSI profile
// keeps the attributes and still prints none. The dashboard only runs on a terminal, which
// draws them.
func NewRenderer(w io.Writer, color bool) *lipgloss.Renderer {
	r := lipgloss.NewRenderer(w)
	if !color {
		r.SetColorProfile(termenv.ANSI)
	}
	return r
}

// NewTheme builds the styles from r. With color false (NO_COLOR) it keeps bold and reverse video but
// sets no colour at all, as https://no-color.org asks.
func NewTheme(r *lipgloss.Renderer, color bool) Theme {
	s := r.NewStyle
	fg := func(st lipgloss.Style, c string) lipgloss.Style {
		if !color {
			return st
		}
		return st.Foreground(lipgloss.Color(c))
	}
	bg := func(st lipgloss.Style, c string) lipgloss.Style {
		if !color {
			return st
		}
		return st.Background(lipgloss.Color(c))
	}
	t := Theme{
		Title:     fg(s().Bold(true), "45"),
		Live:      fg(s().Bold(true), "42"),
		Paused:    fg(s().Bold(true).Reverse(true), "214"),
		Replay:    fg(s().Bold(true), "141"),
		Dim:       fg(s(), "245"),
		Bold:      s().Bold(true),
		TabActive: fg(s().Bold(true).Underline(true), "45"),
		Tab:       fg(s(), "250"),
		Selected:  s().Reverse(true),
		Worst:     fg(s().Bold(true), "196"),
		Warn:      fg(s(), "214"),
		Crit:      fg(s().Bold(true), "196"),
		OK:        fg(s(), "42"),
		Match:     bg(s().Underline(true), "58"),
		Bar:       fg(s(), "39"),
		BarErr:    fg(s(), "203"),
		BarLate:   fg(s(), "214"),
		Deadline:  fg(s().Bold(true), "201"),
		Overlay:   fg(s().Border(lipgloss.RoundedBorder()).Padding(0, 1), "45"),
		Status:    fg(s(), "250"),
	}
	t.Rows.Selected, t.Rows.Warn, t.Rows.Worst, t.Rows.Crit = newPaint(t.Selected), newPaint(t.Warn), newPaint(t.Worst), newPaint(t.Crit)
	t.Rows.Match, t.Rows.Bar, t.Rows.BarErr, t.Rows.BarLate = newPaint(t.Match), newPaint(t.Bar), newPaint(t.BarErr), newPaint(t.BarLate)
	t.Help = help.Styles{
		ShortKey:       fg(s().Bold(true), "45"),
		ShortDesc:      fg(s(), "250"),
		ShortSeparator: fg(s(), "240"),
		Ellipsis:       fg(s(), "240"),
		FullKey:        fg(s().Bold(true), "45"),
		FullDesc:       fg(s(), "252"),
		FullSeparator:  fg(s(), "240"),
	}
	return t
}
