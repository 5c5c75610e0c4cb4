package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

var t0 = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano()

const msec = int64(time.Millisecond)

func tid(n byte) spans.TraceID { return spans.TraceID{0xaa, n, 1} }
func sid(n int) spans.SpanID   { return spans.SpanID{0x5, byte(n >> 16), byte(n >> 8), byte(n), 1} }

// resources shares one Resource per service among the spans tests build; tests build spans from
// several goroutines (TestConcurrentConsumeSettleSnapshot), hence the lock.
var (
	resourcesMu sync.Mutex
	resources   = map[string]*spans.Resource{}
)

func res(service string) *spans.Resource {
	resourcesMu.Lock()
	defer resourcesMu.Unlock()
	if r, ok := resources[service]; ok {
		return r
	}
	r := &spans.Resource{ServiceName: service}
	resources[service] = r
	return r
}

// sp builds a span: ids by number (0 parent = none), times in ms from t0.
func sp(trace byte, id, parent int, kind spans.Kind, service string, start, end int64, attrs ...spans.Attr) spans.Span {
	s := spans.Span{TraceID: tid(trace), SpanID: sid(id), Kind: kind, Name: "op", Resource: res(service),
		StartUnixNano: t0 + start*msec, EndUnixNano: t0 + end*msec, Attrs: attrs}
	if parent != 0 {
		s.ParentID = sid(parent)
	}
	return s
}

// get builds the attributes of an otelhttp-like GET to url with a status (0: none).
func get(url string, status int) []spans.Attr {
	a := []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, url)}
	if status > 0 {
		a = append(a, spans.IntAttr(spans.AttrHTTPStatus, int64(status)))
	}
	return a
}

func run(t testing.TB, cfg engine.Config, ss ...spans.Span) (*engine.Engine, analyzer.Report) {
	t.Helper()
	if cfg.Detectors == nil {
		cfg.Detectors = suite.Default()
	}
	a := engine.New(cfg)
	if err := a.ConsumeBatch(context.Background(), &spans.Batch{Spans: ss}); err != nil {
		t.Fatal(err)
	}
	a.Flush()
	return a, a.Report()
}

func hasNote(r analyzer.Report, part string) bool {
	for _, n := range r.Notes {
		if contains(n, part) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// workloadBatches makes about n spans of the synthetic workload in 512-span batches once, and
// returns a function giving a fresh copy of them for each run (the analyzer takes a batch's spans).
func workloadBatches(n int) func() []*spans.Batch {
	var batches []*spans.Batch
	w := workload.NewWorkload(t0)
	for done := 0; done < n; {
		b := &spans.Batch{}
		done += w.Fill(b, 512)
		batches = append(batches, b)
	}
	return func() []*spans.Batch {
		out := make([]*spans.Batch, len(batches))
		for i, b := range batches {
			out[i] = &spans.Batch{Spans: slices.Clone(b.Spans)}
		}
		return out
	}
}
