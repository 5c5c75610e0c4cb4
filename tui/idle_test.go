package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// quietHistory is a sparkline that has been empty for n intervals since one of 27x.
func quietHistory(n int) map[string][]float64 {
	return map[string][]float64{"http://dep:8080": append([]float64{27}, make([]float64, n)...)}
}

// later is s taken again d later with hist: what an idle analyzer hands out, settled and judged
// through the time it was taken.
func later(s *engine.Snapshot, d time.Duration, hist map[string][]float64) *engine.Snapshot {
	c := *s
	c.AtUnixNano += int64(d)
	c.Stats.SettledThroughUnixNano, c.Stats.WindowThroughUnixNano = c.AtUnixNano, c.AtUnixNano
	c.History = hist
	return &c
}

// idleDashboard shows a snapshot whose sparklines have been flat for longer than they are wide.
func idleDashboard(t *testing.T, opt func(*Options)) (Model, *engine.Snapshot) {
	t.Helper()
	s := fakeSnapshot(0)
	s.History = quietHistory(40)
	o := testOptions(fixedSource(s))
	if opt != nil {
		opt(&o)
	}
	return drive(t, New(o), tea.WindowSizeMsg{Width: testW, Height: testH}), s
}

func TestFilterHoldsBackSnapshotThatChangesNothingOnScreen(t *testing.T) {
	m, s := idleDashboard(t, nil)
	idle := later(s, time.Second, quietHistory(41))
	msg := snapshotMsg{snap: idle}
	out, ok := Filter(m, msg).(tea.BatchMsg)
	if !ok || len(out) != 1 {
		t.Fatalf("Filter(idle snapshot) = %T, want the re-armed tick alone as a tea.BatchMsg (no update, no draw)", Filter(m, msg))
	}
	// What it holds back would have drawn the same frame.
	next, _ := m.Update(msg)
	if next.View() != m.View() {
		t.Fatalf("the snapshot held back changes the frame:\n%s\n---\n%s", m.View(), next.View())
	}
}

func TestFilterPassesSnapshotThatChangesTheScreen(t *testing.T) {
	dropped := int64(0)
	m, s := idleDashboard(t, func(o *Options) { o.Dropped = func() int64 { return dropped } })
	more := later(s, time.Second, quietHistory(41))
	more.Stats.TracesHeld++
	spark := later(s, time.Second, map[string][]float64{"http://dep:8080": append(quietHistory(40)["http://dep:8080"], 3)})
	cases := map[string]func() *engine.Snapshot{
		"new data":         func() *engine.Snapshot { return fakeSnapshot(0) },
		"a counter":        func() *engine.Snapshot { return more },
		"a sparkline":      func() *engine.Snapshot { return spark },
		"dropped spans":    func() *engine.Snapshot { dropped = 5; return later(s, time.Second, quietHistory(41)) },
		"first data shown": func() *engine.Snapshot { return s },
	}
	for name, snap := range cases {
		dropped = 0
		mm := m
		if name == "first data shown" {
			mm = New(testOptions(fixedSource(s)))
		}
		msg := snapshotMsg{snap: snap()}
		if _, ok := Filter(mm, msg).(snapshotMsg); !ok {
			t.Errorf("%s: Filter held back a snapshot that changes the frame", name)
		}
	}
}

func TestFilterPassesNewDataWhileFrozenAndHoldsBackTheRest(t *testing.T) {
	m, s := idleDashboard(t, nil)
	m = step(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'p'}}, 0)
	if !m.frozen {
		t.Fatal("p did not freeze the view")
	}
	if _, ok := Filter(m, snapshotMsg{snap: fakeSnapshot(0)}).(snapshotMsg); !ok {
		t.Error("Filter held back new data while frozen: the header would not say newer data is waiting")
	}
	busier := later(s, time.Second, quietHistory(41))
	busier.Stats.SpansHeld += 1000 // counters the frozen view does not show
	if _, ok := Filter(m, snapshotMsg{snap: busier}).(tea.BatchMsg); !ok {
		t.Error("Filter passed a snapshot of the same data to a frozen view")
	}
}

// The rate in the header counts the time the filter held snapshots back as quiet: spans that come
// after a long idle spell show at the rate they come, not spread over the spell.
func TestRateAfterQuietSpellCountsFromTheLastQuietSnapshot(t *testing.T) {
	m, s := idleDashboard(t, nil)
	quiet := later(s, 100*time.Second, quietHistory(140))
	bm, ok := Filter(m, snapshotMsg{snap: quiet}).(tea.BatchMsg)
	if !ok || len(bm) != 1 {
		t.Fatal("Filter passed an idle snapshot")
	}
	busy := later(s, 101*time.Second, quietHistory(141))
	busy.Stats.SpansHeld += 1000
	m = step(t, m, snapshotMsg{snap: busy, quietAt: quiet.AtUnixNano}, 0)
	// 1,000 spans in the last second, smoothed over two: about 500/s, not 10/s.
	if m.rate < 400 {
		t.Errorf("rate after a quiet spell = %.0f spans/s, want about 500", m.rate)
	}
}

// A screen without sparklines goes quiet as soon as what it shows stops changing: a snapshot whose
// only change is the history is held back on Operations and Findings, and passed on Dependencies,
// whose trend column shows it.
func TestFilterPassesHistoryOnlyWhereTheSparklinesShow(t *testing.T) {
	for _, k := range []string{"1", "2", "3"} {
		// A fresh dashboard each time: copies of a model share the rows Update changes.
		m, s := idleDashboard(t, nil)
		m = step(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}, 0)
		name := screenNames[m.screen]
		spark := later(s, time.Second, map[string][]float64{"http://dep:8080": append(quietHistory(40)["http://dep:8080"], 3)})
		msg := snapshotMsg{snap: spark}
		if m.screen == screenDeps {
			if _, ok := Filter(m, msg).(snapshotMsg); !ok {
				t.Errorf("%s: Filter held back a snapshot that moves a sparkline", name)
			}
			continue
		}
		if _, ok := Filter(m, msg).(tea.BatchMsg); !ok {
			t.Errorf("%s: Filter passed a snapshot whose only change is the history, which the screen does not show", name)
		}
		back := step(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("1")}, 0)
		if _, ok := Filter(back, msg).(snapshotMsg); !ok {
			t.Errorf("back on Dependencies from %s: Filter held back the sparkline it did not draw", name)
		}
		next, _ := m.Update(msg)
		if next.View() != m.View() {
			t.Errorf("%s: the history changed the frame:\n%s\n---\n%s", name, m.View(), next.View())
		}
	}
}
