package cost_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/cost"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/reference/lab"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// Layered retries, recorded: the reference lab's run of three layers (the reference client over
// loopback sockets, its backoff recorded on each attempt) and the 27- and 64-call fixtures, stock
// and reference. A request's added latency is what its layers put in, counted from the top: the
// top layer's failed tries and pauses, then, inside its last try, the next layer's, and so on
// down - the retries inside a failed try are in that try's time already.
func TestLayeredRetriesAddWhatTheLayersPutIn(t *testing.T) {
	checked := 0
	for _, name := range []string{"lab-layers", "amplification-27-stock", "amplification-27-reference",
		"amplification-64-stock", "amplification-64-reference"} {
		a := engine.New(engine.Config{Detectors: []*analyzer.Detector{layersProbe(t, name, &checked)}, MaxSpans: -1})
		detectortest.Feed(t, a, name)
	}
	if checked < 8 {
		t.Errorf("checked %d requests, want every storm request of the five recordings", checked)
	}
}

// The same, on a lab run made now: the reference client and its origins over loopback sockets.
func TestLabRunAddsWhatTheLayersPutIn(t *testing.T) {
	var buf bytes.Buffer
	w := tracefile.NewWriter(&buf, tracefile.FormatJSONLines)
	if _, err := lab.Record(context.Background(), "layers", tracefile.NewSpanExporter(w)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	checked := 0
	a := engine.New(engine.Config{Detectors: []*analyzer.Detector{layersProbe(t, "lab run", &checked)}, MaxSpans: -1})
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		b, err := spans.DecodeJSON(line, spans.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.ConsumeBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	a.Flush()
	if checked == 0 {
		t.Error("the lab run had no request with retries to check")
	}
}

// layersProbe checks each request of the traces it sees against putIn, counting them in checked.
func layersProbe(t *testing.T, name string, checked *int) *analyzer.Detector {
	return &analyzer.Detector{Name: "probe", Title: "probe", Doc: "checks layered added latency for the test", Run: func(p *analyzer.Pass) error {
		reqs := cost.Measure(p.Trace, p.Operations, p.RunSettings.Skew())
		if len(reqs) != 1 {
			return nil
		}
		var failed, paused int64
		for _, o := range p.Operations {
			if o.Parent == nil {
				f, pz := putIn(o, p.Operations)
				failed, paused = failed+f, paused+pz
			}
		}
		if failed+paused == 0 {
			return nil // the healthy half of the lab's run
		}
		*checked++
		got := reqs[0].Parts
		// Within 1 ms, though a layer's clock is 2 ms off its caller's in amplification-27.
		const tol = 1_000_000
		if d := got.Added() - (failed + paused); d < -tol || d > tol {
			t.Errorf("%s: added %.3f ms (failed %.3f, paused %.3f), the layers put in %.3f (failed %.3f, paused %.3f)", name,
				ms3(got.Added()), ms3(got.Failed), ms3(got.Paused), ms3(failed+paused), ms3(failed), ms3(paused))
		}
		return nil
	}}
}

// putIn is what operation o's retries put into its request's wait: its failed tries and the
// pauses between its tries, and what the operations inside its last try put in.
func putIn(o *analyzer.Operation, ops []*analyzer.Operation) (failed, paused int64) {
	at := o.Attempts
	if len(at) == 0 {
		return 0, 0
	}
	for i := range at {
		if i < len(at)-1 {
			failed += at[i].EndUnixNano - at[i].StartUnixNano
		}
		if i > 0 {
			paused += at[i].StartUnixNano - at[i-1].EndUnixNano
		}
	}
	last := at[len(at)-1]
	for _, c := range ops {
		if c.Parent == o && c.StartUnixNano >= last.StartUnixNano-5_000_000 && c.StartUnixNano <= last.EndUnixNano {
			f, p := putIn(c, ops)
			failed, paused = failed+f, paused+p
		}
	}
	return failed, paused
}

func ms3(ns int64) float64 { return float64(ns) / 1e6 }
