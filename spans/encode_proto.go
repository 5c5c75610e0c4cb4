package spans

import (
	"unicode/utf8"

	"github.com/VictoriaMetrics/easyproto"
)

var protoMarshalers easyproto.MarshalerPool

// AppendProto appends the batch to dst as one protobuf ExportTraceServiceRequest: one
// resourceSpans entry per distinct resource (spans share a *Resource when they came from one), one
// scopeSpans entry per scope name within it, both in order of first appearance.
//
// It writes what the compact form holds, so [DecodeProto] reads the output back to the same spans,
// with one exception: an array, map or bytes value ([ValueOther]) is kept only as its display
// string, so it is written as a string value and reads back as [ValueString] with the same text.
// Strings are written as valid UTF-8, each invalid byte replaced by U+FFFD: the decoders keep what
// a request held, and protobuf's own decoders refuse a string that is not UTF-8.
//
// Span values reach OTLP/JSON through this and the one protobuf-to-JSON writer (tracefile's
// ProtoToJSON), which also writes what the collector records: there is one OTLP/JSON writer.
func AppendProto(dst []byte, b *Batch) []byte {
	m := protoMarshalers.Get()
	defer protoMarshalers.Put(m)
	req := m.MessageMarshaler()
	if b == nil {
		return m.Marshal(dst)
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
	for _, g := range groups {
		rs := req.AppendMessage(1)
		res := rs.AppendMessage(1)
		if r := g.res; r != nil {
			if r.ServiceName != "" {
				appendAttrProto(res, 1, StringAttr(AttrServiceName, r.ServiceName))
			}
			if r.ServiceInstance != "" {
				appendAttrProto(res, 1, StringAttr(AttrServiceInstance, r.ServiceInstance))
			}
			appendAttrsProto(res, 1, r.Attrs)
		}
		for _, sc := range g.scopes {
			ss := rs.AppendMessage(2)
			appendStringProto(ss.AppendMessage(1), 1, sc.name)
			for _, i := range sc.spans {
				appendSpanProto(ss.AppendMessage(2), &b.Spans[i])
			}
		}
	}
	return m.Marshal(dst)
}

func appendSpanProto(m *easyproto.MessageMarshaler, s *Span) {
	m.AppendBytes(1, s.TraceID[:])
	m.AppendBytes(2, s.SpanID[:])
	if !s.ParentID.IsZero() {
		m.AppendBytes(4, s.ParentID[:])
	}
	appendStringProto(m, 5, s.Name)
	if s.Kind != 0 {
		m.AppendInt32(6, int32(s.Kind))
	}
	if s.StartUnixNano != 0 {
		m.AppendFixed64(7, uint64(s.StartUnixNano))
	}
	if s.EndUnixNano != 0 {
		m.AppendFixed64(8, uint64(s.EndUnixNano))
	}
	appendAttrsProto(m, 9, s.Attrs)
	for _, e := range s.Events {
		em := m.AppendMessage(11)
		if e.TimeUnixNano != 0 {
			em.AppendFixed64(1, uint64(e.TimeUnixNano))
		}
		appendStringProto(em, 2, e.Name)
		appendAttrsProto(em, 3, e.Attrs)
	}
	for _, l := range s.Links {
		lm := m.AppendMessage(13)
		lm.AppendBytes(1, l.TraceID[:])
		lm.AppendBytes(2, l.SpanID[:])
		appendAttrsProto(lm, 4, l.Attrs)
	}
	if s.Status != StatusUnset || s.StatusMessage != "" {
		st := m.AppendMessage(15)
		if s.Status != StatusUnset {
			st.AppendInt32(3, int32(s.Status))
		}
		appendStringProto(st, 2, s.StatusMessage)
	}
}

func appendAttrsProto(m *easyproto.MessageMarshaler, num uint32, attrs []Attr) {
	for _, a := range attrs {
		appendAttrProto(m, num, a)
	}
}

// appendAttrProto appends a as the KeyValue field num of m.
func appendAttrProto(m *easyproto.MessageMarshaler, num uint32, a Attr) {
	kv := m.AppendMessage(num)
	appendStringProto(kv, 1, a.Key)
	v := kv.AppendMessage(2)
	switch a.Type {
	case ValueString, ValueOther:
		v.AppendString(1, validUTF8(a.Str))
	case ValueBool:
		v.AppendBool(2, a.Num != 0)
	case ValueInt:
		v.AppendInt64(3, a.Num)
	case ValueDouble:
		v.AppendDouble(4, a.Float())
	}
}

// appendStringProto appends s as field num unless it is empty, as proto3 leaves it out.
func appendStringProto(m *easyproto.MessageMarshaler, num uint32, s string) {
	if s != "" {
		m.AppendString(num, validUTF8(s))
	}
}

// validUTF8 returns s with each byte that is not part of valid UTF-8 replaced by U+FFFD, as
// jsonlex.AppendString writes it.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return string(out)
}
