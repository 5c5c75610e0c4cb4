package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
)

// BenchmarkAnalyzeDeep is the analyzer's share of the collector connector's work: the
// request its benchmark sends, the amplification-27-reference fixture (2 traces of 92 spans,
// three retrying layers) in one batch, analyzed over and over by one long-lived analyzer configured as the
// connector configures it (the default suite, the built-in policy in live mode, spans held and
// packed after analysis: ReleaseSpans off). Each iteration gives the fixture's traces fresh ids,
// feeds them and settles, so every trace is assembled, inferred, detected and packed once.
// The windowed re-runs never come due (WindowInterval a century): the fake clock jumps a settle
// period per iteration and would run them every time, which the connector does every 10 s. (Not
// -1, which would make it an offline analyzer, holding its operations as values: see
// Config.holdsOperationsPacked.)
//
// Copying the spans with new trace ids is inside the timed loop (one slice copy per request,
// the same for every build being compared).
func BenchmarkAnalyzeDeep(b *testing.B) {
	// One request of the connector's benchmark is the whole fixture in one export (its records
	// merged), which the connector converts to one batch.
	src := detectortest.Spans(b, "amplification-27-reference")
	n := len(src)
	a := newBenchLiveAnalyzer(time.Second, 0)
	now := time.Unix(1_800_000_000, 0)
	ids := map[spans.TraceID]spans.TraceID{}
	var seq uint64
	m := startSpanMeter(b)
	for range b.N {
		clear(ids)
		batch := &spans.Batch{Spans: appendRenumbered(make([]spans.Span, 0, len(src)), src, ids, &seq)}
		if err := a.ConsumeBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		now = now.Add(2 * time.Second)
		a.Settle(now)
	}
	m.stop(b)
	if r := a.Report(); r.Input.Spans < b.N*n {
		b.Fatalf("analyzed %d spans, want %d", r.Input.Spans, b.N*n)
	}
	m.report(b, n)
}

// newBenchLiveAnalyzer is a long-lived analyzer configured as the connector and collect configure
// theirs (the default suite, the built-in policy in live mode), whose windowed re-runs never come
// due (see BenchmarkAnalyzeDeep). settle and maxSpans are Config.Settle and Config.MaxSpans.
func newBenchLiveAnalyzer(settle time.Duration, maxSpans int) *engine.Engine {
	cfg := engine.Config{Settle: settle, WindowInterval: 100 * 365 * 24 * time.Hour, MaxSpans: maxSpans, Detectors: suite.Default()}
	policy.Configure(&cfg.Detectors, &cfg.Settings, nil, policy.Live)
	return engine.New(cfg)
}

// appendRenumbered appends a copy of src to dst with trace ids of its own: ids maps the ids of src
// to the new ones, and a trace not in it yet gets the next number of seq. Clearing ids gives the
// traces fresh ids again; keeping it gives a trace whose spans come in several calls one id.
func appendRenumbered(dst, src []spans.Span, ids map[spans.TraceID]spans.TraceID, seq *uint64) []spans.Span {
	for _, s := range src {
		id, ok := ids[s.TraceID]
		if !ok {
			*seq++
			binary.BigEndian.PutUint64(id[8:], *seq)
			id[0] = 0x5e
			ids[s.TraceID] = id
		}
		s.TraceID = id
		dst = append(dst, s)
	}
	return dst
}

// BenchmarkAnalyzeLive is the analyzer's share of `stormwatch collect`'s end-to-end benchmark
// (BenchmarkCollectorEndToEnd): its payload (workload.PayloadTrace: ten spans a trace, an id in every URL)
// in requests of 100 spans, consumed and settled by one long-lived analyzer configured as `collect`
// configures it (the default suite, the built-in policy in live mode). The requests cycle through
// 8,000 traces, as the end-to-end blaster cycles through its requests, and each round gives them
// fresh ids: the caches see as many distinct URLs as they do there. Settling every 64 requests
// stands in for the settle ticker; the windowed re-runs never come due (see BenchmarkAnalyzeDeep).
//
// max-spans=default holds every span it is given (the store only grows). max-spans=2000 keeps
// the store full, as a collector's is once it has run for a while: every request evicts the
// oldest traces, most of them before they are settled (analyzed as they are, their result
// dropped), the rest analyzed already.
func BenchmarkAnalyzeLive(b *testing.B) {
	b.Run("max-spans=default", func(b *testing.B) { benchAnalyzeLive(b, 0) })
	b.Run("max-spans=2000", func(b *testing.B) { benchAnalyzeLive(b, 2000) })
}

func benchAnalyzeLive(b *testing.B, maxSpans int) {
	const traces, perRequest, settleEvery = 8000, 100, 64
	var src []spans.Span
	for n := range traces {
		src = append(src, workload.PayloadTrace(n, 1_700_000_000_000_000_000)...)
	}
	a := newBenchLiveAnalyzer(time.Second, maxSpans)
	now := time.Unix(1_800_000_000, 0)
	ids := map[spans.TraceID]spans.TraceID{}
	var seq uint64
	off := 0
	m := startSpanMeter(b)
	for i := range b.N {
		if off == len(src) {
			off = 0
		}
		clear(ids)
		batch := &spans.Batch{Spans: appendRenumbered(make([]spans.Span, 0, perRequest), src[off:off+perRequest], ids, &seq)}
		off += perRequest
		if err := a.ConsumeBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		if i%settleEvery == settleEvery-1 {
			now = now.Add(2 * time.Second)
			a.Settle(now)
		}
	}
	a.Flush()
	m.stop(b)
	if r := a.Report(); r.Input.Spans < b.N*perRequest {
		b.Fatalf("analyzed %d spans, want %d", r.Input.Spans, b.N*perRequest)
	}
	m.report(b, perRequest)
}

// BenchmarkAnalyzeRealisticLive is the live analyzer on the traffic `stormwatch analyze` is measured
// on (workload.RealisticTraffic: four services' semconv HTTP and gRPC spans, reference-client
// retries, 8-12 spans a trace, each trace's spans spread over several SDK exports), configured as
// `collect` configures it by default (the default suite, the built-in policy in live mode,
// --settle 2s). One op is one line of the recording, an SDK export of about 512 spans, decoded
// into a batch as the collector hands it over; a settle tick comes every four lines, about 200 ms
// of the recording, as collect ticks every 200 ms; a trace's last spans come up to about 30 lines
// (1.5 s) after its first, within the settle period. The lines are decoded once, before the
// timer starts: 60,000 spans, cycled, each round giving their traces fresh ids (copying a line's
// spans with new ids is inside the timed loop, the same for every build being compared). The
// windowed re-runs never come due (see BenchmarkAnalyzeDeep).
//
// max-spans=default holds every span it is given (the store only grows). max-spans=50000 keeps
// the store full, as a collector's is once it has run for a while: one round fills it before the
// timer starts, and every line then evicts the least recently updated traces, most of them
// analyzed already (about 2 s of traffic, some 20,000 spans, is still settling at any time).
func BenchmarkAnalyzeRealisticLive(b *testing.B) {
	const poolSpans = 60_000
	var out bytes.Buffer
	out.Grow(poolSpans * 850) // about 815 bytes a span
	if err := workload.NewRealisticTraffic(&out).WriteSpans(poolSpans); err != nil {
		b.Fatal(err)
	}
	var pool []*spans.Batch
	for line := range bytes.Lines(out.Bytes()) {
		batch, err := spans.DecodeJSON(line, spans.DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pool = append(pool, batch)
	}
	b.Run("max-spans=default", func(b *testing.B) { benchAnalyzeRealisticLive(b, pool, 0) })
	b.Run("max-spans=50000", func(b *testing.B) { benchAnalyzeRealisticLive(b, pool, 50_000) })
}

func benchAnalyzeRealisticLive(b *testing.B, pool []*spans.Batch, maxSpans int) {
	const settleEvery = 4 // lines: 200 ms of the recording
	a := newBenchLiveAnalyzer(2*time.Second, maxSpans)
	now := time.Unix(1_800_000_000, 0)
	ids := map[spans.TraceID]spans.TraceID{}
	var seq uint64
	fed, next, lines := 0, 0, 0
	feed := func() {
		if next == len(pool) {
			next = 0
		}
		if next == 0 {
			clear(ids)
		}
		src := pool[next].Spans
		next++
		batch := &spans.Batch{Spans: appendRenumbered(make([]spans.Span, 0, len(src)), src, ids, &seq)}
		fed += len(src)
		if err := a.ConsumeBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		if lines++; lines%settleEvery == 0 {
			now = now.Add(200 * time.Millisecond)
			a.Settle(now)
		}
	}
	if maxSpans > 0 {
		for range pool {
			feed()
		}
	}
	before := fed
	m := startSpanMeter(b)
	for range b.N {
		feed()
	}
	a.Flush()
	m.stop(b)
	if r := a.Report(); r.Input.Spans < fed {
		b.Fatalf("analyzed %d spans, want %d", r.Input.Spans, fed)
	}
	m.reportSpans(b, float64(fed-before))
}

// BenchmarkAnalyzeCollectorPayload is `collect`'s work on BenchmarkCollectorEndToEnd's own
// requests (workload.CollectorRequests) less the transport: each op decodes one request of
// 100 spans from its protobuf bytes into a reused batch packed by trace, as the collector does
// (spans.DecodeOptions.PackByTrace: the packed blocks written straight from the wire), and the
// live analyzer configured as `collect` configures it consumes it. As the end-to-end blaster does,
// the requests cycle through 8,192 distinct ones, each pass with trace ids of its own, patched into
// the pre-encoded requests where the ids lie (found once; see traceIDSites). The clock
// moves 1/3000 s a request (about the rate collect takes them at on 2 cores) and a settle tick
// comes every 60 requests (20 ms); the windowed re-runs never come due (see
// BenchmarkAnalyzeDeep).
//
// The store is at collect's default bound (--max-spans 1000000) before the timer starts, filled
// with other traces and then turned over once, as the end-to-end benchmark's WARM=1 leaves it:
// held at its bound, its heap grown to the garbage collector's goal. That setup (2M spans) is
// made once per process and shared by the runs of this benchmark.
func BenchmarkAnalyzeCollectorPayload(b *testing.B) {
	st := collectorPayloadState(b)
	m := startSpanMeter(b)
	for range b.N {
		st.feed(b)
	}
	m.stop(b)
	m.report(b, 100)
}

type collectorPayload struct {
	a     *engine.Engine
	reqs  [][]byte
	sites [][]int  // of each of reqs: its trace ids' offsets (traceIDSites)
	ids   []uint64 // the pass each of reqs carries the ids of (see consume)
	batch spans.Batch
	next  int
	pass  uint64 // of reqs, from 1
	fed   int
	now   time.Time
}

var collectorPayloadOnce struct {
	sync.Once
	st *collectorPayload
}

func collectorPayloadState(b *testing.B) *collectorPayload {
	collectorPayloadOnce.Do(func() {
		const bound, distinct = 1_000_000, 8192
		t0 := uint64(time.Unix(1_800_000_000, 0).UnixNano())
		reqs, _ := workload.CollectorRequests(distinct, 0, t0)
		st := &collectorPayload{a: newBenchLiveAnalyzer(2*time.Second, bound), reqs: reqs, ids: make([]uint64, len(reqs)), now: time.Unix(1_800_000_000, 0)}
		for _, r := range reqs {
			st.sites = append(st.sites, traceIDSites(b, r))
		}
		for round := range 2 {
			fill, _ := workload.CollectorRequests(bound/100, 1<<44+uint64(round)<<36, t0)
			for _, r := range fill {
				st.consume(b, r)
			}
		}
		collectorPayloadOnce.st = st
	})
	return collectorPayloadOnce.st
}

func (st *collectorPayload) feed(b *testing.B) {
	if st.next == 0 {
		st.pass++
	}
	// The request's trace ids become the pass's: their first eight bytes xor'ed with pass<<32,
	// from the pass they carry now.
	req, x := st.reqs[st.next], (st.ids[st.next]^st.pass)<<32
	for _, at := range st.sites[st.next] {
		id := req[at : at+8]
		binary.BigEndian.PutUint64(id, binary.BigEndian.Uint64(id)^x)
	}
	st.ids[st.next] = st.pass
	st.consume(b, req)
	st.next = (st.next + 1) % len(st.reqs)
}

// consume decodes req packed by trace, as collect's collector does, and feeds it.
func (st *collectorPayload) consume(b *testing.B, req []byte) {
	if err := spans.DecodeProtoInto(&st.batch, req, spans.DecodeOptions{PackByTrace: true}); err != nil {
		b.Fatal(err)
	}
	if err := st.a.ConsumeBatch(context.Background(), &st.batch); err != nil {
		b.Fatal(err)
	}
	st.now = st.now.Add(time.Second / 3000)
	if st.fed++; st.fed%60 == 0 {
		st.a.Settle(st.now)
	}
}

// traceIDSites are the offsets in req, an OTLP/protobuf ExportTraceServiceRequest, of its spans'
// 16-byte trace ids (resource_spans 1 > scope_spans 2 > spans 2 > trace_id 1), found by walking
// it once, so that a pass patches them where they lie, as the end-to-end blaster does. The
// workload's spans have no links, whose trace ids would have to be patched as well.
func traceIDSites(b *testing.B, req []byte) []int {
	var sites []int
	// walk calls f with each length-delimited field numbered num of msg and its offset in req.
	walk := func(msg []byte, num protowire.Number, f func(v []byte)) {
		for len(msg) > 0 {
			n, typ, l := protowire.ConsumeTag(msg)
			if l < 0 {
				b.Fatal(protowire.ParseError(l))
			}
			msg = msg[l:]
			if typ == protowire.BytesType {
				v, l := protowire.ConsumeBytes(msg)
				if l < 0 {
					b.Fatal(protowire.ParseError(l))
				}
				if n == num {
					f(v)
				}
				msg = msg[l:]
				continue
			}
			if l = protowire.ConsumeFieldValue(n, typ, msg); l < 0 {
				b.Fatal(protowire.ParseError(l))
			}
			msg = msg[l:]
		}
	}
	walk(req, 1, func(rs []byte) {
		walk(rs, 2, func(ss []byte) {
			walk(ss, 2, func(sp []byte) {
				walk(sp, 1, func(id []byte) {
					if len(id) != 16 {
						b.Fatalf("a trace id of %d bytes", len(id))
					}
					sites = append(sites, cap(req)-cap(id)) // id aliases req up to its end
				})
			})
		})
	})
	if len(sites) != 100 {
		b.Fatalf("found %d trace ids in a request of 100 spans", len(sites))
	}
	return sites
}
