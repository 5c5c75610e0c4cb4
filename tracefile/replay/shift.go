package replay

import (
	"encoding/binary"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/VictoriaMetrics/easyproto"

	"github.com/stormwatch/stormwatch/spans"
)

// recordTime is when a batch was (about) sent: the latest end time of its spans, since SDKs export a
// span when it ends. 0 when the batch has no spans with times.
func recordTime(b *spans.Batch) int64 {
	var t int64
	for i := range b.Spans {
		t = max(t, b.Spans[i].EndUnixNano)
	}
	return t
}

// remapTrace gives each pass of a looped replay its own trace ids, so that pass k's spans do not
// merge into pass 0's traces. The mapping is a pure function of (id, pass): ids stay consistent
// within a pass, parents and links included.
func remapTrace(id []byte, pass int) {
	if pass == 0 || len(id) != 16 {
		return
	}
	v := binary.BigEndian.Uint64(id[8:])
	v ^= uint64(pass) * 0x9e3779b97f4a7c15
	binary.BigEndian.PutUint64(id[8:], v)
}

// ShiftBatch moves every time in b by delta nanoseconds and, for pass > 0 of a loop, gives its
// traces new ids. It changes b in place.
func ShiftBatch(b *spans.Batch, delta int64, pass int) {
	for i := range b.Spans {
		s := &b.Spans[i]
		if s.StartUnixNano != 0 {
			s.StartUnixNano += delta
		}
		if s.EndUnixNano != 0 {
			s.EndUnixNano += delta
		}
		for j := range s.Events {
			if s.Events[j].TimeUnixNano != 0 {
				s.Events[j].TimeUnixNano += delta
			}
		}
		remapTrace(s.TraceID[:], pass)
		for j := range s.Links {
			remapTrace(s.Links[j].TraceID[:], pass)
		}
	}
}

// ShiftRequest is ShiftBatch for a protobuf request: it returns a shifted copy. Times are fixed64
// and trace ids fixed-length bytes, so the copy is patched in place on the wire - no decode and
// re-encode, which would cost more than the replay's sending - with the generated types only as the
// fallback for input the wire walk cannot read.
func ShiftRequest(raw []byte, delta int64, pass int) ([]byte, error) {
	out := append([]byte(nil), raw...)
	if err := shiftWire(out, delta, pass); err == nil {
		return out, nil
	}
	return shiftGenerated(raw, delta, pass)
}

// walkFields calls f for each field of msg with the field's bytes (tag included), which alias msg.
func walkFields(msg []byte, f func(fc *easyproto.FieldContext, field []byte) error) error {
	var fc easyproto.FieldContext
	for src := msg; len(src) > 0; {
		rest, err := fc.NextField(src)
		if err != nil {
			return err
		}
		if err := f(&fc, src[:len(src)-len(rest)]); err != nil {
			return err
		}
		src = rest
	}
	return nil
}

// nested calls walk on the message in field fc when it is one (a wrong wire type is an unknown
// field to protobuf: left alone).
func nested(fc *easyproto.FieldContext, walk func([]byte) error) error {
	if b, ok := fc.MessageData(); ok {
		return walk(b)
	}
	return nil
}

func shiftWire(req []byte, delta int64, pass int) error {
	shiftTime := func(fc *easyproto.FieldContext, field []byte) {
		if t, ok := fc.Fixed64(); ok && t != 0 {
			binary.LittleEndian.PutUint64(field[len(field)-8:], uint64(int64(t)+delta))
		}
	}
	remap := func(fc *easyproto.FieldContext) {
		if id, ok := fc.Bytes(); ok {
			remapTrace(id, pass) // id aliases the copy
		}
	}
	span := func(b []byte) error {
		return walkFields(b, func(fc *easyproto.FieldContext, field []byte) error {
			switch fc.FieldNum {
			case 1:
				remap(fc)
			case 7, 8:
				shiftTime(fc, field)
			case 11: // events
				return nested(fc, func(e []byte) error {
					return walkFields(e, func(fc *easyproto.FieldContext, field []byte) error {
						if fc.FieldNum == 1 {
							shiftTime(fc, field)
						}
						return nil
					})
				})
			case 13: // links
				return nested(fc, func(l []byte) error {
					return walkFields(l, func(fc *easyproto.FieldContext, _ []byte) error {
						if fc.FieldNum == 1 {
							remap(fc)
						}
						return nil
					})
				})
			}
			return nil
		})
	}
	scopeSpans := func(b []byte) error {
		return walkFields(b, func(fc *easyproto.FieldContext, _ []byte) error {
			if fc.FieldNum == 2 {
				return nested(fc, span)
			}
			return nil
		})
	}
	resourceSpans := func(b []byte) error {
		return walkFields(b, func(fc *easyproto.FieldContext, _ []byte) error {
			if fc.FieldNum == 2 {
				return nested(fc, scopeSpans)
			}
			return nil
		})
	}
	return walkFields(req, func(fc *easyproto.FieldContext, _ []byte) error {
		if fc.FieldNum == 1 {
			return nested(fc, resourceSpans)
		}
		return nil
	})
}

// shiftGenerated is the same through the generated types.
func shiftGenerated(raw []byte, delta int64, pass int) ([]byte, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("decode request to shift its times: %w", err)
	}
	shift := func(t uint64) uint64 {
		if t == 0 {
			return 0
		}
		return uint64(int64(t) + delta)
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				s.StartTimeUnixNano = shift(s.StartTimeUnixNano)
				s.EndTimeUnixNano = shift(s.EndTimeUnixNano)
				for _, e := range s.GetEvents() {
					e.TimeUnixNano = shift(e.TimeUnixNano)
				}
				remapTrace(s.TraceId, pass)
				for _, l := range s.GetLinks() {
					remapTrace(l.TraceId, pass)
				}
			}
		}
	}
	out, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode shifted request: %w", err)
	}
	return out, nil
}
