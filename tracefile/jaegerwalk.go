package tracefile

import (
	"unicode/utf8"

	"github.com/stormwatch/stormwatch/spans"
)

// encoding/json's reflective decode would be nearly all the cost of reading a Jaeger document,
// some 50 times what reading the same spans as OTLP/JSON costs. walkJaeger reads a document with the
// scanner the OTLP/JSON readers use instead, one span at a time, into the structs jaegerSpanOf
// maps, so both ways share one mapping. It takes only what it is sure encoding/json reads the same
// and gives up on the rest - a member name in another case or outside ASCII, a repeated member, a
// null inside an array, a string that is not UTF-8, a span whose trace id the trace gives only
// after its spans, errors listed - leaving the document to encoding/json, which also decides and
// words every error. FuzzJaegerJSON holds the two to the same answer.

// The member names each object of the document has, for telling an unknown member from a known
// one in another case (encoding/json matches names regardless of case).
var (
	jaegerDocNames     = []string{"data", "errors", "traceID", "spans", "processes"}
	jaegerSpanNames    = []string{"traceID", "spanID", "operationName", "references", "parentSpanID", "startTime", "duration", "tags", "logs", "processID", "process"}
	jaegerProcessNames = []string{"serviceName", "tags"}
	jaegerTagNames     = []string{"key", "type", "value"}
	jaegerRefNames     = []string{"refType", "traceID", "spanID"}
	jaegerLogNames     = []string{"timestamp", "fields"}
)

type jaegerWalk struct {
	foreignWalk
	opt   spans.DecodeOptions
	js    jaegerSpan    // the span being read; its slices are reused
	proc  jaegerProcess // a span's embedded process; its tags are reused
	trace jaegerWalkTrace
	out   []*spans.Batch
}

// jaegerWalkTrace is what the walk holds of one trace until its object ends: its processes come
// after its spans.
type jaegerWalkTrace struct {
	seen      uint32 // the members read, to refuse a repeated one
	traceID   string
	spans     []spans.Span // reused from trace to trace: spans.ByTrace copies them
	listed    bool         // spans was an array, not null or missing
	processes map[string]jaegerProcess
	pending   []jaegerPending
}

// jaegerPending is a span that names a process of the trace's table.
type jaegerPending struct {
	span int
	id   string
}

// walkJaeger reads a Jaeger document as DecodeJaegerJSON does, or says it does not take it.
func walkJaeger(body []byte, opt spans.DecodeOptions) ([]*spans.Batch, int, bool) {
	w := &jaegerWalk{foreignWalk: newForeignWalk(body), opt: opt}
	listed, ok := w.document()
	if !ok || !w.end() {
		return nil, 0, false
	}
	return w.out, listed, true
}

func (w *jaegerWalk) document() (listed int, ok bool) {
	var seen uint32
	data := false // data was an array
	var top jaegerWalkTrace
	w.out = make([]*spans.Batch, 0)
	ok = w.object(func(key []byte) bool {
		switch string(key) {
		case "data":
			if !once(&seen, 1) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			data = true
			return w.array(func() bool {
				listed++
				w.trace.reset()
				return w.sc.Peek() == '{' && w.object(func(key []byte) bool { return w.traceMember(&w.trace, key, 3) }) && w.finish(&w.trace)
			})
		case "errors":
			// Only an empty list: a document with errors goes through encoding/json.
			if !once(&seen, 2) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			return w.sc.Expect('[') == nil && w.sc.Expect(']') == nil
		}
		return w.traceMember(&top, key, 1)
	})
	if !ok || data || top.traceID == "" && !top.listed {
		return listed, ok
	}
	// A single trace, as some tools save one: the trace object itself.
	return 1, w.finish(&top)
}

func (t *jaegerWalkTrace) reset() {
	*t = jaegerWalkTrace{spans: t.spans[:0], pending: t.pending[:0]}
}

// traceMember reads a member of a trace object (or of the document, which may be one), its
// values depth deep.
func (w *jaegerWalk) traceMember(t *jaegerWalkTrace, key []byte, depth int) bool {
	switch string(key) {
	case "traceID":
		return once(&t.seen, 1) && w.text(&t.traceID)
	case "spans":
		if !once(&t.seen, 2) {
			return false
		}
		if w.sc.Null() {
			return true
		}
		t.listed = true
		return w.array(func() bool { return w.span(t, depth+2) })
	case "processes":
		if !once(&t.seen, 4) {
			return false
		}
		if w.sc.Null() {
			return true
		}
		t.processes = map[string]jaegerProcess{}
		return w.object(func(key []byte) bool {
			if !utf8.Valid(key) {
				return false
			}
			id := string(key) // before the process's own names reuse the scratch it may be in
			var p jaegerProcess
			// A repeated id replaces the process before it, as encoding/json does in a map.
			ok := w.process(&p, nil, depth+1)
			t.processes[id] = p
			return ok
		})
	}
	return w.unknown(key, jaegerDocNames, depth)
}

// finish maps a trace read to its end, as jaegerTraceBatch does.
func (w *jaegerWalk) finish(t *jaegerWalkTrace) bool {
	resources, err := jaegerResources(t.processes, w.opt)
	if err != nil {
		return false
	}
	for _, p := range t.pending {
		if t.spans[p.span].Resource, err = jaegerSpanResource(nil, p.id, resources, w.opt); err != nil {
			return false
		}
	}
	if len(t.spans) == 0 {
		w.out = append(w.out, &spans.Batch{Spans: []spans.Span{}})
		return true
	}
	w.out = append(w.out, spans.ByTrace(t.spans)...)
	return true
}

// span reads one span of t and maps it.
func (w *jaegerWalk) span(t *jaegerWalkTrace, depth int) bool {
	js := &w.js
	*js = jaegerSpan{References: js.References[:0], Tags: js.Tags[:0], Logs: js.Logs[:0]}
	var seen uint32
	if w.sc.Peek() != '{' {
		return false
	}
	ok := w.object(func(key []byte) bool {
		switch string(key) {
		case "traceID":
			return once(&seen, 1<<0) && w.text(&js.TraceID)
		case "spanID":
			return once(&seen, 1<<1) && w.text(&js.SpanID)
		case "operationName":
			return once(&seen, 1<<2) && w.keep(&js.OperationName)
		case "references":
			if !once(&seen, 1<<3) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			return w.array(func() bool {
				js.References = append(js.References, jaegerRef{})
				r := &js.References[len(js.References)-1]
				var seen uint32
				return w.sc.Peek() == '{' && w.object(func(key []byte) bool {
					switch string(key) {
					case "refType":
						return once(&seen, 1) && w.text(&r.RefType)
					case "traceID":
						return once(&seen, 2) && w.text(&r.TraceID)
					case "spanID":
						return once(&seen, 4) && w.text(&r.SpanID)
					}
					return w.unknown(key, jaegerRefNames, depth+2)
				})
			})
		case "parentSpanID":
			return once(&seen, 1<<4) && w.text(&js.ParentSpanID)
		case "startTime":
			return once(&seen, 1<<5) && w.number(&js.StartTime)
		case "duration":
			return once(&seen, 1<<6) && w.number(&js.Duration)
		case "tags":
			return once(&seen, 1<<7) && w.tags(&js.Tags, depth)
		case "logs":
			if !once(&seen, 1<<8) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			return w.array(func() bool {
				// Grown by hand to keep the fields array of the log that had the place before.
				n := len(js.Logs)
				if n < cap(js.Logs) {
					js.Logs = js.Logs[:n+1]
					js.Logs[n] = jaegerLog{Fields: js.Logs[n].Fields[:0]}
				} else {
					js.Logs = append(js.Logs, jaegerLog{})
				}
				l := &js.Logs[n]
				var seen uint32
				return w.sc.Peek() == '{' && w.object(func(key []byte) bool {
					switch string(key) {
					case "timestamp":
						return once(&seen, 1) && w.number(&l.Timestamp)
					case "fields":
						return once(&seen, 2) && w.tags(&l.Fields, depth+2)
					}
					return w.unknown(key, jaegerLogNames, depth+2)
				})
			})
		case "processID":
			return once(&seen, 1<<9) && w.text(&js.ProcessID)
		case "process":
			if !once(&seen, 1<<10) {
				return false
			}
			if w.sc.Null() {
				return true
			}
			js.Process = &w.proc
			return w.process(&w.proc, w.proc.Tags[:0], depth)
		}
		return w.unknown(key, jaegerSpanNames, depth)
	})
	// A span without a trace id of its own takes the trace's, which must come before it.
	if !ok || js.TraceID == "" && t.seen&1 == 0 {
		return false
	}
	s, err := jaegerSpanOf(js, t.traceID, w.opt)
	if err != nil {
		return false
	}
	if js.Process != nil {
		if s.Resource, err = jaegerSpanResource(js.Process, "", nil, w.opt); err != nil {
			return false
		}
	} else if js.ProcessID != "" {
		t.pending = append(t.pending, jaegerPending{len(t.spans), js.ProcessID})
	}
	t.spans = append(t.spans, s)
	return true
}

// process reads a process object into p, its tags appended to tags.
func (w *jaegerWalk) process(p *jaegerProcess, tags []jaegerTag, depth int) bool {
	*p = jaegerProcess{Tags: tags}
	var seen uint32
	return w.sc.Peek() == '{' && w.object(func(key []byte) bool {
		switch string(key) {
		case "serviceName":
			return once(&seen, 1) && w.keep(&p.ServiceName)
		case "tags":
			return once(&seen, 2) && w.tags(&p.Tags, depth+1)
		}
		return w.unknown(key, jaegerProcessNames, depth+1)
	})
}

// tags reads an array of tags, appending to *dst; a tag's value is its JSON text, as
// json.RawMessage holds it.
func (w *jaegerWalk) tags(dst *[]jaegerTag, depth int) bool {
	if w.sc.Null() {
		return true
	}
	return w.array(func() bool {
		var t jaegerTag
		var seen uint32
		ok := w.sc.Peek() == '{' && w.object(func(key []byte) bool {
			switch string(key) {
			case "key":
				return once(&seen, 1) && w.keep(&t.Key)
			case "type":
				return once(&seen, 2) && w.text(&t.Type)
			case "value":
				if !once(&seen, 4) {
					return false
				}
				start := w.sc.TokenStart()
				if w.sc.Skip(depth+2) != nil {
					return false
				}
				t.Value = w.sc.Buf[start:w.sc.Pos]
				return true
			}
			return w.unknown(key, jaegerTagNames, depth+2)
		})
		*dst = append(*dst, t)
		return ok
	})
}
