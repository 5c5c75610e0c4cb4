package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// readJaeger feeds the analyzer the traces of --service over the last --since that the Jaeger at
// --jaeger has, and returns the notes for the report and the Jaeger UI's trace page as a
// Report.TraceURL.
func readJaeger(ctx context.Context, a *engine.Engine, o analyzeOptions) (notes []string, traceURL string, err error) {
	if o.since <= 0 {
		return nil, "", fmt.Errorf("--since %s: must be positive", o.since)
	}
	c, err := o.jaeger.client(spans.DecodeOptions{})
	if err != nil {
		return nil, "", err
	}
	end := time.Now()
	traces, found, err := c.FindTraces(ctx, jaegerQuery(o.jaeger, end.Add(-o.since), end))
	if err != nil {
		return nil, "", fmt.Errorf("read traces from Jaeger at %s: %w", c.URL(), err)
	}
	if len(traces) == 0 && !o.allowEmpty {
		return nil, "", fmt.Errorf("no trace of service %q in the last %s at the Jaeger at %s (--allow-empty accepts that)", o.jaeger.service, o.since, c.URL())
	}
	// Oldest first, as a recording would have them, so settling by recorded time sees each
	// trace after the ones before it.
	sort.SliceStable(traces, func(i, j int) bool { return traceStart(traces[i]) < traceStart(traces[j]) })
	nspans := 0
	for _, b := range traces {
		o.mem.check()
		nspans += len(b.Spans)
		if o.settle > 0 {
			end := int64(0)
			for i := range b.Spans {
				end = max(end, b.Spans[i].EndUnixNano)
			}
			a.Settle(time.Unix(0, end))
		}
		if err := a.ConsumeBatch(ctx, b); err != nil {
			return nil, "", fmt.Errorf("the Jaeger at %s: %w", c.URL(), err)
		}
	}
	notes = append(notes, fmt.Sprintf("read %d traces (%d spans) of service %q over the last %s from Jaeger at %s (%s)",
		len(traces), nspans, o.jaeger.service, o.since, c.URL(), c.API()))
	// What the search returned, which --limit bounds: a trace whose spans name other trace ids
	// is analyzed as several.
	if found >= o.jaeger.limit {
		notes = append(notes, fmt.Sprintf("the search returned --limit %d traces: Jaeger may have more; raise --limit or shorten --since", o.jaeger.limit))
	}
	return notes, c.URL() + "/trace/{trace_id}", nil
}

func traceStart(b *spans.Batch) int64 {
	start := int64(0)
	for i := range b.Spans {
		if s := b.Spans[i].StartUnixNano; start == 0 || s < start {
			start = s
		}
	}
	return start
}
