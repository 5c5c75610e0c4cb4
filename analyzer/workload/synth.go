package workload

import (
	"context"

	"github.com/stormwatch/stormwatch/spans"
)

// tmplSpan is one span of a trace template: ids are indexes into the template, times are
// microseconds from the trace's start.
type tmplSpan struct {
	parent     int // -1 for the root
	kind       spans.Kind
	res        *spans.Resource
	name       string
	start, end int64
	status     spans.StatusCode
	attrs      []spans.Attr
}

type template []tmplSpan

func resource(name string) *spans.Resource { return &spans.Resource{ServiceName: name} }

var (
	edge, api, catalog, pricing, db, adapter, dep = resource("edge"), resource("api"), resource("catalog"),
		resource("pricing"), resource("db"), resource("adapter"), resource("dep")
)

func httpGet(url string, status int64) []spans.Attr {
	return []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"), spans.StringAttr(spans.AttrURLFull, url),
		spans.IntAttr(spans.AttrHTTPStatus, status)}
}

func grpcCall(addr, method, status string) []spans.Attr {
	return []spans.Attr{spans.StringAttr(spans.AttrRPCSystem, "grpc"), spans.StringAttr(spans.AttrRPCMethod, method),
		spans.StringAttr(spans.AttrServerAddress, addr), spans.IntAttr(spans.AttrServerPort, 9090),
		spans.StringAttr(spans.AttrRPCStatus, status)}
}

// call appends a CLIENT span under parent and the callee's SERVER span, returning the SERVER's index.
func (t *template) call(parent int, from, to *spans.Resource, attrs []spans.Attr, start, end int64, failed bool) int {
	st := spans.StatusUnset
	if failed {
		st = spans.StatusError
	}
	*t = append(*t, tmplSpan{parent: parent, kind: spans.KindClient, res: from, name: "HTTP GET", start: start, end: end, status: st, attrs: attrs})
	c := len(*t) - 1
	*t = append(*t, tmplSpan{parent: c, kind: spans.KindServer, res: to, name: "GET /x", start: start + 100, end: end - 100, status: st})
	return len(*t) - 1
}

// healthy: edge -> api -> (catalog -> db, pricing over gRPC in parallel). 9 spans.
func healthy() template {
	t := template{{parent: -1, kind: spans.KindServer, res: edge, name: "GET /page/{id}", start: 0, end: 50_000}}
	a := t.call(0, edge, api, httpGet("http://api:8080/page/1", 200), 1000, 49_000, false)
	c := t.call(a, api, catalog, httpGet("http://catalog:8080/items/1", 200), 2000, 30_000, false)
	t.call(c, catalog, db, grpcCall("db", "store.v1.Store/Get", "OK"), 3000, 20_000, false)
	t.call(a, api, pricing, grpcCall("pricing", "pricing.v1.Prices/Quote", "OK"), 2500, 25_000, false)
	return t
}

// transient: edge -> api -> adapter, which retries dep once after a 503. 9 spans.
func transient() template {
	t := template{{parent: -1, kind: spans.KindServer, res: edge, name: "GET /items/{id}", start: 0, end: 80_000}}
	a := t.call(0, edge, api, httpGet("http://api:8080/items/1", 200), 1000, 79_000, false)
	d := t.call(a, api, adapter, httpGet("http://adapter:8080/c/1", 200), 2000, 78_000, false)
	t.call(d, adapter, dep, httpGet("http://dep:8080/s/1", 503), 3000, 10_000, true)
	t.call(d, adapter, dep, httpGet("http://dep:8080/s/1", 200), 30_000, 40_000, false)
	return t
}

// storm: edge retries api 3 times, api retries dep 3 times per call, dep fails. 25 spans.
func storm() template {
	t := template{{parent: -1, kind: spans.KindServer, res: edge, name: "GET /items/{id}", start: 0, end: 400_000}}
	for e := range int64(3) {
		base := 1000 + e*120_000
		a := t.call(0, edge, api, httpGet("http://api:8080/items/1", 503), base, base+100_000, true)
		for k := range int64(3) {
			s := base + 1000 + k*30_000
			t.call(a, api, dep, httpGet("http://dep:8080/s/1", 503), s, s+20_000, true)
		}
	}
	return t
}

var templates = func() []template {
	h, tr, s := healthy(), transient(), storm()
	// 7 healthy, 2 transient, 1 storm out of every 10 traces: about 11 spans a trace.
	return []template{h, h, tr, h, h, s, h, tr, h, h}
}()

// Workload generates synthetic traffic of realistic multi-layer traces: mostly healthy requests
// through four services, some with one transient retry, one in ten a retry storm (3 x 3 calls to
// a failing dependency). Spans of each trace are emitted children first, as exporters send them.
type Workload struct {
	n     uint64
	start int64
}

// NewWorkload starts a workload whose first trace begins at startUnixNano.
func NewWorkload(startUnixNano int64) *Workload { return &Workload{start: startUnixNano} }

// Fill appends whole traces to b until it holds at least n spans, and returns the spans added.
// Attribute slices and resources are shared between traces (the analyzer only swaps their strings
// for equal interned ones, so sharing is harmless within one goroutine),
// so generating costs little beside the span structs themselves.
func (w *Workload) Fill(b *spans.Batch, n int) int {
	added := 0
	for added < n {
		t := templates[w.n%uint64(len(templates))]
		w.n++
		var tid spans.TraceID
		for i := range 8 {
			tid[i] = byte(w.n >> (8 * i))
		}
		tid[15] = 1
		at := w.start + int64(w.n)*1_000_000 // a new request every millisecond
		for i := len(t) - 1; i >= 0; i-- {
			ts := &t[i]
			s := spans.Span{TraceID: tid, SpanID: spanID(w.n, i), Kind: ts.kind, Status: ts.status, Name: ts.name,
				StartUnixNano: at + ts.start*1000, EndUnixNano: at + ts.end*1000, Resource: ts.res, Attrs: ts.attrs}
			if ts.parent >= 0 {
				s.ParentID = spanID(w.n, ts.parent)
			}
			b.Spans = append(b.Spans, s)
		}
		added += len(t)
	}
	return added
}

// Traces is the number of traces generated so far.
func (w *Workload) Traces() uint64 { return w.n }

func spanID(trace uint64, i int) spans.SpanID {
	var s spans.SpanID
	v := trace<<8 | uint64(i+1)
	for k := range 8 {
		s[k] = byte(v >> (8 * k))
	}
	return s
}

// Feed hands c at least n spans of the workload in batches of about 512 spans, as a collector
// would, each batch in storage of its own (consumers may keep it). edit, when not nil, may rewrite
// each batch before it is handed over.
func (w *Workload) Feed(c spans.Consumer, n int, edit func(*spans.Batch)) error {
	for done := 0; done < n; {
		batch := &spans.Batch{Spans: make([]spans.Span, 0, 600)}
		done += w.Fill(batch, min(512, n-done))
		if edit != nil {
			edit(batch)
		}
		if err := c.ConsumeBatch(context.Background(), batch); err != nil {
			return err
		}
	}
	return nil
}
