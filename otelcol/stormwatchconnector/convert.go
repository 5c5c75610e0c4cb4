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

// converter turns pdata traces into spans packed by trace (spans.Batch.Packed), the form the
// analyzer holds them in, so that filing them under the analyzer's lock copies each trace's block
// as it is. The collector has already decoded the protobuf into pdata, so the wire decoders of
// package spans cannot be reused; this follows the same rules (spanstest.FromProto is the
// reference): spans with a zero trace or span id are rejected and counted, links with a zero id
// are dropped, only well-known attributes are kept unless all is set, and arrays, maps and bytes
// keep their display string. Well-known keys are the canonical strings of spans.WellKnown, as the
// wire decoders give, so the packer writes each as one byte.
//
// No span values are made for a request: each span is converted into one scratch span (and
// scratch attributes, links and events), packed, and the next one converted into the same memory.
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

// convBuf is the memory of one conversion, used request after request (see withBatch): the
// analyzer copies the packed blocks it keeps, so nothing of a batch outlives ConsumeBatch.
type convBuf struct {
	batch spans.Batch
	// packing holds every trace's block, one after another, and groups the spans by trace.
	packing spans.Packing
	// refs are the request's valid spans in request order.
	refs []spanRef
	// sp is the one span each of them is converted into in turn.
	sp spans.Span
	// res is each ResourceSpans' resource, converted once: the packer keeps pointers to the
	// resources of a trace until its block ends, and a trace's spans come from several of them.
	res      []spans.Resource
	resAttrs []spans.Attr
	// The scratch of one span: its attributes, then its links' and events' (in one array).
	attrs  []spans.Attr
	links  []spans.Link
	events []spans.Event
	// shown keeps the display strings made for arrays, maps and bytes alive until the request is
	// packed: the packer recognizes a string it has written by the address of its bytes, which
	// must not hold another string before the block ends.
	shown []string
}

// spanRef is where a span is in the request: its ResourceSpans, ScopeSpans and index there, and
// its trace id. No pointers, so the garbage collector never scans the refs.
type spanRef struct {
	rs, ss, span int32
	trace        spans.TraceID
}

// maxPooledSpans bounds the buffers kept for reuse: one huge request does not leave its buffers
// behind.
const maxPooledSpans = 1 << 14

// withBatch converts td into pooled buffers and calls f with the batch, which f must not keep.
func (c *converter) withBatch(td ptrace.Traces, f func(*spans.Batch) error) error {
	cb, _ := c.bufs.Get().(*convBuf)
	if cb == nil {
		cb = &convBuf{}
	}
	err := f(c.convertInto(td, cb))
	cb.reset()
	cb.packing.Trim()
	if cap(cb.refs) <= maxPooledSpans && cap(cb.res)+cap(cb.links)+cap(cb.events) <= maxPooledSpans &&
		cap(cb.resAttrs)+cap(cb.attrs) <= 16*maxPooledSpans {
		c.bufs.Put(cb)
	}
	return err
}

// reset lets go of what the last request pointed at (td's strings) before the buffers wait in the
// pool: every array as far as its capacity, since the scratches are reused span after span and the
// last span need not have used as much of them as the ones before.
func (cb *convBuf) reset() {
	cb.sp = spans.Span{}
	clear(cb.res[:cap(cb.res)])
	clear(cb.resAttrs[:cap(cb.resAttrs)])
	clear(cb.attrs[:cap(cb.attrs)])
	clear(cb.links[:cap(cb.links)])
	clear(cb.events[:cap(cb.events)])
	clear(cb.shown[:cap(cb.shown)])
	cb.shown = cb.shown[:0]
	cb.batch = spans.Batch{}
}

// wellKnown is the canonical string of a well-known key, through the wire decoders' own intern
// table (a few nanoseconds: it hashes the length and the ends of the key, where a map hashes all
// of it). The bytes are the key's own, only read.
func wellKnown(key string) (string, bool) {
	return spans.Intern(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// convert packs td into a new batch (see convertInto).
func (c *converter) convert(td ptrace.Traces) *spans.Batch {
	return c.convertInto(td, &convBuf{})
}

// convertInto packs td by trace into a batch in cb's buffers, which must be reset (new, or reset
// by withBatch): one block a trace, the traces in the order each first appears, each trace's
// spans in request order - what spans.DecodeProto gives with PackByTrace. Strings are read from
// td without copying until the packer copies them: pdata strings are immutable Go strings.
func (c *converter) convertInto(td ptrace.Traces, cb *convBuf) *spans.Batch {
	b := &cb.batch
	rss := td.ResourceSpans()
	// First the resources and where each valid span is, by trace: pdata orders spans by
	// resource, so one trace's spans are spread over the request.
	cb.res = reuse(cb.res, rss.Len())
	cb.resAttrs = cb.resAttrs[:0]
	refs := cb.refs[:0]
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		c.resource(cb, &cb.res[i], rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				tid := s.TraceID()
				if tid.IsEmpty() || s.SpanID().IsEmpty() {
					b.Rejected++
					b.RejectReason = rejectInvalidID
					continue
				}
				refs = append(refs, spanRef{rs: int32(i), ss: int32(j), span: int32(k), trace: spans.TraceID(tid)})
			}
		}
	}
	cb.refs = refs
	if len(refs) == 0 {
		return b
	}
	b.Packed = cb.packing.PackFrom(len(refs), func(i int) spans.TraceID { return refs[i].trace }, func(i int) *spans.Span {
		r := refs[i]
		c.span(cb, rss.At(int(r.rs)), r)
		return &cb.sp
	})
	return b
}

// resource converts a ResourceSpans' resource into res, its other attributes into cb.resAttrs.
func (c *converter) resource(cb *convBuf, res *spans.Resource, pr pcommon.Resource) {
	start := len(cb.resAttrs)
	for k, v := range pr.Attributes().All() {
		switch k {
		case spans.AttrServiceName:
			res.ServiceName = c.display(cb, v)
		case spans.AttrServiceInstance:
			res.ServiceInstance = c.display(cb, v)
		default:
			cb.resAttrs = c.appendAttr(cb, cb.resAttrs, k, v)
		}
	}
	// A later resource's attributes may move the array; these keep pointing at the old one.
	res.Attrs = since(cb.resAttrs, start)
}

// span converts the span r names into cb.sp, its lists into the scratches, all used again for
// the next span once this one is packed.
func (c *converter) span(cb *convBuf, rs ptrace.ResourceSpans, r spanRef) {
	pss := rs.ScopeSpans().At(int(r.ss))
	ps := pss.Spans().At(int(r.span))
	st := ps.Status()
	cb.sp = spans.Span{
		TraceID:       spans.TraceID(ps.TraceID()),
		SpanID:        spans.SpanID(ps.SpanID()),
		ParentID:      spans.SpanID(ps.ParentSpanID()),
		StartUnixNano: int64(ps.StartTimestamp()),
		EndUnixNano:   int64(ps.EndTimestamp()),
		Kind:          spans.Kind(ps.Kind()),
		Status:        spans.StatusCode(st.Code()),
		Name:          ps.Name(),
		StatusMessage: st.Message(),
		Resource:      &cb.res[r.rs],
		Scope:         pss.Scope().Name(),
	}
	// Every list is taken as a slice of attrs after it is complete: a later append may move the
	// array, and what was taken before keeps pointing at the old one, unchanged.
	attrs := cb.attrs[:0]
	for k, v := range ps.Attributes().All() {
		attrs = c.appendAttr(cb, attrs, k, v)
	}
	cb.sp.Attrs = since(attrs, 0)

	links := cb.links[:0]
	pl := ps.Links()
	for l := 0; l < pl.Len(); l++ {
		link := pl.At(l)
		if link.TraceID().IsEmpty() || link.SpanID().IsEmpty() {
			// An all-zero id is what pdata holds for an absent one, which the wire decoders
			// drop as the wrong length.
			continue
		}
		start := len(attrs)
		for k, v := range link.Attributes().All() {
			attrs = c.appendAttr(cb, attrs, k, v)
		}
		links = append(links, spans.Link{TraceID: spans.TraceID(link.TraceID()),
			SpanID: spans.SpanID(link.SpanID()), Attrs: since(attrs, start)})
	}
	cb.sp.Links = since(links, 0)

	events := cb.events[:0]
	pe := ps.Events()
	for e := 0; e < pe.Len(); e++ {
		ev := pe.At(e)
		start := len(attrs)
		for k, v := range ev.Attributes().All() {
			attrs = c.appendAttr(cb, attrs, k, v)
		}
		events = append(events, spans.Event{TimeUnixNano: int64(ev.Timestamp()), Name: ev.Name(),
			Attrs: since(attrs, start)})
	}
	cb.sp.Events = since(events, 0)

	cb.attrs, cb.links, cb.events = attrs, links, events
}

// reuse is buf with n elements, in buf's array when it has room (zero there: reset cleared it).
func reuse[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// since is s's elements from start on, capped so that a later append can never write into them;
// nil when there are none, as the wire decoders give (the packed form keeps nil and empty apart).
func since[T any](s []T, start int) []T {
	if len(s) == start {
		return nil
	}
	return s[start:len(s):len(s)]
}

// appendAttr appends one attribute to dst when it is kept: a well-known key (as its canonical
// string), or any key with all set.
func (c *converter) appendAttr(cb *convBuf, dst []spans.Attr, key string, v pcommon.Value) []spans.Attr {
	if canon, ok := wellKnown(key); ok {
		key = canon
	} else if !c.all {
		return dst
	}
	// Filled in place: with the garbage collector marking (most of the time, at a collector's
	// allocation rate), copying a struct that holds pointers goes through the bulk write barrier.
	dst = append(dst, spans.Attr{})
	a := &dst[len(dst)-1]
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
		a.Type, a.Str = spans.ValueOther, cb.show(v)
	}
	return dst
}

// display is how a resource's service name or instance is kept: strings as they are, any other
// value in the display form of spans.ValueOther ("null" when empty).
func (c *converter) display(cb *convBuf, v pcommon.Value) string {
	if v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return cb.show(v)
}

// show is v's display string, kept alive until the request is packed (see convBuf.shown).
func (cb *convBuf) show(v pcommon.Value) string {
	s := otherString(v)
	cb.shown = append(cb.shown, s)
	return s
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
