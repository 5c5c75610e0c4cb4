package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// TestReportAlwaysCarriesNotes: the JSON report has a notes list even when there is nothing to
// say, so a reader never meets null or an absent field.
func TestReportAlwaysCarriesNotes(t *testing.T) {
	for _, r := range []analyzer.Report{engine.New(engine.Config{}).Report(), func() analyzer.Report {
		_, r := run(t, engine.Config{}, twoLayerTrace(1)...)
		return r
	}()} {
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), `"notes":[`) {
			t.Errorf("report without a notes list: %s", out)
		}
	}
}

// TestNotesUnsetAndFutureTimes: spans with a time of 0, or more than a day ahead of the clock,
// are counted in a note; spans with sound times are not.
func TestNotesUnsetAndFutureTimes(t *testing.T) {
	clk := &clock{t: time.Unix(0, t0)}
	a := engine.New(engine.Config{Settle: time.Second, Now: clk.Now})
	unsetStart := sp(1, 1, 0, spans.KindServer, "api", 0, 10)
	unsetStart.StartUnixNano = 0
	unsetEnd := sp(1, 2, 1, spans.KindClient, "api", 1, 9)
	unsetEnd.EndUnixNano = 0
	future := sp(1, 3, 1, spans.KindClient, "api", 1, 9)
	future.StartUnixNano = clk.Now().Add(48 * time.Hour).UnixNano()
	future.EndUnixNano = future.StartUnixNano + 1
	sound := sp(1, 4, 1, spans.KindClient, "api", 1, 9)
	soonish := sp(1, 5, 1, spans.KindClient, "api", 1, 9) // a host whose clock is an hour ahead
	soonish.EndUnixNano = clk.Now().Add(time.Hour).UnixNano()
	consume(t, a, unsetStart, unsetEnd, future, sound, soonish)
	a.Flush()
	r := a.Report()
	if !hasNote(r, "2 spans have a start or end time of 0") || !hasNote(r, "1 spans have times more than a day ahead") {
		t.Errorf("notes %q: want 2 spans with time 0 and 1 in the future", r.Notes)
	}
}
