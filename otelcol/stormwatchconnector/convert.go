package stormwatchconnector

import (
	"encoding/hex"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/spans"
)

// rejectInvalidID is the reason recorded for spans dropped for a zero trace or span id. It is the
// wire decoders' reason, so the figures a user sees do not depend on which path decoded the span.
const rejectInvalidID = spans.RejectInvalidID

// converter turns pdata traces into the compact span form. The collector has already decoded the
// protobuf into pdata, so the wire decoders of package spans cannot be reused; this follows the
// same rules (spanstest.FromProto is the reference): spans with a zero trace or span id are
// rejected and counted, links with a zero id are dropped, only well-known attributes are kept
// unless all is set, and arrays, maps and bytes keep their display string. Well-known keys are the
// canonical strings of spans.WellKnown, as the wire decoders give, so the analyzer's key
// comparisons and the packer's string cache hit the same strings.
//
// A converter holds no state between calls but a pool of buffers: the receiver calls
// ConsumeTraces from several goroutines at once.
type converter struct {
	all  bool
	bufs sync.Pool // *convBuf
}

func newConverter(allAttributes bool) *converter {
	return &converter{all: allAttributes}
}

// convBuf is the memory of one conversion. The analyzer copies (packs) what it keeps of a batch,
// so the connector converts every request into buffers used over and over (see withBatch) rather
// than into new ones: the spans and their attributes were about two thirds of what the connector
// allocated per request, all of it full of pointers for the garbage collector.
type convBuf struct {
	batch  spans.Batch
	spans  []spans.Span
	attrs  []spans.Attr
	links  []spans.Link
	events []spans.Event
	res    []spans.Resource
}

// maxPooledSpans bounds the buffers kept for reuse: one huge request does not leave its
// buffers behind.
const maxPooledSpans = 1 << 14

// withBatch converts td into pooled buffers and calls f with the batch, which f must not keep.
func (c *converter) withBatch(td ptrace.Traces, f func(*spans.Batch) error) error {
	cb, _ := c.bufs.Get().(*convBuf)
	if cb == nil {
		cb = &convBuf{}
	}
	err := f(c.convertInto(td, cb))
	cb.reset()
	if cap(cb.spans) <= maxPooledSpans && cap(cb.attrs) <= 16*maxPooledSpans &&
		cap(cb.links)+cap(cb.events)+cap(cb.res) <= maxPooledSpans {
		c.bufs.Put(cb)
	}
	return err
}

// reset lets go of what the last batch pointed at (td's strings) before the buffers wait in the
// pool, and makes them zero again for the next conversion (see reuse).
func (cb *convBuf) reset() {
	clear(cb.spans)
	clear(cb.attrs)
	clear(cb.links)
	clear(cb.events)
	clear(cb.res)
	cb.batch = spans.Batch{}
}

// reuse is buf with n zero elements, in buf's array when it has room: the whole array is zero
// between uses (new, or cleared by withBatch after its last use), so it is not cleared again.
func reuse[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
		return *buf
	}
	*buf = (*buf)[:n]
	return *buf
}

// wellKnown is the canonical string of a well-known key, through the wire decoders' own intern
// table (a few nanoseconds: it hashes the length and the ends of the key, where a map hashes all
// of it). The bytes are the key's own, only read.
func wellKnown(key string) (string, bool) {
	return spans.Intern(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// convert copies td into a new batch (see convertInto).
func (c *converter) convert(td ptrace.Traces) *spans.Batch {
	return c.convertInto(td, &convBuf{})
}

// convertInto copies td into a batch in cb's buffers, which must be zero (new, or cleared by
// withBatch). Memory is sized per call, not per span: spans,
// attributes, links, events and resources each live in one slice sized by a counting pass, as in
// the wire decoders. Strings are shared with td, which is safe because pdata strings are
// immutable Go strings that do not alias a reused buffer (pdata copies each one out of the
// request when it decodes it).
//
// Fields are written in place in the slabs rather than built in a local and copied: with the
// garbage collector marking (most of the time, at the collector's allocation rate), copying a
// struct that holds pointers goes through the runtime's bulk write barrier (a seventh of the
// conversion's CPU in BenchmarkConvert's profile).
func (c *converter) convertInto(td ptrace.Traces, cb *convBuf) *spans.Batch {
	cb.batch = spans.Batch{}
	b := &cb.batch
	rss := td.ResourceSpans()
	nSpans, nAttrs, nLinks, nEvents := 0, 0, 0, 0
	// The spans are written grouped by trace (in order of first appearance, request order within
	// a trace): pdata orders them by resource, so one trace's spans are spread over the request,
	// and the analyzer packs each trace's spans of a batch as one block without regrouping them.
	var groups traceGroups
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		nAttrs += rs.Resource().Attributes().Len()
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			nSpans += ss.Len()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				if tid := s.TraceID(); !tid.IsEmpty() && !s.SpanID().IsEmpty() {
					groups.count(tid)
				}
				nAttrs += s.Attributes().Len()
				pl, pe := s.Links(), s.Events()
				nLinks += pl.Len()
				nEvents += pe.Len()
				for l := 0; l < pl.Len(); l++ {
					nAttrs += pl.At(l).Attributes().Len()
				}
				for e := 0; e < pe.Len(); e++ {
					nAttrs += pe.At(e).Attributes().Len()
				}
			}
		}
	}
	if nSpans == 0 {
		return b
	}
	b.Spans = reuse(&cb.spans, groups.offsets())
	kept := 0
	// The slab is sized for every attribute: with only well-known keys kept this over-allocates,
	// which is cheaper than looking every key up twice (measured: the second lookup cost more
	// than the memory it saved on the fixtures, where nearly every attribute is kept).
	attrs := slab[spans.Attr]{s: reuse(&cb.attrs, nAttrs)[:0]}
	links := reuse(&cb.links, nLinks)[:0]
	events := reuse(&cb.events, nEvents)[:0]
	resources := reuse(&cb.res, rss.Len())

	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := &resources[i]
		start := len(attrs.s)
		for k, v := range rs.Resource().Attributes().All() {
			switch k {
			case spans.AttrServiceName:
				res.ServiceName = displayString(v)
			case spans.AttrServiceInstance:
				res.ServiceInstance = displayString(v)
			default:
				c.appendAttr(&attrs, k, v)
			}
		}
		res.Attrs = attrs.since(start)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			scope := sss.At(j).Scope().Name()
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				ps := ss.At(k)
				tid, sid := ps.TraceID(), ps.SpanID()
				if tid.IsEmpty() || sid.IsEmpty() {
					b.Rejected++
					b.RejectReason = rejectInvalidID
					continue
				}
				sp := &b.Spans[groups.slot(tid)]
				sp.TraceID = spans.TraceID(tid)
				sp.SpanID = spans.SpanID(sid)
				sp.ParentID = spans.SpanID(ps.ParentSpanID())
				sp.StartUnixNano = int64(ps.StartTimestamp())
				sp.EndUnixNano = int64(ps.EndTimestamp())
				sp.Kind = spans.Kind(ps.Kind())
				st := ps.Status()
				sp.Status = spans.StatusCode(st.Code())
				if m := st.Message(); m != "" {
					sp.StatusMessage = m
				}
				sp.Name = ps.Name()
				sp.Resource = res
				if scope != "" {
					sp.Scope = scope
				}
				start := len(attrs.s)
				for k, v := range ps.Attributes().All() {
					c.appendAttr(&attrs, k, v)
				}
				sp.Attrs = attrs.since(start)

				lstart := len(links)
				pl := ps.Links()
				for l := 0; l < pl.Len(); l++ {
					link := pl.At(l)
					if link.TraceID().IsEmpty() || link.SpanID().IsEmpty() {
						// An all-zero id is what pdata holds for an absent one, which the wire
						// decoders drop as the wrong length.
						continue
					}
					astart := len(attrs.s)
					for k, v := range link.Attributes().All() {
						c.appendAttr(&attrs, k, v)
					}
					links = links[:len(links)+1]
					ln := &links[len(links)-1]
					ln.TraceID = spans.TraceID(link.TraceID())
					ln.SpanID = spans.SpanID(link.SpanID())
					ln.Attrs = attrs.since(astart)
				}
				if len(links) > lstart {
					sp.Links = links[lstart:len(links):len(links)]
				}

				estart := len(events)
				pe := ps.Events()
				for e := 0; e < pe.Len(); e++ {
					ev := pe.At(e)
					astart := len(attrs.s)
					for k, v := range ev.Attributes().All() {
						c.appendAttr(&attrs, k, v)
					}
					events = events[:len(events)+1]
					out := &events[len(events)-1]
					out.TimeUnixNano = int64(ev.Timestamp())
					out.Name = ev.Name()
					out.Attrs = attrs.since(astart)
				}
				if len(events) > estart {
					sp.Events = events[estart:len(events):len(events)]
				}
				kept++
			}
		}
	}
	if kept == 0 {
		b.Spans = nil
	}
	return b
}

// traceGroups counts a request's spans per trace, then hands out each span's slot so that the
// spans of one trace are contiguous. Requests carry few traces: a slice, indexed by a map past 8.
type traceGroups struct {
	ids  []pcommon.TraceID
	next []int // count, then (after offsets) the next free slot of each trace
	idx  map[pcommon.TraceID]int
	last int
}

func (g *traceGroups) find(id pcommon.TraceID) int {
	if g.last < len(g.ids) && g.ids[g.last] == id {
		return g.last
	}
	if g.idx != nil {
		if k, ok := g.idx[id]; ok {
			g.last = k
			return k
		}
		return -1
	}
	for k := range g.ids {
		if g.ids[k] == id {
			g.last = k
			return k
		}
	}
	return -1
}

func (g *traceGroups) count(id pcommon.TraceID) {
	k := g.find(id)
	if k < 0 {
		k = len(g.ids)
		g.ids = append(g.ids, id)
		g.next = append(g.next, 0)
		if g.idx != nil {
			g.idx[id] = k
		} else if len(g.ids) > 8 {
			g.idx = make(map[pcommon.TraceID]int, 32)
			for j, x := range g.ids {
				g.idx[x] = j
			}
		}
		g.last = k
	}
	g.next[k]++
}

// offsets turns the counts into each trace's first slot and returns the total.
func (g *traceGroups) offsets() int {
	total := 0
	for k, n := range g.next {
		g.next[k] = total
		total += n
	}
	return total
}

// slot is the next slot of a trace counted before.
func (g *traceGroups) slot(id pcommon.TraceID) int {
	k := g.find(id)
	s := g.next[k]
	g.next[k]++
	return s
}

// slab is a slice filled in place up to the capacity the counting pass gave it.
type slab[T any] struct{ s []T }

// next extends the slab by one zero element and returns it.
func (sl *slab[T]) next() *T {
	sl.s = sl.s[:len(sl.s)+1]
	return &sl.s[len(sl.s)-1]
}

// since is the elements added since start, capped so that a later element can never be written
// into them; nil when there are none, as the wire decoders give.
func (sl *slab[T]) since(start int) []T {
	if len(sl.s) == start {
		return nil
	}
	return sl.s[start:len(sl.s):len(sl.s)]
}

// appendAttr adds one attribute to the slab when it is kept: a well-known key (as its canonical
// string), or any key with all set.
func (c *converter) appendAttr(dst *slab[spans.Attr], key string, v pcommon.Value) {
	if canon, ok := wellKnown(key); ok {
		key = canon
	} else if !c.all {
		return
	}
	a := dst.next()
	a.Key = key
	switch v.Type() {
	case pcommon.ValueTypeStr:
		a.Type, a.Str = spans.ValueString, v.Str()
	case pcommon.ValueTypeInt:
		a.Type, a.Num = spans.ValueInt, v.Int()
	case pcommon.ValueTypeDouble:
		a.Type, a.Num = spans.ValueDouble, int64(math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		a.Type = spans.ValueBool
		if v.Bool() {
			a.Num = 1
		}
	case pcommon.ValueTypeEmpty:
		a.Type = spans.ValueEmpty
	default:
		a.Type, a.Str = spans.ValueOther, otherString(v)
	}
}

// displayString is how a resource's service name or instance is kept: strings as they are, any
// other value in the display form of spans.ValueOther ("null" when empty).
func displayString(v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return otherString(v)
}

// otherString renders arrays, maps and bytes the way spanstest.OtherString does for the wire
// form: JSON-like, strings quoted, bytes in hex.
func otherString(v pcommon.Value) string {
	return string(appendOther(nil, v))
}

func appendOther(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return strconv.AppendQuote(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return strconv.AppendFloat(dst, v.Double(), 'g', -1, 64)
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		return hex.AppendEncode(dst, v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		dst = append(dst, '[')
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendOther(dst, s.At(i))
		}
		return append(dst, ']')
	case pcommon.ValueTypeMap:
		dst = append(dst, '{')
		i := 0
		for k, e := range v.Map().All() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendQuote(dst, k)
			dst = append(dst, ':')
			dst = appendOther(dst, e)
			i++
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}
