package tui

import (
	"fmt"
	"strings"

	bcursor "github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// The command line is k9s's `:` prompt, which its users type without thinking: `:deps`,
// `:ops [filter]`, `:findings`, `:trace ID` and `:q`. bubbles' textinput draws it and completes from
// the suggestions (tab accepts, up/down choose), so a trace id never has to be typed in full.

// commands are the names the prompt knows, first the canonical one of each, for completion.
var commands = []struct {
	names []string
	help  string
}{
	{[]string{"deps", "dependencies"}, "the dependencies screen"},
	{[]string{"ops", "operations"}, "the operations screen; :ops FILTER filters it"},
	{[]string{"findings"}, "the findings screen"},
	{[]string{"trace"}, ":trace ID opens a trace (a unique prefix of the id is enough)"},
	{[]string{"help"}, "every key"},
	{[]string{"q", "quit"}, "quit"},
}

// commandHint is the line beside the prompt.
const (
	commandHint      = "tab completes · enter runs · esc cancels · deps ops findings trace ID q"
	commandHintShort = "tab completes · enter runs · esc cancels"
)

// maxTraceSuggestions bounds the trace ids offered for completion: enough for the findings' traces
// without walking a hundred thousand operations on every `:`.
const maxTraceSuggestions = 200

func newCommandInput(t *Theme) textinput.Model {
	in := textinput.New()
	in.Prompt = ":"
	in.PromptStyle, in.TextStyle, in.CompletionStyle = t.Bold, t.Bold, t.Dim
	in.Cursor.Style = t.Selected
	in.ShowSuggestions = true
	in.CharLimit = 200
	// A blinking cursor would re-arm a timer on every frame; the prompt is short-lived.
	in.Cursor.SetMode(bcursor.CursorStatic)
	return in
}

// commandSuggestions are the completions: every command name, then "trace ID" for the traces with
// findings (most severe first) and the open one.
func commandSuggestions(snap *engine.Snapshot, open string) []string {
	var out []string
	for _, c := range commands {
		for _, n := range c.names {
			if n == "trace" {
				continue // only with an id: "trace " alone completes to nothing useful
			}
			out = append(out, n)
		}
	}
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] && len(seen) < maxTraceSuggestions {
			seen[id] = true
			out = append(out, "trace "+id)
		}
	}
	add(open)
	if snap != nil {
		for i := range snap.Report.Findings {
			add(snap.Report.Findings[i].TraceID)
		}
		ids := snap.HeldTraceIDs()
		for i := len(ids) - 1; i >= 0 && len(seen) < maxTraceSuggestions; i-- {
			add(ids[i].String())
		}
	}
	return out
}

// openCommandLine shows the prompt with fresh completions.
func (m *Model) openCommandLine() tea.Cmd {
	open := ""
	if m.trace.view != nil {
		open = m.trace.view.TraceID.String()
	}
	m.cmd = newCommandInput(&m.ctx.theme)
	m.cmd.SetSuggestions(commandSuggestions(m.snap, open))
	m.cmdActive = true
	return m.cmd.Focus()
}

func (m Model) editCommand(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch msg.Type {
	case tea.KeyCtrlC:
		return m, tea.Quit
	case tea.KeyEsc:
		m.cmdActive = false
		return m, nil
	case tea.KeyEnter:
		m.cmdActive = false
		return m.runCommand(m.cmd.Value())
	}
	var cmd tea.Cmd
	m.cmd, cmd = m.cmd.Update(msg)
	return m, cmd
}

// runCommand does what a command line asks.
func (m Model) runCommand(line string) (tea.Model, tea.Cmd) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return m, nil
	}
	name, args := strings.ToLower(fields[0]), fields[1:]
	switch name {
	case "deps", "dependencies", "dep", "1":
		m.go2(screenDeps)
	case "ops", "operations", "op", "2":
		m.go2(screenOps)
		if len(args) > 0 {
			m.ops.setFilter(strings.Join(args, " "))
		}
	case "findings", "finding", "3":
		m.go2(screenFindings)
	case "trace", "4":
		if len(args) == 0 {
			if m.trace.view != nil {
				m.go2(screenTrace)
				return m, nil
			}
			m.status = "trace needs an id: :trace ID (tab completes the ids of traces with findings)"
			return m, nil
		}
		id, err := m.findTrace(args[0])
		if err != nil {
			m.status = err.Error()
			return m, nil
		}
		return m, func() tea.Msg { return openTraceMsg{trace: id} }
	case "help", "?":
		m.showHelp = true
	case "q", "q!", "quit", "exit":
		return m, tea.Quit
	default:
		m.status = "unknown command :" + name + " (try :deps :ops :findings :trace ID :q)"
	}
	return m, nil
}

// findTrace reads a trace id, or a prefix of one that only one held trace has.
func (m Model) findTrace(arg string) (spans.TraceID, error) {
	arg = strings.ToLower(arg)
	if id, err := parseTraceID(arg); err == nil {
		return id, nil
	}
	var found []spans.TraceID
	if m.snap != nil {
		for _, id := range m.snap.HeldTraceIDs() {
			if strings.HasPrefix(id.String(), arg) {
				found = append(found, id)
			}
		}
	}
	switch len(found) {
	case 0:
		return spans.TraceID{}, fmt.Errorf("no trace held has an id starting with %q", arg)
	case 1:
		return found[0], nil
	}
	return spans.TraceID{}, fmt.Errorf("%q starts %d trace ids: type more of it", arg, len(found))
}
