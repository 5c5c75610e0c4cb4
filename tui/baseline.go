package tui

import (
	"fmt"
	"math"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/words"
)

// baseline is a moment marked with b on the dependencies screen: each dependency's figures then,
// so that the screen can show what happened since (after a fix, a deploy, a flag flip).
// Snapshot figures are totals over what is held, so "since" is the difference of two totals.
type baseline struct {
	at   int64 // the marked snapshot's time
	figs map[string]depFigures
}

type depFigures struct {
	calls, logical int
	amplification  float64
}

func newBaseline(at int64, rows []depRow) *baseline {
	b := &baseline{at: at, figs: make(map[string]depFigures, len(rows))}
	for i := range rows {
		d := rows[i].d
		b.figs[d.Dependency] = depFigures{d.PhysicalCalls, d.LogicalOperations, d.Amplification}
	}
	return b
}

// since is one dependency's change since the baseline: the calls and logical operations added,
// and the amplification of that added traffic beside the amplification at the baseline.
type since struct {
	calls, logical int
	// before is the amplification at the baseline (0 when the dependency was not called then);
	// after is that of the traffic since (valid when logical > 0).
	before, after float64
	known         bool // the dependency existed at the baseline
}

func (b *baseline) since(d *analyzer.DependencyStats) since {
	f, ok := b.figs[d.Dependency]
	s := since{calls: d.PhysicalCalls - f.calls, logical: d.LogicalOperations - f.logical, before: f.amplification, known: ok}
	if s.logical > 0 && s.calls >= 0 {
		s.after = float64(s.calls) / float64(s.logical)
	}
	return s
}

// moved says whether there is traffic since to compare; totals that went down (evicted or
// cleared data) have none.
func (s since) moved() bool { return s.logical > 0 && s.calls >= 0 }

// cells are the three columns shown while a baseline is set: calls and logical operations added,
// and the amplification then -> since with an arrow.
func (s since) cells() (calls, logical, ampl string) {
	if !s.moved() {
		return "-", "-", "no traffic since"
	}
	calls, logical = "+"+humanInt(s.calls), "+"+humanInt(s.logical)
	if !s.known {
		return calls, logical, fmt.Sprintf("new %.2fx", s.after)
	}
	return calls, logical, fmt.Sprintf("%s %.2f→%.2fx", arrow(s.after-s.before), s.before, s.after)
}

func arrow(change float64) string {
	switch {
	case change > 0.005:
		return "↑"
	case change < -0.005:
		return "↓"
	}
	return "="
}

// headline is the dependencies screen's first line while a baseline is set: since when, and the
// dependency whose amplification moved most ("since the baseline 2m0s ago, dep went 27.00x ->
// 3.00x").
// On a narrow screen the counts go first, then the scheme, so the figures are never cut.
func (b *baseline) headline(now int64, rows []depRow, width int) string {
	when := "since the baseline " + time.Duration(max(now-b.at, 0)).Round(time.Second).String() + " ago"
	best, bestChange := -1, -1.0
	for i := range rows {
		s := b.since(rows[i].d)
		if !s.moved() || !s.known {
			continue
		}
		if c := math.Abs(s.after - s.before); c > bestChange {
			best, bestChange = i, c
		}
	}
	if best < 0 {
		return when + ": no traffic to a dependency seen then (B clears the baseline)"
	}
	r := &rows[best]
	s := b.since(r.d)
	line := fmt.Sprintf("%s, %s went %.2fx -> %.2fx", when, r.label, s.before, s.after)
	if full := fmt.Sprintf("%s (%s for %s since)", line, words.Count(s.calls, "call"), words.Count(s.logical, "intent")); ansi.StringWidth(full) <= width {
		return full
	}
	if ansi.StringWidth(line) <= width {
		return line
	}
	return fmt.Sprintf("%s, %s went %.2fx -> %.2fx", when, shortURL(r.label, true), s.before, s.after)
}
