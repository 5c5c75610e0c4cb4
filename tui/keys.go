package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
)

// KeyMap is every binding of the dashboard, defined once. Screens match against it and the help
// overlay is rendered from it, so the two never disagree. The layout follows k9s and lazygit.
type KeyMap struct {
	Help     key.Binding
	Command  key.Binding
	Filter   key.Binding
	Back     key.Binding
	NextTab  key.Binding
	PrevTab  key.Binding
	Deps     key.Binding
	Ops      key.Binding
	Findings key.Binding
	Trace    key.Binding
	Up       key.Binding
	Down     key.Binding
	Top      key.Binding
	Bottom   key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Enter    key.Binding
	Sort     key.Binding
	Reverse  key.Binding
	Pause    key.Binding
	Export   key.Binding
	Clear    key.Binding
	Quit     key.Binding

	// Trace screen.
	Collapse    key.Binding
	Expand      key.Binding
	NextMatch   key.Binding
	PrevMatch   key.Binding
	NextProblem key.Binding
	PrevProblem key.Binding

	// Replay.
	ReplayPause key.Binding
	Faster      key.Binding
	Slower      key.Binding

	// Empty state.
	Demo key.Binding

	// Dependencies screen: a baseline to compare against.
	Baseline      key.Binding
	ClearBaseline key.Binding
}

// DefaultKeyMap returns the bindings documented in docs/tui.md.
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Help:     b("?", "help", "?"),
		Command:  b(":", "command", ":"),
		Filter:   b("/", "filter", "/"),
		Back:     b("esc", "back", "esc"),
		NextTab:  b("tab", "next screen", "tab"),
		PrevTab:  b("shift+tab", "prev screen", "shift+tab"),
		Deps:     b("1", "dependencies", "1"),
		Ops:      b("2", "operations", "2"),
		Findings: b("3", "findings", "3"),
		Trace:    b("4", "trace", "4"),
		Up:       b("k/↑", "up", "k", "up"),
		Down:     b("j/↓", "down", "j", "down"),
		Top:      b("g/home", "top", "g", "home"),
		Bottom:   b("G/end", "bottom", "G", "end"),
		PageUp:   b("pgup/ctrl+b", "page up", "pgup", "ctrl+b", "ctrl+u"),
		PageDown: b("pgdn/ctrl+f", "page down", "pgdown", "ctrl+f", "ctrl+d"),
		Enter:    b("enter", "drill in", "enter"),
		Sort:     b("s", "sort column", "s"),
		Reverse:  b("S", "reverse sort", "S"),
		Pause:    b("p", "freeze view", "p"),
		Export:   b("e", "export trace", "e"),
		Clear:    b("C", "clear data", "C"),
		Quit:     b("q", "quit", "q", "ctrl+c"),

		Collapse:    b("h/←", "collapse", "h", "left"),
		Expand:      b("l/→", "expand", "l", "right"),
		NextMatch:   b("n", "next match", "n"),
		PrevMatch:   b("N", "prev match", "N"),
		NextProblem: b("f", "next finding/error", "f"),
		PrevProblem: b("F", "prev finding/error", "F"),

		ReplayPause: b("space", "pause replay", " "),
		Faster:      b("+", "faster", "+", "="),
		Slower:      b("-", "slower", "-"),

		Demo: b("d", "start demo traffic", "d"),

		Baseline:      b("b", "mark baseline", "b"),
		ClearBaseline: b("B", "clear baseline", "B"),
	}
}

// screenKeys adapts the key map to help.KeyMap for one screen: the footer shows what matters there
// and the overlay shows everything that works there.
type screenKeys struct {
	k      *KeyMap
	s      screen
	replay bool
	demo   bool
}

var _ help.KeyMap = screenKeys{}

func (h screenKeys) ShortHelp() []key.Binding {
	k := h.k
	switch h.s {
	case screenTrace:
		return []key.Binding{k.Help, k.Enter, k.Collapse, k.Expand, search(k.Filter), k.NextProblem, k.Export, k.Back}
	case screenSpan:
		return []key.Binding{k.Help, k.Up, k.Down, k.Export, k.Back}
	case screenFindings:
		return []key.Binding{k.Help, k.Command, open(k.Enter), list(k.Expand), k.Filter, k.NextTab, k.Pause, k.Quit}
	case screenEmpty:
		if h.demo {
			return []key.Binding{k.Help, k.Demo, k.Quit}
		}
		return []key.Binding{k.Help, k.Quit}
	}
	return []key.Binding{k.Help, k.Command, k.Enter, k.Filter, k.Sort, k.NextTab, k.Pause, k.Quit}
}

func (h screenKeys) FullHelp() [][]key.Binding {
	k := h.k
	nav := []key.Binding{k.Up, k.Down, k.Top, k.Bottom, k.PageUp, k.PageDown, k.Enter, k.Back}
	screens := []key.Binding{k.NextTab, k.PrevTab, k.Deps, k.Ops, k.Findings, k.Trace}
	general := []key.Binding{k.Command, k.Filter, k.Pause, k.Export, k.Clear, k.Help, k.Quit}
	if h.s == screenTrace {
		general[1] = search(k.Filter)
	}
	groups := [][]key.Binding{nav, screens}
	switch h.s {
	case screenTrace:
		groups = append(groups, []key.Binding{k.Collapse, k.Expand, k.NextMatch, k.PrevMatch, k.NextProblem, k.PrevProblem})
	case screenFindings:
		groups = append(groups, []key.Binding{list(k.Expand), k.Collapse, k.Sort, k.Reverse})
	case screenDeps:
		groups = append(groups, []key.Binding{k.Sort, k.Reverse, k.Baseline, k.ClearBaseline})
	case screenOps:
		groups = append(groups, []key.Binding{k.Sort, k.Reverse})
	}
	if h.demo && h.s == screenEmpty {
		general = append(general, k.Demo)
	}
	groups = append(groups, general)
	if h.replay {
		groups = append(groups, []key.Binding{k.ReplayPause, k.Faster, k.Slower})
	}
	return groups
}

// open and list are enter and l as the findings screen uses them: enter opens a group's first
// trace, l lists the group's findings.
func open(b key.Binding) key.Binding {
	b.SetHelp(b.Help().Key, "open trace")
	return b
}

func list(b key.Binding) key.Binding {
	b.SetHelp(b.Help().Key, "list group")
	return b
}

// search is the filter key as the trace screen uses it: it searches instead of hiding rows.
func search(b key.Binding) key.Binding {
	b.SetHelp(b.Help().Key, "search")
	return b
}
