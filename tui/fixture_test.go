package tui

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
)

// fixtureSnapshot runs a recorded fixture through the real analyzer with the default detectors.
func fixtureSnapshot(t testing.TB, names ...string) *engine.Snapshot {
	t.Helper()
	a := engine.New(engine.Config{Detectors: suite.Default()})
	for _, name := range names {
		body, err := fixtures.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			b, err := spans.DecodeJSON(append([]byte(nil), line...), spans.DecodeOptions{AllAttributes: true})
			if err != nil {
				t.Fatalf("fixture %s: %v", name, err)
			}
			if err := a.ConsumeBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Flush()
	return a.Snapshot(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
}

// TestFixtureScreensGolden: three retrying layers (fixtures/amplification-27-reference,
// recorded from the reference client with the real SDK) through the real analyzer, every screen.
func TestFixtureScreensGolden(t *testing.T) {
	snap := fixtureSnapshot(t, "amplification-27-reference")
	base := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH))
	screens := []struct {
		name string
		keys []tea.Msg
		want []string
	}{
		{"dependencies", nil, []string{"▲ WORST", "27.00x"}},
		{"operations", []tea.Msg{press("2")}, []string{"503 503 503"}},
		{"findings", []tea.Msg{press("3")}, []string{"retry-amplification", "layers=edge x3 -> api x3 -> adapter x3"}},
		{"trace", []tea.Msg{press("3"), press("enter")}, []string{"3 x 3 x 3 = 27 calls to", "edge x3 -> api x3 -> adapter x3", "#3/3"}},
		{"span", []tea.Msg{press("3"), press("enter"), press("enter")}, []string{"span_id", "attributes ("}},
		{"trace-80x24", []tea.Msg{size(80, 24), press("3"), press("enter")}, []string{"3 x 3 x 3 = 27 calls to", "#1/3"}},
	}
	for _, sc := range screens {
		t.Run(sc.name, func(t *testing.T) {
			m := drive(t, base, sc.keys...)
			v := m.View()
			for _, w := range sc.want {
				if !strings.Contains(v, w) {
					t.Errorf("%s screen lacks %q:\n%s", sc.name, w, v)
				}
			}
			requireGolden(t, v)
		})
	}
}

// TestFixtureFanoutSideBySide: the fan-out fixture's second attempt shows its two copies, each
// with the origin it reached, under one attempt number.
func TestFixtureFanoutSideBySide(t *testing.T) {
	snap := fixtureSnapshot(t, "fanout-reference")
	m := drive(t, New(testOptions(fixedSource(snap))), size(testW, testH), press("3"), press("enter"))
	v := m.View()
	for _, want := range []string{"fan-out 1/2 → primary-", "fan-out 2/2 → primary-", "one retrying layer: 2 calls to"} {
		if !strings.Contains(v, want) {
			t.Errorf("fan-out trace lacks %q:\n%s", want, v)
		}
	}
	if n := strings.Count(v, "#2/2 retry ok"); n != 2 {
		t.Errorf("both copies should carry attempt #2/2: %d", n)
	}
}
