package tracefile

import (
	"unicode/utf8"

	"github.com/stormwatch/stormwatch/spans"
)

// walkZipkin reads a Zipkin v2 document as walkJaeger reads a Jaeger one: on the jsonlex scanner,
// one span at a time, into the zipkinSpan that zipkinSpanOf maps, giving up where encoding/json
// might read otherwise (see jaegerwalk.go; a tag's value must be a string here). FuzzZipkinJSON
// holds it to encoding/json's answer.

var (
	zipkinSpanNames       = []string{"traceId", "id", "parentId", "name", "kind", "timestamp", "duration", "localEndpoint", "remoteEndpoint", "annotations", "tags", "shared"}
	zipkinEndpointNames   = []string{"serviceName"}
	zipkinAnnotationNames = []string{"timestamp", "value"}
)

type zipkinWalk struct {
	foreignWalk
	z             zipkinSpan // the span being read; its map and slices are reused
	local, remote zipkinEndpoint
	tags          map[string]string
	doc           zipkinDoc
}

// walkZipkin reads a Zipkin document as decodeZipkinJSON does, or says it does not take it.
func walkZipkin(body []byte, opt spans.DecodeOptions) ([]*spans.Batch, bool) {
	w := &zipkinWalk{foreignWalk: newForeignWalk(body), tags: map[string]string{}, doc: zipkinDoc{opt: opt}}
	if w.sc.Peek() != '[' || !w.array(w.span) || !w.end() {
		return nil, false
	}
	return w.doc.batches(), true
}

// span reads one span and maps it.
func (w *zipkinWalk) span() bool {
	z := &w.z
	// clear takes time in proportion to what a map has grown to, not to what it holds: after one
	// span of a great many tags, clearing the map for every span after it would cost that span's
	// size each, the square of the document. Past a few dozen tags it is made afresh.
	if len(w.tags) > 64 {
		w.tags = map[string]string{}
	} else {
		clear(w.tags)
	}
	*z = zipkinSpan{Annotations: z.Annotations[:0]}
	var seen uint32
	if w.sc.Peek() != '{' {
		return false
	}
	ok := w.object(func(key []byte) bool {
		switch string(key) {
		case "traceId":
			return once(&seen, 1<<0) && w.text(&z.TraceID)
		case "id":
			return once(&seen, 1<<1) && w.text(&z.ID)
		case "parentId":
			return once(&seen, 1<<2) && w.text(&z.ParentID)
		case "name":
			return once(&seen, 1<<3) && w.keep(&z.Name)
		case "kind":
			return once(&seen, 1<<4) && w.text(&z.Kind)
		case "timestamp":
			return once(&seen, 1<<5) && w.number(&z.Timestamp)
		case "duration":
			return once(&seen, 1<<6) && w.number(&z.Duration)
		case "localEndpoint":
			return once(&seen, 1<<7) && w.endpoint(&z.LocalEndpoint, &w.local)
		case "remoteEndpoint":
			return once(&seen, 1<<8) && w.endpoint(&z.RemoteEndpoint, &w.remote)
		case "annotations":
			if !once(&seen, 1<<9) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			return w.array(func() bool {
				z.Annotations = append(z.Annotations, zipkinAnnotation{})
				a := &z.Annotations[len(z.Annotations)-1]
				var seen uint32
				return w.sc.Peek() == '{' && w.object(func(key []byte) bool {
					switch string(key) {
					case "timestamp":
						return once(&seen, 1) && w.number(&a.Timestamp)
					case "value":
						return once(&seen, 2) && w.own(&a.Value)
					}
					return w.unknown(key, zipkinAnnotationNames, 4)
				})
			})
		case "tags":
			if !once(&seen, 1<<10) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			z.Tags = w.tags
			return w.object(func(key []byte) bool {
				// A map's keys are not matched to names: only not UTF-8 is read otherwise.
				if !utf8.Valid(key) {
					return false
				}
				k := w.intern(key)
				// A null value is read as "", which the walk does not follow.
				var v string
				if w.sc.Peek() != '"' || !w.own(&v) {
					return false
				}
				// A repeated key's last value stays, as in encoding/json's map.
				w.tags[k] = v
				return true
			})
		case "shared":
			return once(&seen, 1<<11) && w.boolean(&z.Shared)
		}
		return w.unknown(key, zipkinSpanNames, 2)
	})
	return ok && w.doc.add(z) == nil
}

// endpoint reads an endpoint object into e, pointed to from *dst (null leaves *dst nil).
func (w *zipkinWalk) endpoint(dst **zipkinEndpoint, e *zipkinEndpoint) bool {
	if w.sc.Null() {
		return true
	}
	*e = zipkinEndpoint{}
	*dst = e
	var seen uint32
	return w.sc.Peek() == '{' && w.object(func(key []byte) bool {
		if string(key) == "serviceName" {
			return once(&seen, 1) && w.keep(&e.ServiceName)
		}
		return w.unknown(key, zipkinEndpointNames, 3)
	})
}
