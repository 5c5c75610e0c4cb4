package tracefile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/jsonlex"
)

// The Jaeger query service's JSON (GET /api/traces, GET /api/traces/{id}, the UI's "Download
// JSON"): {"data":[trace...], "errors":[...]}, each trace its spans and a table of processes.
type jaegerDoc struct {
	Data []jaegerTrace `json:"data"`
	// A single trace, as some tools save one, is the trace object itself without "data".
	jaegerTrace
	Errors []struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		TraceID string `json:"traceID"`
	} `json:"errors"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []jaegerTag `json:"tags"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	// ParentSpanID is the deprecated form of a CHILD_OF reference; some exporters still write it.
	ParentSpanID string      `json:"parentSpanID"`
	StartTime    json.Number `json:"startTime"` // microseconds since the epoch
	Duration     json.Number `json:"duration"`  // microseconds
	Tags         []jaegerTag `json:"tags"`
	Logs         []jaegerLog `json:"logs"`
	ProcessID    string      `json:"processID"`
	// Process is set instead of ProcessID in the embedded form some tools write.
	Process *jaegerProcess `json:"process"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerLog struct {
	Timestamp json.Number `json:"timestamp"`
	Fields    []jaegerTag `json:"fields"`
}

// jaegerTag is a typed key-value: type is string, bool, int64, float64 or binary (base64).
type jaegerTag struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func (t jaegerTag) attr() (spans.Attr, error) {
	var err error
	switch strings.ToLower(t.Type) {
	case "", "string":
		if s, ok := jsonString(t.Value); ok {
			return spans.StringAttr(t.Key, s), nil
		}
		var s string
		if err = json.Unmarshal(t.Value, &s); err == nil {
			return spans.StringAttr(t.Key, s), nil
		}
	case "bool":
		switch string(t.Value) {
		case "true":
			return spans.BoolAttr(t.Key, true), nil
		case "false":
			return spans.BoolAttr(t.Key, false), nil
		}
		var b bool
		if err = json.Unmarshal(t.Value, &b); err == nil {
			return spans.BoolAttr(t.Key, b), nil
		}
	case "int64", "float64":
		// Some writers quote 64-bit numbers, as OTLP/JSON does.
		raw := bytes.Trim(t.Value, `"`)
		if i, ok := plainJSONInt(raw); ok {
			return spans.IntAttr(t.Key, i), nil
		}
		// A number, as Unmarshal would read it into a json.Number; numberAttr keeps no string.
		if jsonlex.ValidNumber(raw) {
			return numberAttr(t.Key, json.Number(alias(raw)))
		}
		var n json.Number
		if err = json.Unmarshal(raw, &n); err == nil {
			return numberAttr(t.Key, n)
		}
	case "binary":
		var s string
		if err = json.Unmarshal(t.Value, &s); err == nil {
			var b []byte
			if b, err = base64.StdEncoding.DecodeString(s); err == nil {
				return spans.Attr{Key: t.Key, Str: fmt.Sprintf("%x", b), Type: spans.ValueOther}, nil
			}
		}
	default:
		return spans.Attr{}, fmt.Errorf("tag %q: unknown type %q (want string, bool, int64, float64 or binary)", t.Key, t.Type)
	}
	return spans.Attr{}, fmt.Errorf("tag %q of type %s: value %s does not fit", t.Key, t.Type, t.Value)
}

// Tag values are read through json.Unmarshal only when they need it: a Jaeger document holds
// tens of tags a span, and one Unmarshal call each would be most of the cost of reading it. The two
// helpers below take the common values, which Unmarshal would read the same, and refuse the rest.

// jsonString reads a JSON string whose bytes are valid UTF-8 (Unmarshal would replace invalid
// ones), unescaping it as Unmarshal does.
func jsonString(raw []byte) (string, bool) {
	sc := jsonlex.Scanner{Buf: raw}
	in, esc, err := sc.RawString()
	if err != nil || sc.Pos != len(raw) || !utf8.Valid(in) {
		return "", false
	}
	if esc {
		// A fresh array nothing else holds: the string may have it.
		u, _ := jsonlex.AppendUnescaped(nil, in)
		return alias(u), true
	}
	return string(in), true
}

// plainJSONInt reads a JSON integer that fits an int64.
func plainJSONInt(s []byte) (int64, bool) {
	digits := bytes.TrimPrefix(s, []byte("-"))
	if len(digits) > 1 && digits[0] == '0' { // JSON has no leading zeroes
		return 0, false
	}
	n, end, ok := jsonlex.ParseInt(s, 0)
	return n, ok && end == len(s)
}

// DecodeJaegerJSON decodes a Jaeger query service JSON document ({"data":[...]}, as GET
// /api/traces answers) into one batch per trace, mapped as the reader maps a file (see
// docs/sources.md). Its nesting is bounded as a file's is; bounding its size is the caller's.
// listed is how many traces the document lists, what a search's limit bounds: there are more
// batches when a listed trace's spans name other trace ids.
//
// A sound document is read by walkJaeger; one it does not take goes through encoding/json, which
// decides and words what is wrong with it.
func DecodeJaegerJSON(body []byte, opt spans.DecodeOptions) (batches []*spans.Batch, listed int, err error) {
	if out, n, ok := walkJaeger(body, opt); ok {
		return out, n, nil
	}
	return decodeJaegerJSONReference(body, opt)
}

// decodeJaegerJSONReference is DecodeJaegerJSON through encoding/json: the reference walkJaeger
// is held to.
func decodeJaegerJSONReference(body []byte, opt spans.DecodeOptions) ([]*spans.Batch, int, error) {
	if err := checkDepth(body, spans.MaxValueDepth); err != nil {
		return nil, 0, fmt.Errorf("decode %s: %w", FormatJaegerJSON, err)
	}
	var doc jaegerDoc
	if err := decodeDocument(body, &doc, FormatJaegerJSON); err != nil {
		return nil, 0, err
	}
	if doc.Data == nil && (doc.TraceID != "" || doc.Spans != nil) {
		doc.Data = []jaegerTrace{doc.jaegerTrace}
	}
	if len(doc.Data) == 0 && len(doc.Errors) > 0 {
		e := doc.Errors[0]
		return nil, 0, fmt.Errorf("the Jaeger document holds no trace, only errors; the first: %d %s", e.Code, e.Msg)
	}
	out := make([]*spans.Batch, 0, len(doc.Data))
	for i := range doc.Data {
		b, err := jaegerTraceBatch(&doc.Data[i], opt)
		if err != nil {
			return nil, 0, fmt.Errorf("decode %s: trace %d (%s): %w", FormatJaegerJSON, i+1, doc.Data[i].TraceID, err)
		}
		if len(b.Spans) == 0 {
			out = append(out, b)
			continue
		}
		// A span may name a trace of its own, other than the one it is listed under: one batch
		// a trace, as every reader hands them on.
		out = append(out, spans.ByTrace(b.Spans)...)
	}
	return out, len(doc.Data), nil
}

// jaegerTraceBatch maps one Jaeger trace onto the compact span form.
func jaegerTraceBatch(t *jaegerTrace, opt spans.DecodeOptions) (*spans.Batch, error) {
	resources, err := jaegerResources(t.Processes, opt)
	if err != nil {
		return nil, err
	}
	b := &spans.Batch{Spans: make([]spans.Span, 0, len(t.Spans))}
	for i := range t.Spans {
		js := &t.Spans[i]
		s, err := jaegerSpanOf(js, t.TraceID, opt)
		if err != nil {
			return nil, fmt.Errorf("span %d (%s): %w", i+1, js.SpanID, err)
		}
		if s.Resource, err = jaegerSpanResource(js.Process, js.ProcessID, resources, opt); err != nil {
			return nil, fmt.Errorf("span %s: %w", js.SpanID, err)
		}
		b.Spans = append(b.Spans, s)
	}
	return b, nil
}

// jaegerResources maps a trace's table of processes onto resources by process id.
func jaegerResources(processes map[string]jaegerProcess, opt spans.DecodeOptions) (map[string]*spans.Resource, error) {
	resources := make(map[string]*spans.Resource, len(processes))
	for _, id := range slices.Sorted(maps.Keys(processes)) { // in order: the same error on every read
		p := processes[id]
		r, err := jaegerResource(&p, opt)
		if err != nil {
			return nil, err
		}
		resources[id] = r
	}
	return resources, nil
}

func jaegerResource(p *jaegerProcess, opt spans.DecodeOptions) (*spans.Resource, error) {
	attrs, err := jaegerAttrs(p.Tags, spans.DecodeOptions{AllAttributes: true})
	if err != nil {
		return nil, fmt.Errorf("process %s: %w", p.ServiceName, err)
	}
	return resourceFrom(p.ServiceName, attrs, opt), nil
}

// jaegerSpanResource is a span's resource: its embedded process, else the trace's process it
// names, else none.
func jaegerSpanResource(p *jaegerProcess, processID string, resources map[string]*spans.Resource, opt spans.DecodeOptions) (*spans.Resource, error) {
	switch {
	case p != nil:
		return jaegerResource(p, opt)
	case processID != "":
		if r := resources[processID]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("processID %q is not in the trace's processes", processID)
	}
	return nil, nil
}

func jaegerAttrs(tags []jaegerTag, opt spans.DecodeOptions) ([]spans.Attr, error) {
	var out []spans.Attr
	for _, t := range tags {
		if !keepAttr(t.Key, opt) {
			continue
		}
		a, err := t.attr()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func jaegerSpanOf(js *jaegerSpan, traceID string, opt spans.DecodeOptions) (spans.Span, error) {
	var s spans.Span
	var err error
	if js.TraceID != "" {
		traceID = js.TraceID
	}
	if err := setIDs(&s, traceID, js.SpanID); err != nil {
		return s, err
	}
	if err := setTimes(&s, js.StartTime, js.Duration, "startTime"); err != nil {
		return s, err
	}
	s.Name = js.OperationName
	if js.ParentSpanID != "" {
		if s.ParentID, err = parseSpanID(js.ParentSpanID, "parentSpanID"); err != nil {
			return s, err
		}
	}
	for _, r := range js.References {
		rt, err := parseTraceID(r.TraceID)
		if err != nil {
			return s, fmt.Errorf("reference: %w", err)
		}
		rs, err := parseSpanID(r.SpanID, "reference span id")
		if err != nil {
			return s, fmt.Errorf("reference: %w", err)
		}
		switch r.RefType {
		case "CHILD_OF", "":
			// The first CHILD_OF within the trace is the parent; any other one, like a
			// FOLLOWS_FROM, can only be a link in OpenTelemetry's model.
			if s.ParentID.IsZero() && rt == s.TraceID {
				s.ParentID = rs
				continue
			}
		case "FOLLOWS_FROM":
		default:
			return s, fmt.Errorf("reference type %q: want CHILD_OF or FOLLOWS_FROM", r.RefType)
		}
		s.Links = append(s.Links, spans.Link{TraceID: rt, SpanID: rs})
	}
	var otelCode string
	errTag := false
	// The attributes' array in one allocation, not one for each time append outgrows it.
	kept := 0
	for _, t := range js.Tags {
		if !isFieldTag(t.Key) && keepAttr(t.Key, opt) {
			kept++
		}
	}
	if kept > 0 {
		s.Attrs = make([]spans.Attr, 0, kept)
	}
	for _, t := range js.Tags {
		field := isFieldTag(t.Key)
		if !field && !keepAttr(t.Key, opt) {
			continue
		}
		a, err := t.attr()
		if err != nil {
			return s, err
		}
		if !field {
			s.Attrs = append(s.Attrs, a)
			continue
		}
		switch t.Key {
		case tagSpanKind:
			s.Kind = kindFromName(a.AsString())
		case tagError:
			errTag = a.AsString() == "true"
		case tagOtelStatusCode:
			otelCode = a.AsString()
		case tagOtelStatusMessage:
			s.StatusMessage = a.AsString()
		case tagOtelScopeName, tagOtelLibraryName:
			s.Scope = a.AsString()
		}
	}
	s.Status = deriveStatus(&s, otelCode, errTag)
	for _, l := range js.Logs {
		at, err := microsToNanos(l.Timestamp, "log timestamp")
		if err != nil {
			return s, err
		}
		ev := spans.Event{TimeUnixNano: at}
		for _, f := range l.Fields {
			if f.Key != "event" && !keepAttr(f.Key, opt) {
				continue
			}
			a, err := f.attr()
			if err != nil {
				return s, err
			}
			if f.Key == "event" {
				ev.Name = a.AsString()
			} else {
				ev.Attrs = append(ev.Attrs, a)
			}
		}
		s.Events = append(s.Events, ev)
	}
	return s, nil
}
