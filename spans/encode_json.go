package spans

import (
	"encoding/hex"
	"strconv"

	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// EncodeJSON encodes a batch as one OTLP/JSON ExportTraceServiceRequest object; see [AppendJSON].
func EncodeJSON(b *Batch) []byte { return AppendJSON(nil, b) }

// AppendJSON appends the batch to dst as one OTLP/JSON ExportTraceServiceRequest object, the form
// the OpenTelemetry Collector's file exporter and OTLP/HTTP JSON use: one resourceSpans entry per
// distinct resource (spans share a *Resource when they came from one), one scopeSpans entry per
// scope name within it, both in order of first appearance; ids in hex, enums as integers, 64-bit
// integers as strings.
//
// It writes what the compact form holds, so [DecodeJSON] reads the output back to the same spans,
// with one exception: an array, map or bytes value ([ValueOther]) is kept only as its display
// string, so it is written as a string value and reads back as [ValueString] with the same text.
func AppendJSON(dst []byte, b *Batch) []byte {
	dst = append(dst, `{"resourceSpans":[`...)
	if b == nil {
		return append(dst, "]}"...)
	}
	// Group spans by resource, then by scope, keeping first-appearance order.
	type scopeGroup struct {
		name  string
		spans []int
	}
	type resGroup struct {
		res    *Resource
		scopes []scopeGroup
	}
	var groups []resGroup
	index := map[*Resource]int{}
	for i := range b.Spans {
		s := &b.Spans[i]
		gi, ok := index[s.Resource]
		if !ok {
			gi = len(groups)
			index[s.Resource] = gi
			groups = append(groups, resGroup{res: s.Resource})
		}
		g := &groups[gi]
		si := -1
		for j := range g.scopes {
			if g.scopes[j].name == s.Scope {
				si = j
				break
			}
		}
		if si < 0 {
			si = len(g.scopes)
			g.scopes = append(g.scopes, scopeGroup{name: s.Scope})
		}
		g.scopes[si].spans = append(g.scopes[si].spans, i)
	}
	for gi, g := range groups {
		dst = append(sep(dst, gi), `{"resource":{"attributes":[`...)
		if r := g.res; r != nil {
			var svc []Attr
			if r.ServiceName != "" {
				svc = append(svc, StringAttr(AttrServiceName, r.ServiceName))
			}
			if r.ServiceInstance != "" {
				svc = append(svc, StringAttr(AttrServiceInstance, r.ServiceInstance))
			}
			dst = appendAttrsJSON(dst, append(svc, r.Attrs...))
		}
		dst = append(dst, `]},"scopeSpans":[`...)
		for si, sc := range g.scopes {
			dst = append(sep(dst, si), `{"scope":{"name":`...)
			dst = jsonlex.AppendString(dst, sc.name)
			dst = append(dst, `},"spans":[`...)
			for k, i := range sc.spans {
				dst = appendSpanJSON(sep(dst, k), &b.Spans[i])
			}
			dst = append(dst, "]}"...)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

func appendSpanJSON(dst []byte, s *Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = hex.AppendEncode(dst, s.TraceID[:])
	dst = append(dst, `","spanId":"`...)
	dst = hex.AppendEncode(dst, s.SpanID[:])
	dst = append(dst, '"')
	if !s.ParentID.IsZero() {
		dst = append(dst, `,"parentSpanId":"`...)
		dst = hex.AppendEncode(dst, s.ParentID[:])
		dst = append(dst, '"')
	}
	dst = append(dst, `,"name":`...)
	dst = jsonlex.AppendString(dst, s.Name)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendUint(dst, uint64(s.Kind), 10)
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, uint64(s.StartUnixNano), 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendUint(dst, uint64(s.EndUnixNano), 10)
	dst = append(dst, '"')
	dst = appendAttrsMember(dst, s.Attrs)
	if len(s.Events) > 0 {
		dst = append(dst, `,"events":[`...)
		for i, e := range s.Events {
			dst = append(sep(dst, i), `{"timeUnixNano":"`...)
			dst = strconv.AppendUint(dst, uint64(e.TimeUnixNano), 10)
			dst = append(dst, `","name":`...)
			dst = jsonlex.AppendString(dst, e.Name)
			dst = appendAttrsMember(dst, e.Attrs)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(s.Links) > 0 {
		dst = append(dst, `,"links":[`...)
		for i, l := range s.Links {
			dst = append(sep(dst, i), `{"traceId":"`...)
			dst = hex.AppendEncode(dst, l.TraceID[:])
			dst = append(dst, `","spanId":"`...)
			dst = hex.AppendEncode(dst, l.SpanID[:])
			dst = append(dst, '"')
			dst = appendAttrsMember(dst, l.Attrs)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if s.Status != StatusUnset || s.StatusMessage != "" {
		dst = append(dst, `,"status":{"code":`...)
		dst = strconv.AppendUint(dst, uint64(s.Status), 10)
		if s.StatusMessage != "" {
			dst = append(dst, `,"message":`...)
			dst = jsonlex.AppendString(dst, s.StatusMessage)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendAttrsMember appends `,"attributes":[...]` when there are any.
func appendAttrsMember(dst []byte, attrs []Attr) []byte {
	if len(attrs) == 0 {
		return dst
	}
	dst = append(dst, `,"attributes":[`...)
	return append(appendAttrsJSON(dst, attrs), ']')
}

// sep appends the comma before element i of a JSON array.
func sep(dst []byte, i int) []byte {
	if i > 0 {
		return append(dst, ',')
	}
	return dst
}

func appendAttrsJSON(dst []byte, attrs []Attr) []byte {
	for i, a := range attrs {
		dst = appendAttrJSON(sep(dst, i), a)
	}
	return dst
}

func appendAttrJSON(dst []byte, a Attr) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonlex.AppendString(dst, a.Key)
	dst = append(dst, `,"value":{`...)
	switch a.Type {
	case ValueString, ValueOther:
		dst = append(dst, `"stringValue":`...)
		dst = jsonlex.AppendString(dst, a.Str)
	case ValueInt:
		dst = append(dst, `"intValue":"`...)
		dst = strconv.AppendInt(dst, a.Num, 10)
		dst = append(dst, '"')
	case ValueDouble:
		dst = append(dst, `"doubleValue":`...)
		dst = jsonlex.AppendFloat(dst, a.Float())
	case ValueBool:
		dst = append(dst, `"boolValue":`...)
		dst = strconv.AppendBool(dst, a.Num != 0)
	}
	return append(dst, "}}"...)
}
