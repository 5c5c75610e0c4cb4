package tracefile

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// Jaeger JSON and Zipkin JSON are read as whole documents: neither has records a reader could
// resynchronise on, and a Zipkin shared span can only be split once every span of its trace is
// known. A document is bounded by ReadOptions.MaxRecordBytes and its nesting by
// spans.MaxValueDepth, as one OTLP record is, and is handed on one trace per Record so the
// analyzer settles traces as it does for a recording.

// readDocument reads the rest of src as one document of format f, at most max bytes. size is how
// many bytes src holds, when known (else 0): the document is read into memory of that size
// (and the few bytes the last read needs to see the end), not grown to it, which for a document
// of hundreds of megabytes copied and cleared it about twice over.
func readDocument(src io.Reader, name string, f Format, max int, size int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(size, int64(max)+1)+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(src, int64(max)+1))
	body := buf.Bytes()
	if err != nil && readErr(err) != io.EOF {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(body) > max {
		return nil, fmt.Errorf("%s: %w: the %s document is over the limit of %d bytes (raise it with --max-record-bytes if the file is sound)", name, ErrTooLarge, f, max)
	}
	return body, nil
}

// checkDepth refuses JSON nested deeper than max before encoding/json, whose own bound is far
// larger, walks it. A document the scanner's walk reads needs no such pass: the walk refuses
// nesting past the same bound itself. Only the document's first value is walked: encoding/json
// decodes nothing after it (decodeDocument reports what follows).
func checkDepth(body []byte, max int) error {
	s := valueScanner{max: max}
	if at := s.feed(body); at >= 0 {
		return fmt.Errorf("%w: JSON nested more than %d deep (byte %d)", spans.ErrTooDeep, max, at)
	}
	return nil
}

// decodeDocument decodes body into v, turning encoding/json's errors into ones that say where the
// document went wrong and what was expected, for a user who gave the wrong file or a cut download.
func decodeDocument(body []byte, v any, f Format) error {
	// A sound document is decoded in place: a Decoder would first copy all of it into a buffer
	// it grows as it reads. Unmarshal succeeds exactly when the Decoder below would (v holds no
	// interface values, so UseNumber changes nothing); only a document that fails is decoded
	// again, afresh, for the Decoder's errors, which say where the document went wrong.
	if json.Unmarshal(body, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := dec.Decode(v)
	if err == nil {
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("decode %s: more data after the document ends at byte %d", f, dec.InputOffset())
		}
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Errorf("decode %s: the JSON ends in the middle of the document, after %d bytes (a download or copy cut short?)", f, len(body))
	case errors.As(err, &syn):
		line := bytes.Count(body[:min(int(syn.Offset), len(body))], []byte{'\n'}) + 1
		return fmt.Errorf("decode %s: invalid JSON on line %d (byte %d): %s", f, line, syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		where := typ.Field
		if where == "" {
			where = "the document"
		}
		return fmt.Errorf("decode %s: %s must be %s, found a JSON %s (byte %d)", f, where, jsonKind(typ.Type), typ.Value, typ.Offset)
	}
	return fmt.Errorf("decode %s: %w", f, err)
}

// jsonKind names what a Go type is in JSON.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64:
		return "a number"
	}
	if t == reflect.TypeOf(json.Number("")) {
		return "a number"
	}
	return t.String()
}

// parseID reads a hex id into dst, which it fills. Jaeger and Zipkin drop leading zeroes and
// write 64-bit trace ids as 16 digits; both are padded on the left, as those systems do when they
// convert to OTLP.
func parseID(dst []byte, s, what string) error {
	if len(s) == 0 || len(s) > 2*len(dst) {
		return fmt.Errorf("%s %q: want 1 to %d hex digits", what, s, 2*len(dst))
	}
	if _, err := hex.Decode(dst, []byte(strings.Repeat("0", 2*len(dst)-len(s))+s)); err != nil {
		return fmt.Errorf("%s %q: not hex", what, s)
	}
	return nil
}

func parseTraceID(s string) (t spans.TraceID, err error) {
	if err = parseID(t[:], s, "trace id"); err == nil && t.IsZero() {
		err = fmt.Errorf("trace id %q: all zeroes", s)
	}
	return t, err
}

func parseSpanID(s, what string) (id spans.SpanID, err error) {
	return id, parseID(id[:], s, what)
}

// setIDs sets a Jaeger or Zipkin span's trace id and its own id, which must not be zero.
func setIDs(s *spans.Span, traceID, spanID string) (err error) {
	if s.TraceID, err = parseTraceID(traceID); err != nil {
		return err
	}
	if s.SpanID, err = parseSpanID(spanID, "span id"); err == nil && s.SpanID.IsZero() {
		err = fmt.Errorf("span id %q: all zeroes", spanID)
	}
	return err
}

// setTimes sets a span's start and end from Jaeger's or Zipkin's start and duration in
// microseconds; startWhat names the start's field.
func setTimes(s *spans.Span, start, duration json.Number, startWhat string) error {
	at, err := microsToNanos(start, startWhat)
	if err != nil {
		return err
	}
	d, err := microsToNanos(duration, "duration")
	s.StartUnixNano, s.EndUnixNano = at, at+d
	return err
}

// microsToNanos reads Jaeger's and Zipkin's microsecond times.
func microsToNanos(n json.Number, what string) (int64, error) {
	if n == "" {
		return 0, nil
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s %q: want whole microseconds", what, n)
	}
	const limit = (1<<63 - 1) / 1000
	if v > limit || v < -limit {
		return 0, fmt.Errorf("%s %d: out of range", what, v)
	}
	return v * 1000, nil
}

// kindFromName reads a span kind as Jaeger's span.kind tag and Zipkin's kind field spell it.
func kindFromName(s string) spans.Kind {
	switch strings.ToLower(s) {
	case "client":
		return spans.KindClient
	case "server":
		return spans.KindServer
	case "producer":
		return spans.KindProducer
	case "consumer":
		return spans.KindConsumer
	case "internal":
		return spans.KindInternal
	}
	return spans.KindUnspecified
}

// Tags that carry span fields in the Jaeger and Zipkin models: mapped to the field, never kept as
// attributes.
const (
	tagSpanKind          = "span.kind"
	tagError             = "error"
	tagOtelStatusCode    = "otel.status_code"
	tagOtelStatusMessage = "otel.status_description"
	tagOtelScopeName     = "otel.scope.name"
	tagOtelScopeVersion  = "otel.scope.version"
	tagOtelLibraryName   = "otel.library.name"
	tagOtelLibraryVer    = "otel.library.version"
)

func isFieldTag(k string) bool {
	switch k {
	case tagSpanKind, tagError, tagOtelStatusCode, tagOtelStatusMessage, tagOtelScopeName, tagOtelScopeVersion, tagOtelLibraryName, tagOtelLibraryVer:
		return true
	}
	return false
}

// deriveStatus is the span status the Jaeger and Zipkin models only carry as tags. An explicit
// otel.status_code wins (an OpenTelemetry SDK or collector wrote it); then the error tag; then the
// OpenTelemetry semantic conventions' rules for a span without a status: an HTTP client span fails
// at 4xx and 5xx, a server span at 5xx; a gRPC client span at any code but OK, a server span at
// the codes that mean the server failed.
func deriveStatus(s *spans.Span, otelCode string, errTag bool) spans.StatusCode {
	switch strings.ToUpper(otelCode) {
	case "ERROR":
		return spans.StatusError
	case "OK":
		return spans.StatusOK
	}
	if errTag {
		return spans.StatusError
	}
	n, ok := s.Int(spans.AttrHTTPStatus)
	if !ok {
		n, ok = s.Int(spans.AttrLegacyHTTPStatusCode)
	}
	if ok && (n >= 500 || n >= 400 && s.Kind == spans.KindClient) {
		return spans.StatusError
	}
	if n, ok := s.Int(spans.AttrRPCGRPCStatus); ok && n != 0 {
		if s.Kind != spans.KindServer {
			return spans.StatusError
		}
		switch n { // UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS
		case 2, 4, 12, 13, 14, 15:
			return spans.StatusError
		}
	}
	return spans.StatusUnset
}

// keepAttr says whether the decoder keeps an attribute under opt, as the OTLP decoders do.
func keepAttr(key string, opt spans.DecodeOptions) bool {
	return opt.AllAttributes || spans.IsWellKnown(key)
}

// resourceFrom builds a resource from a service name and its tags: service.instance.id is
// lifted out, the rest kept as the OTLP decoders keep resource attributes.
func resourceFrom(service string, tags []spans.Attr, opt spans.DecodeOptions) *spans.Resource {
	r := &spans.Resource{ServiceName: service}
	for _, a := range tags {
		switch {
		case a.Key == spans.AttrServiceInstance:
			r.ServiceInstance = a.AsString()
		case a.Key == spans.AttrServiceName:
			if r.ServiceName == "" {
				r.ServiceName = a.AsString()
			}
		case keepAttr(a.Key, opt):
			r.Attrs = append(r.Attrs, a)
		}
	}
	return r
}

// SharedServerSpanID is the span id the reader gives the server half of a Zipkin shared span,
// which has the client half's id on the wire. n numbers the server halves that share one id, in
// order of their start: a retrying hop nobody traces (a proxy) forwards the same B3 headers on
// every try, so one client half can have several. The id is derived from the trace, the shared id
// and n, so every read of a file gives the same ids (a report's span ids can be looked up again),
// and is never zero.
func SharedServerSpanID(t spans.TraceID, shared spans.SpanID, n int) spans.SpanID {
	h := fnv.New64a()
	h.Write(t[:])
	h.Write(shared[:])
	fmt.Fprintf(h, "zipkin shared server half %d", n)
	var id spans.SpanID
	copy(id[:], h.Sum(nil))
	if id.IsZero() {
		id[7] = 1
	}
	return id
}

// numberAttr turns a JSON number into an int attribute when it is one, else a double.
func numberAttr(key string, n json.Number) (spans.Attr, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return spans.IntAttr(key, i), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return spans.Attr{}, fmt.Errorf("tag %q: %q is not a number", key, n)
	}
	return spans.DoubleAttr(key, f), nil
}
