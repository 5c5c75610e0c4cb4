package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/internal/termsafe"
)

// cursor is the scroll state of a list of n rows shown height at a time. Screens keep their rows in
// slices and ask the cursor which window to render, so a frame touches only the visible rows.
type cursor struct {
	pos, offset, n, height int
}

func (c *cursor) setLen(n int) {
	c.n = n
	c.clamp()
}

func (c *cursor) setHeight(h int) {
	if h < 1 {
		h = 1
	}
	c.height = h
	c.clamp()
}

func (c *cursor) clamp() {
	if c.pos >= c.n {
		c.pos = c.n - 1
	}
	if c.pos < 0 {
		c.pos = 0
	}
	if c.offset > c.pos {
		c.offset = c.pos
	}
	if c.pos >= c.offset+c.height {
		c.offset = c.pos - c.height + 1
	}
	if max := c.n - c.height; c.offset > max {
		c.offset = max
	}
	if c.offset < 0 {
		c.offset = 0
	}
}

func (c *cursor) move(d int) { c.pos += d; c.clamp() }
func (c *cursor) set(p int)  { c.pos = p; c.clamp() }

// window returns the half-open range of rows to render.
func (c *cursor) window() (int, int) {
	end := c.offset + c.height
	if end > c.n {
		end = c.n
	}
	return c.offset, end
}

// navigate applies the movement keys shared by every list; it reports whether msg was one of them.
func (c *cursor) navigate(k *KeyMap, msg tea.Msg) bool {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, k.Up):
			c.move(-1)
		case key.Matches(msg, k.Down):
			c.move(1)
		case key.Matches(msg, k.Top):
			c.set(0)
		case key.Matches(msg, k.Bottom):
			c.set(c.n - 1)
		case key.Matches(msg, k.PageUp):
			c.move(-c.height)
		case key.Matches(msg, k.PageDown):
			c.move(c.height)
		default:
			return false
		}
		return true
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			c.move(-3)
		case tea.MouseButtonWheelDown:
			c.move(3)
		default:
			return false
		}
		return true
	}
	return false
}

// fit pads or truncates plain or styled text to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = termsafe.Cell(s) // measured as it will be shown
	sw := ansi.StringWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = ansi.StringWidth(s)
	}
	if sw < w {
		s += strings.Repeat(" ", w-sw)
	}
	return s
}

// fitLeft right-aligns s in w cells (numbers read better that way).
func fitLeft(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = termsafe.Cell(s)
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-sw) + s
}

// column is one column of a table: its title and width; a width of 0 takes a share of what is
// left, in proportion to weight (1 when unset). A negative weight hides the column.
type column struct {
	title  string
	width  int
	right  bool
	weight int
}

// layout gives flexible (width 0) columns the room left over in total.
func layout(cols []column, total int) []column {
	out := make([]column, len(cols))
	copy(out, cols)
	fixed, weights := 0, 0
	for _, c := range out {
		if c.weight < 0 {
			continue // hidden
		}
		fixed += c.width + 1
		if c.width == 0 {
			weights += max(c.weight, 1)
		}
	}
	if weights == 0 {
		return out
	}
	left := max(total-fixed+1, weights*4)
	for i := range out {
		if out[i].width == 0 && out[i].weight >= 0 {
			out[i].width = left * max(out[i].weight, 1) / weights
		}
	}
	return out
}

// shortURL drops "http://" where columns are narrow: the host and port are what tells
// dependencies apart, and filters still match the full name.
func shortURL(s string, narrow bool) string {
	if narrow {
		return strings.TrimPrefix(s, "http://")
	}
	return s
}

// row joins cells into one line of the table. It writes into one buffer sized for the line: it
// runs for every visible row on every frame.
func row(cols []column, cells ...string) string {
	var b strings.Builder
	n := 0
	for _, c := range cols {
		n += c.width + 1
	}
	b.Grow(n + n/2) // box-drawing and block glyphs take three bytes
	for i, c := range cols {
		if c.weight < 0 {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		v := ""
		if i < len(cells) {
			v = cells[i]
		}
		writeCell(&b, v, c.width, c.right)
	}
	return b.String()
}

// writeCell writes v padded (or cut with an ellipsis) to exactly w cells.
func writeCell(b *strings.Builder, v string, w int, right bool) {
	if w <= 0 {
		return
	}
	v = termsafe.Cell(v)
	sw := ansi.StringWidth(v)
	if sw > w {
		v = ansi.Truncate(v, w, "…")
		sw = ansi.StringWidth(v)
	}
	if right {
		spaces(b, w-sw)
		b.WriteString(v)
		return
	}
	b.WriteString(v)
	spaces(b, w-sw)
}

func spaces(b *strings.Builder, n int) {
	for ; n > 0; n-- {
		b.WriteByte(' ')
	}
}

// padLines makes body exactly h lines, so the footer stays put.
func padLines(lines []string, h int) string {
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// cutDistinct fits each name into w cells so that names shown together still read differently:
// a name too long loses a part from its middle (one "…"), placed to keep where it first differs
// from the most alike of the others - the pod hash, the "-2", the port - and as much of its start
// and end as there is room for. A plain cut at the end would turn http://inventory-7f9c:8080 and
// http://inventory-8a2b:8080 into the same "http://inven…".
func cutDistinct(names []string, w int) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = cutName(n, names, w)
	}
	return out
}

func cutName(n string, others []string, w int) string {
	r := []rune(n)
	if len(r) <= w || w <= 0 {
		return n
	}
	if w < 4 {
		return string(r[:w-1]) + "…"
	}
	// lo: where n first differs from the name it shares the longest start with.
	lo := 0
	for _, o := range others {
		if o == n {
			continue
		}
		p := 0
		for _, c := range o {
			if p >= len(r) || r[p] != c {
				break
			}
			p++
		}
		lo = max(lo, p)
	}
	lo = min(lo, len(r)-1)
	keep := w - 1          // runes kept around the one "…"
	head := (keep + 1) / 2 // a cut in the middle...
	tail := keep - head
	if lo < head || lo >= len(r)-tail {
		return string(r[:head]) + "…" + string(r[len(r)-tail:]) // ...keeps the difference already
	}
	// The difference is in the middle: end the cut just before it, keeping everything from there.
	if rest := len(r) - lo; rest < keep {
		return string(r[:keep-rest]) + "…" + string(r[lo:])
	}
	// Even the part from the difference on is too long: show the difference and what follows.
	return "…" + string(r[lo:lo+keep-1]) + "…"
}
