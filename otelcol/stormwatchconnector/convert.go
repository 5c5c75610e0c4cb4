package stormwatchconnector

import (
	"encoding/hex"
	"strconv"

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
// unless all is set, and arrays, maps and bytes keep their display string.
type converter struct {
	all bool
	// keys maps each well-known key to one canonical string, so that the analyzer compares
	// interned keys and a held span does not keep the pdata key strings alive.
	keys map[string]string
}

func newConverter(allAttributes bool) *converter {
	keys := make(map[string]string, len(spans.WellKnown))
	for _, k := range spans.WellKnown {
		keys[k] = k
	}
	return &converter{all: allAttributes, keys: keys}
}

// convert copies td into a new batch. Memory is allocated per call, not per span: spans,
// attributes, links, events and resources each live in one slice sized by a counting pass, as in
// the wire decoders. Strings are shared with td, which is safe because pdata strings are
// immutable Go strings that do not alias a reused buffer.
func (c *converter) convert(td ptrace.Traces) *spans.Batch {
	b := &spans.Batch{}
	rss := td.ResourceSpans()
	nSpans, nAttrs, nLinks, nEvents := 0, 0, 0, 0
	// The spans are written grouped by trace (in order of first appearance, request order within
	// a trace): pdata orders them by resource, so one trace's spans are spread over the request,
	// and the analyzer keeps a new trace's contiguous run without copying it.
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
				nLinks += s.Links().Len()
				nEvents += s.Events().Len()
				for l := 0; l < s.Links().Len(); l++ {
					nAttrs += s.Links().At(l).Attributes().Len()
				}
				for e := 0; e < s.Events().Len(); e++ {
					nAttrs += s.Events().At(e).Attributes().Len()
				}
			}
		}
	}
	if nSpans == 0 {
		return b
	}
	b.Spans = make([]spans.Span, groups.offsets())
	kept := 0
	// The slabs are sized for every attribute: with only well-known keys kept this over-allocates,
	// which is cheaper than a second counting pass over the keys.
	attrs := make([]spans.Attr, 0, nAttrs)
	var links []spans.Link
	if nLinks > 0 {
		links = make([]spans.Link, 0, nLinks)
	}
	var events []spans.Event
	if nEvents > 0 {
		events = make([]spans.Event, 0, nEvents)
	}
	resources := make([]spans.Resource, rss.Len())

	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := &resources[i]
		start := len(attrs)
		for k, v := range rs.Resource().Attributes().All() {
			switch k {
			case spans.AttrServiceName:
				res.ServiceName = displayString(v)
			case spans.AttrServiceInstance:
				res.ServiceInstance = displayString(v)
			default:
				attrs = c.appendAttr(attrs, k, v)
			}
		}
		res.Attrs = sub(attrs, start)
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
				sp := spans.Span{
					TraceID:       spans.TraceID(tid),
					SpanID:        spans.SpanID(sid),
					ParentID:      spans.SpanID(ps.ParentSpanID()),
					StartUnixNano: int64(ps.StartTimestamp()),
					EndUnixNano:   int64(ps.EndTimestamp()),
					Kind:          spans.Kind(ps.Kind()),
					Status:        spans.StatusCode(ps.Status().Code()),
					StatusMessage: ps.Status().Message(),
					Name:          ps.Name(),
					Resource:      res,
					Scope:         scope,
				}
				start := len(attrs)
				for k, v := range ps.Attributes().All() {
					attrs = c.appendAttr(attrs, k, v)
				}
				sp.Attrs = sub(attrs, start)

				lstart := len(links)
				pl := ps.Links()
				for l := 0; l < pl.Len(); l++ {
					link := pl.At(l)
					if link.TraceID().IsEmpty() || link.SpanID().IsEmpty() {
						// An all-zero id is what pdata holds for an absent one, which the wire
						// decoders drop as the wrong length.
						continue
					}
					astart := len(attrs)
					for k, v := range link.Attributes().All() {
						attrs = c.appendAttr(attrs, k, v)
					}
					links = append(links, spans.Link{
						TraceID: spans.TraceID(link.TraceID()),
						SpanID:  spans.SpanID(link.SpanID()),
						Attrs:   sub(attrs, astart),
					})
				}
				if len(links) > lstart {
					sp.Links = links[lstart:len(links):len(links)]
				}

				estart := len(events)
				pe := ps.Events()
				for e := 0; e < pe.Len(); e++ {
					ev := pe.At(e)
					astart := len(attrs)
					for k, v := range ev.Attributes().All() {
						attrs = c.appendAttr(attrs, k, v)
					}
					events = append(events, spans.Event{
						TimeUnixNano: int64(ev.Timestamp()),
						Name:         ev.Name(),
						Attrs:        sub(attrs, astart),
					})
				}
				if len(events) > estart {
					sp.Events = events[estart:len(events):len(events)]
				}
				b.Spans[groups.slot(tid)] = sp
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

// sub is the attributes appended since start, capped so that a later append to the slab can never
// write into them; nil when there are none, as the wire decoders give.
func sub(slab []spans.Attr, start int) []spans.Attr {
	if len(slab) == start {
		return nil
	}
	return slab[start:len(slab):len(slab)]
}

func (c *converter) appendAttr(dst []spans.Attr, key string, v pcommon.Value) []spans.Attr {
	if canon, ok := c.keys[key]; ok {
		key = canon
	} else if !c.all {
		return dst
	}
	a := spans.Attr{Key: key}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		a.Type, a.Str = spans.ValueString, v.Str()
	case pcommon.ValueTypeInt:
		a.Type, a.Num = spans.ValueInt, v.Int()
	case pcommon.ValueTypeDouble:
		a = spans.DoubleAttr(key, v.Double())
	case pcommon.ValueTypeBool:
		a = spans.BoolAttr(key, v.Bool())
	case pcommon.ValueTypeEmpty:
		a.Type = spans.ValueEmpty
	default:
		a.Type, a.Str = spans.ValueOther, otherString(v)
	}
	return append(dst, a)
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
