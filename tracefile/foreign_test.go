package tracefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/internal/cputime"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

func readForeign(t *testing.T, name, doc string, opt ReadOptions) (Format, []spans.Span, error) {
	t.Helper()
	r, err := NewReader(strings.NewReader(doc), name, opt)
	if err != nil {
		return 0, nil, err
	}
	recs, err := readRecords(r)
	return r.Format(), spansOf(recs), err
}

func findSpan(t *testing.T, all []spans.Span, name string) *spans.Span {
	t.Helper()
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	t.Fatalf("no span %q", name)
	return nil
}

const jaegerDocument = `{"data": [{
  "traceID": "a1b2c3",
  "spans": [
    {"traceID": "a1b2c3", "spanID": "1", "operationName": "GET /checkout", "references": [],
     "startTime": 1700000000000000, "duration": 500000, "processID": "p1",
     "tags": [{"key": "span.kind", "type": "string", "value": "server"},
              {"key": "otel.status_code", "type": "string", "value": "OK"},
              {"key": "otel.scope.name", "type": "string", "value": "otelhttp"},
              {"key": "http.route", "type": "string", "value": "/checkout"},
              {"key": "user.id", "type": "string", "value": "secret"}]},
    {"traceID": "a1b2c3", "spanID": "2", "operationName": "GET", "startTime": 1700000000000100, "duration": 1000,
     "references": [{"refType": "CHILD_OF", "traceID": "a1b2c3", "spanID": "1"},
                    {"refType": "FOLLOWS_FROM", "traceID": "a1b2c3", "spanID": "3"},
                    {"refType": "CHILD_OF", "traceID": "ffff", "spanID": "9"}],
     "processID": "p1",
     "tags": [{"key": "span.kind", "type": "string", "value": "client"},
              {"key": "http.status_code", "type": "int64", "value": 503},
              {"key": "server.port", "type": "int64", "value": "8080"},
              {"key": "resilience.backoff_ms", "type": "float64", "value": 12.5},
              {"key": "http.request.header.idempotency-key", "type": "binary", "value": "AAH+"}],
     "logs": [{"timestamp": 1700000000000900, "fields": [{"key": "event", "type": "string", "value": "exception"},
              {"key": "exception.message", "type": "string", "value": "context deadline exceeded"}]}]},
    {"traceID": "a1b2c3", "spanID": "3", "operationName": "rpc", "startTime": 1700000000000050, "duration": 10,
     "references": [{"refType": "CHILD_OF", "traceID": "a1b2c3", "spanID": "1"}], "processID": "p2",
     "tags": [{"key": "span.kind", "type": "string", "value": "server"},
              {"key": "rpc.grpc.status_code", "type": "int64", "value": 14}]},
    {"traceID": "a1b2c3", "spanID": "4", "operationName": "flagged", "startTime": 1700000000000060, "duration": 10,
     "processID": "p2", "tags": [{"key": "error", "type": "bool", "value": true}]}
  ],
  "processes": {
    "p1": {"serviceName": "checkout", "tags": [{"key": "service.instance.id", "type": "string", "value": "checkout-7"},
                                             {"key": "host.name", "type": "string", "value": "node-1"}]},
    "p2": {"serviceName": "inventory", "tags": []}
  }
}], "total": 0, "limit": 0, "offset": 0, "errors": null}`

// TestJaegerJSONMapping reads every field of the Jaeger model that has a place in the compact
// form: kind and status from tags, parents and links from references, processes as resources,
// logs as events, microseconds as nanoseconds, short ids padded, and only well-known attributes
// unless all are asked for.
func TestJaegerJSONMapping(t *testing.T) {
	f, all, err := readForeign(t, "download.json", jaegerDocument, ReadOptions{})
	if err != nil || f != FormatJaegerJSON {
		t.Fatalf("format %v, err %v", f, err)
	}
	if len(all) != 4 {
		t.Fatalf("%d spans, want 4", len(all))
	}
	root := findSpan(t, all, "GET /checkout")
	if root.TraceID.String() != "00000000000000000000000000a1b2c3" || root.SpanID.String() != "0000000000000001" {
		t.Errorf("ids %s %s", root.TraceID, root.SpanID)
	}
	if root.Kind != spans.KindServer || root.Status != spans.StatusOK || root.Scope != "otelhttp" || !root.ParentID.IsZero() {
		t.Errorf("root: kind %v status %v scope %q parent %s", root.Kind, root.Status, root.Scope, root.ParentID)
	}
	if root.StartUnixNano != 1700000000000000000 || root.EndUnixNano != 1700000000500000000 {
		t.Errorf("root times %d..%d", root.StartUnixNano, root.EndUnixNano)
	}
	if root.Service() != "checkout" || root.Instance() != "checkout-7" || len(root.Resource.Attrs) != 0 {
		t.Errorf("root resource %+v", root.Resource)
	}
	if _, ok := root.Attr("user.id"); ok || root.Str("http.route") != "/checkout" {
		t.Errorf("root attrs %+v: want http.route kept, user.id dropped", root.Attrs)
	}
	call := findSpan(t, all, "GET")
	if call.Kind != spans.KindClient || call.Status != spans.StatusError || call.ParentID != root.SpanID {
		t.Errorf("call: kind %v status %v parent %s", call.Kind, call.Status, call.ParentID)
	}
	if len(call.Links) != 2 || call.Links[0].SpanID.String() != "0000000000000003" || call.Links[1].TraceID.String() != "0000000000000000000000000000ffff" {
		t.Errorf("call links %+v: want the FOLLOWS_FROM and the second CHILD_OF", call.Links)
	}
	if n, _ := call.Int("server.port"); n != 8080 {
		t.Errorf("server.port given as a quoted int64 = %v", call.Attrs)
	}
	if a, _ := call.Attr("resilience.backoff_ms"); a.Type != spans.ValueDouble || a.Float() != 12.5 {
		t.Errorf("float64 tag read as %+v", a)
	}
	if call.Str("http.request.header.idempotency-key") != "0001fe" {
		t.Errorf("binary tag read as %q", call.Str("http.request.header.idempotency-key"))
	}
	if len(call.Events) != 1 || call.Events[0].Name != "exception" || call.Events[0].TimeUnixNano != 1700000000000900000 ||
		len(call.Events[0].Attrs) != 1 || call.Events[0].Attrs[0].Str != "context deadline exceeded" {
		t.Errorf("call events %+v", call.Events)
	}
	if rpc := findSpan(t, all, "rpc"); rpc.Status != spans.StatusError || rpc.Service() != "inventory" {
		t.Errorf("gRPC server span with UNAVAILABLE: status %v service %q", rpc.Status, rpc.Service())
	}
	if flagged := findSpan(t, all, "flagged"); flagged.Status != spans.StatusError || flagged.Kind != spans.KindUnspecified {
		t.Errorf("error=true: status %v kind %v", flagged.Status, flagged.Kind)
	}

	_, all, err = readForeign(t, "download.json", jaegerDocument, ReadOptions{Decode: spans.DecodeOptions{AllAttributes: true}})
	if err != nil {
		t.Fatal(err)
	}
	root = findSpan(t, all, "GET /checkout")
	if root.Str("user.id") != "secret" || len(root.Resource.Attrs) != 1 || root.Resource.Attrs[0].Key != "host.name" {
		t.Errorf("with AllAttributes: attrs %+v resource %+v", root.Attrs, root.Resource)
	}
	if _, ok := root.Attr("span.kind"); ok {
		t.Errorf("span.kind kept as an attribute: it is the kind")
	}
}

const zipkinDocument = `[
  {"traceId": "5af7183fb1d4cf5f", "id": "0000000000000001", "name": "get /checkout", "kind": "SERVER",
   "timestamp": 1700000000000000, "duration": 300000, "localEndpoint": {"serviceName": "checkout"}},
  {"traceId": "5af7183fb1d4cf5f", "parentId": "0000000000000001", "id": "0000000000000002", "name": "get", "kind": "CLIENT",
   "timestamp": 1700000000000100, "duration": 5000, "localEndpoint": {"serviceName": "checkout"},
   "remoteEndpoint": {"serviceName": "inventory", "ipv4": "10.0.0.7", "port": 8080},
   "tags": {"http.response.status_code": "503", "error": "upstream unavailable", "peer.hostname": "x"}},
  {"traceId": "5af7183fb1d4cf5f", "parentId": "0000000000000001", "id": "0000000000000002", "name": "get /items", "kind": "SERVER",
   "shared": true, "timestamp": 1700000000000200, "duration": 4000, "localEndpoint": {"serviceName": "inventory"},
   "tags": {"service.instance.id": "inv-2"}, "annotations": [{"timestamp": 1700000000000300, "value": "wr"}]},
  {"traceId": "5af7183fb1d4cf5f", "parentId": "0000000000000002", "id": "0000000000000003", "name": "select", "kind": "CLIENT",
   "timestamp": 1700000000000400, "duration": 100, "localEndpoint": {"serviceName": "inventory"}},
  {"traceId": "5af7183fb1d4cf5f", "parentId": "0000000000000001", "id": "0000000000000004", "name": "render",
   "timestamp": 1700000000001000, "duration": 100, "localEndpoint": {"serviceName": "checkout"}, "tags": {"span.kind": "internal"}}
]`

// TestJaegerSingleTrace: one trace saved on its own, without the "data" list, reads as Jaeger
// JSON too.
func TestJaegerSingleTrace(t *testing.T) {
	start := strings.Index(jaegerDocument, "{\n  \"traceID\"")
	end := strings.LastIndex(jaegerDocument, "], \"total\"")
	f, all, err := readForeign(t, "trace.json", jaegerDocument[start:end], ReadOptions{})
	if err != nil || f != FormatJaegerJSON || len(all) != 4 {
		t.Fatalf("format %v, %d spans, err %v", f, len(all), err)
	}
}

// TestJaegerSpanOfAnotherTrace: a span listed under one Jaeger trace may carry a traceID of its
// own; the reader hands on one batch a trace (the analyzer files a batch's spans by their own ids,
// but a record of the file stands for one trace), its spans kept.
func TestJaegerSpanOfAnotherTrace(t *testing.T) {
	batches, listed, err := DecodeJaegerJSON([]byte(`{"data":[{"traceID":"1","spans":[{"spanID":"1"},{"traceID":"2","spanID":"2"},{"spanID":"3"}]}]}`), spans.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || listed != 1 {
		t.Fatalf("%d batches of %d traces listed, want 2 (one a trace) of 1", len(batches), listed)
	}
	for i, want := range []struct {
		trace byte
		spans int
	}{{1, 2}, {2, 1}} {
		b := batches[i]
		if len(b.Spans) != want.spans || b.Spans[0].TraceID[15] != want.trace {
			t.Fatalf("batch %d: %d spans of trace %s, want %d of ...%02x", i, len(b.Spans), b.Spans[0].TraceID, want.spans, want.trace)
		}
		for _, s := range b.Spans {
			if s.TraceID != b.Spans[0].TraceID {
				t.Fatalf("batch %d holds traces %s and %s", i, b.Spans[0].TraceID, s.TraceID)
			}
		}
	}
}

// TestZipkinJSONMapping: kinds, status from the error tag and the HTTP status, microseconds, and
// a shared span split into a CLIENT and a SERVER span, the server half under the client half and
// the server's own children moved under it.
func TestZipkinJSONMapping(t *testing.T) {
	f, all, err := readForeign(t, "spans", zipkinDocument, ReadOptions{})
	if err != nil || f != FormatZipkinJSON {
		t.Fatalf("format %v, err %v", f, err)
	}
	if len(all) != 5 {
		t.Fatalf("%d spans, want 5", len(all))
	}
	root := findSpan(t, all, "get /checkout")
	if root.TraceID.String() != "00000000000000005af7183fb1d4cf5f" || root.Kind != spans.KindServer || root.Status != spans.StatusUnset {
		t.Errorf("root: trace %s kind %v status %v", root.TraceID, root.Kind, root.Status)
	}
	call := findSpan(t, all, "get")
	if call.Kind != spans.KindClient || call.Status != spans.StatusError || call.StatusMessage != "upstream unavailable" ||
		call.ParentID != root.SpanID || call.StartUnixNano != 1700000000000100000 || call.EndUnixNano != 1700000000005100000 {
		t.Errorf("client half: %+v", call)
	}
	if _, ok := call.Attr("peer.hostname"); ok {
		t.Errorf("a tag outside the well-known set was kept")
	}
	if got := call.Str(spans.AttrPeerService); got != "inventory" {
		t.Errorf("remoteEndpoint.serviceName as peer.service = %q, want inventory", got)
	}
	served := findSpan(t, all, "get /items")
	want := SharedServerSpanID(served.TraceID, call.SpanID, 0)
	if served.Kind != spans.KindServer || served.SpanID != want || served.ParentID != call.SpanID || served.Service() != "inventory" || served.Instance() != "inv-2" {
		t.Errorf("server half: id %s (want %s) parent %s kind %v service %q instance %q", served.SpanID, want, served.ParentID, served.Kind, served.Service(), served.Instance())
	}
	if len(served.Events) != 1 || served.Events[0].Name != "wr" {
		t.Errorf("annotations as events: %+v", served.Events)
	}
	if child := findSpan(t, all, "select"); child.ParentID != served.SpanID {
		t.Errorf("the server's child has parent %s, want the server half %s", child.ParentID, served.SpanID)
	}
	if render := findSpan(t, all, "render"); render.Kind != spans.KindInternal {
		t.Errorf("span.kind=internal tag: kind %v", render.Kind)
	}
	// The same file gives the same ids every time.
	_, again, _ := readForeign(t, "spans", zipkinDocument, ReadOptions{})
	if findSpan(t, again, "get /items").SpanID != served.SpanID {
		t.Errorf("the derived id changed between reads")
	}
}

// TestForeignBadInput: every way a Jaeger or Zipkin document can be wrong fails the read with an
// error that names the file and says what is wrong and where.
func TestForeignBadInput(t *testing.T) {
	span := func(extra string) string {
		return `[{"traceId":"1","id":"2","timestamp":1,"duration":1` + extra + `}]`
	}
	jspan := func(field string) string {
		return `{"data":[{"traceID":"1","spans":[{"traceID":"1","spanID":"2","startTime":1,"duration":1` + field + `}],"processes":{}}]}`
	}
	for _, c := range []struct{ name, doc, want string }{
		{"jaeger cut short", jaegerDocument[:len(jaegerDocument)/2], "Jaeger JSON: the JSON ends in the middle of the document"},
		{"zipkin cut short", zipkinDocument[:len(zipkinDocument)/2], "Zipkin v2 JSON: the JSON ends in the middle of the document"},
		{"jaeger data not an array", `{"data": {"traceID": "1"}}`, "data must be an array, found a JSON object"},
		{"jaeger spans not an array", `{"data": [{"traceID": "1", "spans": "none"}]}`, "data.spans must be an array, found a JSON string"},
		{"jaeger only errors", `{"data": null, "errors": [{"code": 404, "msg": "trace not found"}]}`, "only errors; the first: 404 trace not found"},
		{"jaeger bad trace id", jspan(`,"traceID":"xyz"`), `trace 1 (1): span 1 (2): trace id "xyz": not hex`},
		{"jaeger long span id", `{"data":[{"traceID":"1","spans":[{"spanID":"00112233445566778899"}]}]}`, `span id "00112233445566778899": want 1 to 16 hex digits`},
		{"jaeger zero span id", jspan(`,"spanID":"0"`), `span id "0": all zeroes`},
		{"jaeger unknown tag type", jspan(`,"tags":[{"key":"http.route","type":"uuid","value":"x"}]`), `tag "http.route": unknown type "uuid"`},
		{"jaeger tag value of another type", jspan(`,"tags":[{"key":"server.port","type":"int64","value":"eighty"}]`), `tag "server.port" of type int64: value "eighty" does not fit`},
		{"jaeger bad reference", jspan(`,"references":[{"refType":"SIBLING","traceID":"1","spanID":"3"}]`), `reference type "SIBLING"`},
		{"jaeger unknown process", jspan(`,"processID":"p9"`), `processID "p9" is not in the trace's processes`},
		{"jaeger fractional time", jspan(`,"startTime":1.5`), `startTime "1.5": want whole microseconds`},
		{"jaeger time out of range", jspan(`,"startTime":99999999999999999`), "startTime 99999999999999999: out of range"},
		{"zipkin not spans", `[{"traceId": 7}]`, "traceId must be a string, found a JSON number (byte 14)"},
		{"zipkin bad kind", span(`,"kind":"SIDECAR"`), `span 1 (2): kind "SIDECAR": want CLIENT, SERVER, PRODUCER or CONSUMER`},
		{"zipkin tags not strings", span(`,"tags":{"http.response.status_code":503}`), "tags must be a string, found a JSON number"},
		{"zipkin invalid JSON", "[\n{\"traceId\": \"1\",, }]", "invalid JSON on line 2"},
		{"zipkin second document", `[] []`, "more data after the document ends"},
		{"too deep", "[" + strings.Repeat(`{"a":[`, 40) + "1" + strings.Repeat("]}", 40) + "]", "JSON nested more than 64 deep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := readForeign(t, "traces.json", c.doc, ReadOptions{})
			if err == nil {
				t.Fatal("read without error")
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "traces.json: ") {
				t.Errorf("error %q: want it to name the file and say %q", msg, c.want)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		_, _, err := readForeign(t, "big.json", zipkinDocument, ReadOptions{MaxRecordBytes: 100})
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the limit of 100 bytes") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestJaegerTagValues: a tag's value reads as JSON reads it, whether it is plain (a string without
// escapes, true or false, an integer) or needs unescaping, UTF-8 repair or a float.
func TestJaegerTagValues(t *testing.T) {
	for _, c := range []struct {
		typ, value string
		want       spans.Attr
	}{
		{"string", `"plain"`, spans.StringAttr("k", "plain")},
		{"", `""`, spans.StringAttr("k", "")},
		{"string", `"caf\u00e9 \"q\""`, spans.StringAttr("k", `café "q"`)},
		{"string", `"café"`, spans.StringAttr("k", "café")},
		// Brackets in a string, after an escaped quote, are not nesting.
		{"string", `"\\\"` + strings.Repeat("[", 70) + `"`, spans.StringAttr("k", `\"`+strings.Repeat("[", 70))},
		{"string", "\"bad \xff utf-8\"", spans.StringAttr("k", "bad \uFFFD utf-8")},
		{"bool", `true`, spans.BoolAttr("k", true)},
		{"BOOL", `false`, spans.BoolAttr("k", false)},
		{"int64", `-0`, spans.IntAttr("k", 0)},
		{"int64", `"8080"`, spans.IntAttr("k", 8080)},
		{"int64", `-9223372036854775808`, spans.IntAttr("k", math.MinInt64)},
		{"int64", `9223372036854775808`, spans.DoubleAttr("k", 9223372036854775808)},
		{"int64", `12345678901234567890123`, spans.DoubleAttr("k", 12345678901234567890123)},
		{"float64", `1e3`, spans.DoubleAttr("k", 1000)},
		{"float64", `12.5`, spans.DoubleAttr("k", 12.5)},
		{"float64", `"-0.25e1"`, spans.DoubleAttr("k", -2.5)},
		{"string", `"\ud83d\ude00 \ud800 \u003c\/a\u003e"`, spans.StringAttr("k", "\U0001F600 \uFFFD </a>")},
	} {
		doc := `{"data":[{"traceID":"1","spans":[{"spanID":"2","tags":[{"key":"k","type":"` + c.typ + `","value":` + c.value + `}]}]}]}`
		batches, _, err := DecodeJaegerJSON([]byte(doc), spans.DecodeOptions{AllAttributes: true})
		if err != nil {
			t.Errorf("%s %s: %v", c.typ, c.value, err)
			continue
		}
		if got := batches[0].Spans[0].Attrs; len(got) != 1 || got[0] != c.want {
			t.Errorf("%s %s read as %+v, want %+v", c.typ, c.value, got, c.want)
		}
	}
	// A string tag reads as json.Unmarshal reads the value, escapes and all.
	for _, v := range []string{`"a\tb"`, `"\u00e9\"\\\/\b\f\n\r"`, `"\udc00\ud800x"`, `"\ud800\ud800\udc00"`, "\"\xe9\"", `"a" `, `"\x"`} {
		var want string
		wantErr := json.Unmarshal([]byte(v), &want)
		got, err := jaegerTag{Key: "k", Value: []byte(v)}.attr()
		if (err != nil) != (wantErr != nil) || err == nil && got != spans.StringAttr("k", want) {
			t.Errorf("string tag %s read as %+v, err %v; json.Unmarshal: %q, err %v", v, got, err, want, wantErr)
		}
	}
	for _, v := range []string{`"007"`, `"+5"`, `"1_000"`, `"0x10"`, `"Inf"`, `"1."`, `"-"`} {
		doc := `{"data":[{"traceID":"1","spans":[{"spanID":"2","tags":[{"key":"k","type":"int64","value":` + v + `}]}]}]}`
		if _, _, err := DecodeJaegerJSON([]byte(doc), spans.DecodeOptions{AllAttributes: true}); err == nil {
			t.Errorf("int64 tag %s read without an error", v)
		}
	}
}

// TestForeignRaw: replay asks for the protobuf form of each record; the traces of a Jaeger
// document come with it, and it decodes back to the same spans.
func TestForeignRaw(t *testing.T) {
	r, err := NewReader(strings.NewReader(jaegerDocument), "-", ReadOptions{Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	back, err := spans.DecodeProto(rec.Raw, spans.DecodeOptions{})
	if err != nil || len(back.Spans) != len(rec.Batch.Spans) {
		t.Fatalf("raw decodes to %v spans, err %v", len(back.Spans), err)
	}
	if rec.Pos.String() != "-: trace 1 (00000000000000000000000000a1b2c3)" {
		t.Errorf("position %q", rec.Pos)
	}
	if !bytes.Equal(spans.AppendProto(nil, back), spans.AppendProto(nil, rec.Batch)) {
		t.Errorf("raw form differs from the batch")
	}
}

// A trace without spans is still a record, and its raw form an empty request, not nil (which
// says the raw form was not asked for).
func TestForeignRawOfATraceWithoutSpans(t *testing.T) {
	r, err := NewReader(strings.NewReader(`{"data":[{"traceID":"a1b2c3","spans":[],"processes":{}}]}`), "-", ReadOptions{Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Raw == nil || len(rec.Batch.Spans) != 0 {
		t.Fatalf("raw %v for %d spans: want an empty request for none", rec.Raw, len(rec.Batch.Spans))
	}
	if back, err := spans.DecodeProto(rec.Raw, spans.DecodeOptions{}); err != nil || len(back.Spans) != 0 {
		t.Fatalf("raw decodes to %d spans, err %v", len(back.Spans), err)
	}
}

// TestDeriveStatus: the status of a span that carries none follows the OpenTelemetry
// conventions; an explicit one wins.
func TestDeriveStatus(t *testing.T) {
	for _, c := range []struct {
		kind    spans.Kind
		attr    spans.Attr
		otel    string
		errTag  bool
		want    spans.StatusCode
		comment string
	}{
		{spans.KindClient, spans.IntAttr("http.response.status_code", 404), "", false, spans.StatusError, "client 4xx"},
		{spans.KindServer, spans.IntAttr("http.response.status_code", 404), "", false, spans.StatusUnset, "server 4xx is the caller's fault"},
		{spans.KindServer, spans.StringAttr("http.status_code", "503"), "", false, spans.StatusError, "server 5xx, older key, as a string"},
		{spans.KindClient, spans.IntAttr("http.response.status_code", 200), "", false, spans.StatusUnset, "success"},
		{spans.KindClient, spans.IntAttr("rpc.grpc.status_code", 5), "", false, spans.StatusError, "client NOT_FOUND"},
		{spans.KindServer, spans.IntAttr("rpc.grpc.status_code", 5), "", false, spans.StatusUnset, "server NOT_FOUND"},
		{spans.KindServer, spans.IntAttr("rpc.grpc.status_code", 14), "", false, spans.StatusError, "server UNAVAILABLE"},
		{spans.KindClient, spans.IntAttr("http.response.status_code", 503), "OK", false, spans.StatusOK, "explicit OK wins"},
		{spans.KindInternal, spans.Attr{}, "", true, spans.StatusError, "error tag"},
		{spans.KindInternal, spans.Attr{}, "error", false, spans.StatusError, "otel.status_code in any case"},
	} {
		s := spans.Span{Kind: c.kind}
		if c.attr.Key != "" {
			s.Attrs = []spans.Attr{c.attr}
		}
		if got := deriveStatus(&s, c.otel, c.errTag); got != c.want {
			t.Errorf("%s: %v, want %v", c.comment, got, c.want)
		}
	}
}

// jaegerWalkDocuments are Jaeger documents in the forms the walk reads, and some it leaves to
// encoding/json; each reads the same either way (TestJaegerWalkAgrees, and FuzzJaegerJSON's seeds).
var jaegerWalkDocuments = []string{
	// Processes before spans, an embedded process, escapes, a quoted time, nulls that leave fields
	// unset, an unknown member, a trace id given after the spans that carry their own.
	`{"data":[{"processes":{"p\u0031":{"serviceName":"a\u00e9","tags":[{"key":"host.name","value":"h"}]}},"spans":[` +
		`{"traceID":"1","spanID":"2","operationName":"op \"x\"","startTime":"17","duration":null,"processID":"p1","flags":1,"warnings":null},` +
		`{"traceID":"1","spanID":"3","process":{"serviceName":"b","tags":null},"logs":[{"timestamp":5,"fields":[{"key":"event","value":"e"}]},{"fields":null}],"references":null}` +
		`],"traceID":"1"}],"errors":[]}`,
	// A single trace without "data"; an empty trace; a document of no traces.
	`{"traceID":"5","spans":[{"spanID":"6","tags":[{"key":"span.kind","type":"string","value":"client"},{"key":"x","type":"binary","value":"AAE="}]}],"processes":null}`,
	`{"data":[{"traceID":"7","spans":[]},{"traceID":"8"}]}`,
	`{"data":null}`,
	` {} `,
	// A processID the trace does not list; a repeated member; a name in another case; a span
	// before the trace id it needs; a null trace; invalid UTF-8; errors listed; a leading zero in a
	// member the walk skips; a second document.
	`{"data":[{"traceID":"1","spans":[{"spanID":"2","processID":"p9"}]}]}`,
	`{"data":[{"traceID":"1","spans":[{"spanID":"2","spanID":"3"}]}]}`,
	`{"data":[{"traceID":"1","spans":[{"SpanID":"2"}]}]}`,
	`{"data":[{"spans":[{"spanID":"2"}],"traceID":"1"}]}`,
	`{"data":[null]}`,
	"{\"data\":[{\"traceID\":\"1\",\"spans\":[{\"spanID\":\"2\",\"operationName\":\"\xff\"}]}]}",
	`{"data":[],"errors":[{"code":500,"msg":"down"}]}`,
	`{"data":[{"traceID":"1","spans":[{"spanID":"2","flags":01}]}]}`,
	`{"data":[]} {}`,
	// Nested to the bound (64: the document, data, the trace, spans, the span and 59 arrays) in
	// a member the walk skips, and one past it.
	`{"data":[{"traceID":"1","spans":[{"spanID":"2","x":` + strings.Repeat("[", 59) + strings.Repeat("]", 59) + `}]}]}`,
	`{"data":[{"traceID":"1","spans":[{"spanID":"2","x":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}]}]}`,
}

// TestJaegerWalkAgrees: the walk over a document reads exactly what encoding/json reads, and it
// takes the documents Jaeger writes (a user waits on the slow way otherwise).
func TestJaegerWalkAgrees(t *testing.T) {
	all := realisticSpans(t, 3, 20)
	taken := []string{jaegerDocument, string(foreigntest.Jaeger(all))}
	taken = append(taken, jaegerWalkDocuments[:5]...)
	for _, doc := range taken {
		for _, opt := range []spans.DecodeOptions{{}, {AllAttributes: true}} {
			if _, _, ok := walkJaeger([]byte(doc), opt); !ok {
				t.Errorf("the walk does not take %.200s", doc)
			}
		}
	}
	deep := jaegerWalkDocuments[len(jaegerWalkDocuments)-2:]
	if _, _, ok := walkJaeger([]byte(deep[0]), spans.DecodeOptions{}); !ok {
		t.Errorf("the walk does not take a document nested %d deep", spans.MaxValueDepth)
	}
	if _, _, err := DecodeJaegerJSON([]byte(deep[1]), spans.DecodeOptions{}); !errors.Is(err, spans.ErrTooDeep) {
		t.Errorf("a document nested %d deep read with err = %v, want one too deep", spans.MaxValueDepth+1, err)
	}
	for _, doc := range append(taken, jaegerWalkDocuments[5:]...) {
		for _, opt := range []spans.DecodeOptions{{}, {AllAttributes: true}} {
			jaegerWalkAgrees(t, []byte(doc), opt)
			got, listed, err := DecodeJaegerJSON([]byte(doc), opt)
			want, wantListed, wantErr := decodeJaegerJSONReference([]byte(doc), opt)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || listed != wantListed || !reflect.DeepEqual(got, want) {
				t.Errorf("%.200s: read as %d batches of %d listed, err %v; encoding/json: %d of %d, err %v", doc, len(got), listed, err, len(want), wantListed, wantErr)
			}
		}
	}
}

// jaegerWalkAgrees fails t if the walk takes data and reads it otherwise than encoding/json.
func jaegerWalkAgrees(t *testing.T, data []byte, opt spans.DecodeOptions) {
	t.Helper()
	got, listed, ok := walkJaeger(data, opt)
	if !ok {
		return
	}
	want, wantListed, err := decodeJaegerJSONReference(data, opt)
	if err != nil {
		t.Fatalf("the walk read a document encoding/json refuses (%v): %q", err, data)
	}
	if listed != wantListed || len(got) != len(want) {
		t.Fatalf("the walk read %d batches of %d listed, encoding/json %d of %d: %q", len(got), listed, len(want), wantListed, data)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("batch %d: the walk read\n%+v\nencoding/json\n%+v\nfrom %q", i, got[i], want[i], data)
		}
	}
}

// zipkinWalkDocuments are jaegerWalkDocuments for Zipkin (TestZipkinWalkAgrees, FuzzZipkinJSON).
var zipkinWalkDocuments = []string{
	// Escapes, a repeated tag (its last value stays), nulls that leave fields unset, unknown
	// members, a quoted time, a shared span.
	`[{"traceId":"1","id":"2","name":"a\u00e9","kind":"CLIENT","timestamp":"5","duration":null,"localEndpoint":{"serviceName":"s","ipv4":"10.0.0.1","port":80},` +
		`"remoteEndpoint":{"serviceName":"t"},"tags":{"error":"boom","x":"1","x":"2","service.instance.id":"i1"},"annotations":[{"timestamp":7,"value":"cs"}],"debug":false},` +
		`{"traceId":"1","id":"2","parentId":null,"kind":"SERVER","shared":true,"localEndpoint":{"serviceName":"t"},"annotations":null,"tags":null,"remoteEndpoint":null},` +
		`{"traceId":"1","id":"3","parentId":"2","localEndpoint":{"serviceName":"t"},"shared":null}]`,
	` [] `,
	// A null tag value; a repeated member; a name in another case; a null span; invalid UTF-8;
	// a leading zero in a member the walk skips; null for the whole document; a second document.
	`[{"traceId":"1","id":"2","tags":{"a":null}}]`,
	`[{"traceId":"1","id":"2","id":"3"}]`,
	`[{"traceId":"1","ID":"2"}]`,
	`[null]`,
	"[{\"traceId\":\"1\",\"id\":\"2\",\"name\":\"\xff\"}]",
	`[{"traceId":"1","id":"2","port":01}]`,
	`null`,
	`[] []`,
}

// TestZipkinWalkAgrees is TestJaegerWalkAgrees for Zipkin.
func TestZipkinWalkAgrees(t *testing.T) {
	all := realisticSpans(t, 3, 20)
	shared, _ := foreigntest.Zipkin(all, foreigntest.ZipkinOptions{})
	taken := []string{zipkinDocument, string(shared)}
	taken = append(taken, zipkinWalkDocuments[:2]...)
	for _, doc := range taken {
		for _, opt := range []spans.DecodeOptions{{}, {AllAttributes: true}} {
			if _, ok := walkZipkin([]byte(doc), opt); !ok {
				t.Errorf("the walk does not take %.200s", doc)
			}
		}
	}
	for _, doc := range append(taken, zipkinWalkDocuments[2:]...) {
		for _, opt := range []spans.DecodeOptions{{}, {AllAttributes: true}} {
			zipkinWalkAgrees(t, []byte(doc), opt)
			got, err := decodeZipkinJSON([]byte(doc), opt)
			want, wantErr := decodeZipkinJSONReference([]byte(doc), opt)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("%.200s: read as %d batches, err %v; encoding/json: %d, err %v", doc, len(got), err, len(want), wantErr)
			}
		}
	}
}

// zipkinWalkAgrees is jaegerWalkAgrees for Zipkin.
func zipkinWalkAgrees(t *testing.T, data []byte, opt spans.DecodeOptions) {
	t.Helper()
	got, ok := walkZipkin(data, opt)
	if !ok {
		return
	}
	want, err := decodeZipkinJSONReference(data, opt)
	if err != nil {
		t.Fatalf("the walk read a document encoding/json refuses (%v): %q", err, data)
	}
	if len(got) != len(want) {
		t.Fatalf("the walk read %d batches, encoding/json %d: %q", len(got), len(want), data)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("batch %d: the walk read\n%+v\nencoding/json\n%+v\nfrom %q", i, got[i], want[i], data)
		}
	}
}

// A document read whole reads the same from a file (whose size the reader sizes its memory by,
// past the bytes its format detection has buffered), from memory and from a pipe (whose size
// it cannot know), and the record limit holds to the byte either way.
func TestForeignDocumentReadsTheSameFromAnySource(t *testing.T) {
	all := realisticSpans(t, 4, 100)
	doc := foreigntest.Jaeger(all)
	if len(doc) < 4<<16 {
		t.Fatalf("the document is %d bytes: too short to pass the reader's buffer", len(doc))
	}
	path := t.TempDir() + "/traces.json"
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(name string, open func(opt ReadOptions) (*Reader, error), limit int) ([]spans.Span, error) {
		t.Helper()
		r, err := open(ReadOptions{MaxRecordBytes: limit})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer r.Close()
		recs, err := readRecords(r)
		return spansOf(recs), err
	}
	sources := []struct {
		name string
		open func(opt ReadOptions) (*Reader, error)
	}{
		{"file", func(opt ReadOptions) (*Reader, error) { return Open(path, opt) }},
		{"memory", func(opt ReadOptions) (*Reader, error) { return NewReader(bytes.NewReader(doc), "traces.json", opt) }},
		{"pipe", func(opt ReadOptions) (*Reader, error) {
			return NewReader(io.MultiReader(bytes.NewReader(doc)), "traces.json", opt)
		}},
	}
	want, err := read("pipe", sources[2].open, 0)
	if err != nil || len(want) != len(all) {
		t.Fatalf("from a pipe: %d spans of %d, err %v", len(want), len(all), err)
	}
	for _, src := range sources {
		got, err := read(src.name, src.open, len(doc))
		if err != nil {
			t.Fatalf("%s, the limit at the document's size: %v", src.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the spans differ from those read from a pipe", src.name)
		}
		if _, err := read(src.name, src.open, len(doc)-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s, the limit a byte short of the document: err = %v, want ErrTooLarge", src.name, err)
		}
	}
}

// One Zipkin span of very many tags, then as many spans of one tag each, costs about as much a
// span at 200,000 as at 20,000 (smaller sizes hide a square in the map's tables): what the walk keeps from span to span may not make every later
// span pay for the widest one. A ratio of CPU times, not a speed; a square would cost 10x.
func TestZipkinWideSpanThenManyCostsNoSquare(t *testing.T) {
	if testing.Short() {
		t.Skip("reads documents of 200,000 tags and spans")
	}
	doc := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`[{"traceId":"1","id":"1","timestamp":1,"duration":1,"tags":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":"v"`, i)
		}
		b.WriteString(`}}`)
		for i := range n {
			fmt.Fprintf(&b, `,{"traceId":"1","id":"%x","parentId":"1","timestamp":1,"duration":1,"tags":{"k":"v"}}`, i+2)
		}
		b.WriteByte(']')
		return b.Bytes()
	}
	perSpan := func(n int) time.Duration {
		body := doc(n)
		best := time.Duration(math.MaxInt64)
		for range 3 {
			cpu0 := cputime.Process()
			if _, ok := walkZipkin(body, spans.DecodeOptions{}); !ok {
				t.Fatal("the walk did not take the document")
			}
			best = min(best, (cputime.Process()-cpu0)/time.Duration(n+1))
		}
		return best
	}
	for range 3 { // a pair over the bound is weighed again: one slowed measurement is not a square
		small, large := perSpan(20_000), perSpan(200_000)
		if large <= 4*small+time.Microsecond {
			return
		}
		t.Logf("%v a span at 200,000, %v at 20,000", large, small)
	}
	t.Error("the cost a span grows with the widest span before it")
}
