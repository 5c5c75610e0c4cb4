package tui

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// drive runs the model's Init and then each message through Update synchronously, following the
// commands they return (navigation, lookups, exports) but not the snapshot tick, so a test can
// step the dashboard without a program or a clock.
func drive(t *testing.T, m Model, msgs ...tea.Msg) Model {
	t.Helper()
	m = step(t, m, m.Init()(), 0)
	for _, msg := range msgs {
		m = step(t, m, msg, 0)
	}
	return m
}

func step(t *testing.T, m Model, msg tea.Msg, depth int) Model {
	t.Helper()
	if depth > 10 {
		t.Fatalf("command chain too deep at %T", msg)
	}
	next, cmd := m.Update(msg)
	m = next.(Model)
	if cmd == nil {
		return m
	}
	if _, ok := msg.(snapshotMsg); ok {
		return m // the re-armed tick: the test sends snapshots itself
	}
	out := cmd()
	switch out.(type) {
	case nil, tea.QuitMsg:
		return m
	}
	return step(t, m, out, depth+1)
}
