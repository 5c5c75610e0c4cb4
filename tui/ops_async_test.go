package tui

import (
	"slices"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
)

// snapshotOf is a snapshot that lists ops and nothing else.
func snapshotOf(ops []*analyzer.Operation) *engine.Snapshot {
	s := &engine.Snapshot{}
	s.SetOperations(ops)
	return s
}

// manyOps makes n operations whose callers sort in the reverse of their order.
func manyOps(n int) []*analyzer.Operation {
	ops := make([]*analyzer.Operation, n)
	for i := range ops {
		ops[i] = &analyzer.Operation{ID: string(rune('a' + i%26)), Caller: string(rune('z' - i%26)),
			Dependency: "http://dep:8080", StartUnixNano: int64(i)}
	}
	return ops
}

// Above the threshold, a sort key returns at once: the rows stay as they were, a command does the
// sort, and its rows are taken only if no newer rebuild was asked for meanwhile.
func TestOpsSortRunsOffTheUpdateLoop(t *testing.T) {
	keys := DefaultKeyMap()
	m := newOpsModel(&shared{keys: &keys, theme: NewTheme(asciiRenderer(), false)})
	m.asyncAbove = 10
	m.SetSize(100, 20)
	m.SetSnapshot(snapshotOf(manyOps(50)))
	if len(m.rows) != 0 || !m.building {
		t.Fatalf("rows %d, building %v: the first rebuild of 50 operations should be a command", len(m.rows), m.building)
	}
	first := m.takeBuild()
	if first == nil || m.takeBuild() != nil {
		t.Fatal("takeBuild should hand out one command for one rebuild")
	}
	m.setRows(first().(opsRowsMsg))
	if len(m.rows) != 50 {
		t.Fatalf("rows after the command: %d, want 50", len(m.rows))
	}
	before := m.rows[0]

	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'s'}}) // next sort column
	stale := m.takeBuild()
	if stale == nil || m.rows[0] != before {
		t.Fatal("the sort key should leave the rows as they were and ask for a command")
	}
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'S'}}) // reverse, before the first lands
	if m.takeBuild() != nil {
		t.Fatal("a second command while one is in flight: sorts would pile up")
	}
	m.setRows(stale().(opsRowsMsg))
	if m.rows[0] != before {
		t.Error("a stale generation's rows were taken")
	}
	latest := m.takeBuild()
	if latest == nil {
		t.Fatal("the latest rebuild was not handed out once the stale one landed")
	}
	m.setRows(latest().(opsRowsMsg))
	if !m.reverse || m.inFlight {
		t.Fatalf("reverse %v, in flight %v after the latest rows", m.reverse, m.inFlight)
	}
	want, _ := opRows(nil, nil, m.all, m.filter, m.sort, m.reverse)
	for i := range want {
		if m.rows[i] != want[i] {
			t.Fatalf("row %d differs from an in-place sort", i)
		}
	}
}

// The operations list holds the operations read back from the snapshot only while it is shown
// (or a trace opened from it is): back on another list it lets go of them, and shows the same
// rows when it is shown again.
func TestOpsLetGoOfOperationsOnAnotherList(t *testing.T) {
	m := drive(t, New(testOptions(fixedSource(fakeSnapshot(0)))), size(120, 40), press("2"))
	if len(m.ops.rows) == 0 || m.ops.all == nil {
		t.Fatalf("the operations screen shows %d rows", len(m.ops.rows))
	}
	rows := slices.Clone(m.ops.rows)
	m = drive(t, m, press("1"))
	if m.ops.all != nil || len(m.ops.rows) != 0 {
		t.Fatalf("back on dependencies the operations list still holds %d operations, %d rows", len(m.ops.all), len(m.ops.rows))
	}
	m = drive(t, m, press("2"))
	if !slices.Equal(m.ops.rows, rows) {
		t.Fatalf("shown again, the list has %d rows, not the %d it had", len(m.ops.rows), len(rows))
	}
}
