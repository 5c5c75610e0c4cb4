package spans_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"

	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/spans/spanstest"
)

func toJSON(t testing.TB, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	b, err := spanstest.RequestToJSON(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkJSON decodes the OTLP/JSON form of req and compares with the reference conversion of req.
func checkJSON(t *testing.T, req *coltracepb.ExportTraceServiceRequest, opt spans.DecodeOptions) *spans.Batch {
	t.Helper()
	body := toJSON(t, req)
	got, err := spans.DecodeJSON(body, opt)
	if err != nil {
		t.Fatalf("DecodeJSON: %v\n%s", err, body)
	}
	if d := spanstest.Diff(spanstest.FromProto(req, opt), got); d != "" {
		t.Fatalf("DecodeJSON differs from FromProto:\n%s\n%s", d, body)
	}
	return got
}

func TestDecodeJSONMatchesReferenceOnSDKSpans(t *testing.T) {
	req := sdkRequest(t)
	for _, o := range bothOptions {
		t.Run(o.name, func(t *testing.T) {
			if b := checkJSON(t, req, o.opt); len(b.Spans) != 9 {
				t.Fatalf("got %d spans, want 9", len(b.Spans))
			}
		})
	}
}

func TestDecodeJSONEdgeCases(t *testing.T) {
	for _, tt := range edgeCases() {
		for _, o := range bothOptions {
			t.Run(tt.name+"/"+o.name, func(t *testing.T) {
				b := checkJSON(t, tt.req, o.opt)
				if len(b.Spans) != tt.spans || b.Rejected != tt.rejected {
					t.Fatalf("got %d spans, %d rejected; want %d, %d", len(b.Spans), b.Rejected, tt.spans, tt.rejected)
				}
			})
		}
	}
}

// jsonSpan wraps span members into a request.
func jsonSpan(members string) string {
	return `{"resourceSpans":[{"scopeSpans":[{"spans":[{` + members + `}]}]}]}`
}

const jsonIDs = `"traceId":"000000000000000000000000000000aa","spanId":"00000000000000bb"`

// TestDecodeJSONSpellings covers what OTLP/JSON senders actually vary: each input must decode to
// the span given by the expectation function.
func TestDecodeJSONSpellings(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		check func(*spans.Batch) bool
	}{
		{"snake_case names",
			`{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"svc"}}]},` +
				`"scope_spans":[{"scope":{"name":"sc"},"spans":[{"trace_id":"000000000000000000000000000000aa","span_id":"00000000000000bb",` +
				`"parent_span_id":"00000000000000cc","start_time_unix_nano":"5","end_time_unix_nano":7,` +
				`"attributes":[{"key":"http.request.method","value":{"string_value":"GET"}},{"key":"http.response.status_code","value":{"int_value":"200"}}],` +
				`"events":[{"time_unix_nano":"9","name":"e"}],"links":[{"trace_id":"000000000000000000000000000000dd","span_id":"00000000000000ee"}]}]}]}]}`,
			func(b *spans.Batch) bool {
				s := b.Spans[0]
				n, _ := s.Int(spans.AttrHTTPStatus)
				return s.Service() == "svc" && s.Scope == "sc" && s.ParentID[7] == 0xcc && s.StartUnixNano == 5 && s.EndUnixNano == 7 &&
					s.Str(spans.AttrHTTPMethod) == "GET" && n == 200 && s.Events[0].TimeUnixNano == 9 && s.Links[0].SpanID[7] == 0xee
			}},
		{"enum names", jsonSpan(jsonIDs + `,"kind":"SPAN_KIND_CLIENT","status":{"code":"STATUS_CODE_ERROR","message":"m"}`),
			func(b *spans.Batch) bool {
				return b.Spans[0].Kind == spans.KindClient && b.Spans[0].Status == spans.StatusError && b.Spans[0].StatusMessage == "m"
			}},
		{"enum numbers", jsonSpan(jsonIDs + `,"kind":2,"status":{"code":1}`),
			func(b *spans.Batch) bool {
				return b.Spans[0].Kind == spans.KindServer && b.Spans[0].Status == spans.StatusOK
			}},
		{"64-bit integers as numbers and strings", jsonSpan(jsonIDs + `,"startTimeUnixNano":1700000000000000001,"endTimeUnixNano":"18446744073709551615",` +
			`"attributes":[{"key":"resilience.attempt","value":{"intValue":-3}},{"key":"resilience.deadline","value":{"intValue":"9007199254740993"}},` +
			`{"key":"resilience.backoff_ms","value":{"intValue":1e3}}]`),
			func(b *spans.Batch) bool {
				s := b.Spans[0]
				a, _ := s.Int(spans.AttrAttempt)
				dl, _ := s.Int(spans.AttrDeadline)
				bo, _ := s.Int(spans.AttrBackoff)
				return s.StartUnixNano == 1700000000000000001 && s.EndUnixNano == -1 && a == -3 && dl == 9007199254740993 && bo == 1000
			}},
		{"doubles in every form", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.backoff_ms","value":{"doubleValue":"NaN"}},` +
			`{"key":"resilience.retry_after_ms","value":{"doubleValue":"-Infinity"}},{"key":"resilience.budget.remaining","value":{"doubleValue":2.5e-3}},` +
			`{"key":"resilience.fanout.width","value":{"doubleValue":"7"}}]`),
			func(b *spans.Batch) bool {
				s := b.Spans[0]
				v := func(k string) float64 { a, _ := s.Attr(k); return a.Float() }
				return math.IsNaN(v(spans.AttrBackoff)) && math.IsInf(v(spans.AttrRetryAfter), -1) &&
					v(spans.AttrBudgetRemaining) == 2.5e-3 && v(spans.AttrFanoutWidth) == 7
			}},
		{"unknown fields and nulls ignored", `{"x":[1,{"y":null}],"resourceSpans":[{"schemaUrl":"u","resource":null,"scopeSpans":[{"scope":null,"spans":[{` +
			jsonIDs + `,"traceState":"a=b","flags":257,"droppedAttributesCount":3,"name":null,"status":null,"events":null,"future":{"a":[true,false,-0.5e+3]}}]}]}]}`,
			func(b *spans.Batch) bool { return len(b.Spans) == 1 && b.Spans[0].Name == "" }},
		{"escapes unescaped", jsonSpan(jsonIDs + `,"name":"a\"b\\c\/d\u00e9\ud83d\ude00\ud800x\n","attributes":[{"key":"resilience.opera\u0074ion.id","value":{"stringValue":"\t"}}]`),
			func(b *spans.Batch) bool {
				return b.Spans[0].Name == "a\"b\\c/d\u00e9\U0001F600\uFFFDx\n" && b.Spans[0].Str(spans.AttrOpID) == "\t"
			}},
		{"escaped member names", jsonSpan(`"trace\u0049d":"000000000000000000000000000000aa","spanId":"00000000000000bb","n\u0061me":"x"`),
			func(b *spans.Batch) bool { return len(b.Spans) == 1 && b.Spans[0].Name == "x" }},
		{"uppercase hex ids", jsonSpan(`"traceId":"000000000000000000000000000000AA","spanId":"00000000000000BB"`),
			func(b *spans.Batch) bool { return b.Spans[0].TraceID[15] == 0xaa && b.Spans[0].SpanID[7] == 0xbb }},
		{"non-hex and base64 ids rejected", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AAAAAAAAAAAAAAAAAAAAqg==","spanId":"00000000000000bb"},` +
			`{"traceId":"zz0000000000000000000000000000aa","spanId":"00000000000000bb"},{` + jsonIDs + `,"parentSpanId":"xyz"}]}]}]}`,
			func(b *spans.Batch) bool {
				return len(b.Spans) == 1 && b.Rejected == 2 && b.RejectReason == spans.RejectInvalidID && b.Spans[0].ParentID.IsZero()
			}},
		{"key after value, values of dropped keys skipped", jsonSpan(jsonIDs + `,"attributes":[{"value":{"stringValue":"v"},"key":"resilience.owner"},` +
			`{"key":"not.known","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}}]`),
			func(b *spans.Batch) bool { return len(b.Spans[0].Attrs) == 1 && b.Spans[0].Str(spans.AttrOwner) == "v" }},
		{"resource and scope after spans", `{"resourceSpans":[{"scopeSpans":[{"spans":[{` + jsonIDs + `}],"scope":{"name":"late"}}],` +
			`"resource":{"attributes":[{"key":"service.instance.id","value":{"intValue":"4"}}]}}]}`,
			func(b *spans.Batch) bool { return b.Spans[0].Scope == "late" && b.Spans[0].Instance() == "4" }},
		{"rendered values", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.operation.name","value":{"arrayValue":{"values":[` +
			`{"stringValue":"a\"b\n"},{},{"kvlistValue":{"values":[{"value":{"bytesValue":"yv4="},"key":"k\u00e9"},{"key":"n"}]}},{"doubleValue":1e21},{"boolValue":false},{"intValue":"-1"}]}}},` +
			`{"key":"resilience.operation.id","value":{"bytesValue":"_-8"}}]`),
			func(b *spans.Batch) bool {
				return b.Spans[0].Str(spans.AttrOpName) == `["a\"b\n",null,{"ké":cafe,"n":null},1e+21,false,-1]` &&
					b.Spans[0].Str(spans.AttrOpID) == "ffef"
			}},
		{"whitespace everywhere", "\n {\r\n\t\"resourceSpans\" : [ { \"scopeSpans\" : [ { \"spans\" : [ { \"traceId\" : \"000000000000000000000000000000aa\" , \"spanId\" : \"00000000000000bb\" } ] } ] } ] } \n",
			func(b *spans.Batch) bool { return len(b.Spans) == 1 }},
		{"empty object", `{}`, func(b *spans.Batch) bool { return len(b.Spans) == 0 && b.Rejected == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := spans.DecodeJSON([]byte(tt.body), spans.DecodeOptions{})
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			if len(b.Spans) == 0 && !strings.Contains(tt.name, "empty") {
				t.Fatalf("no spans: %+v", b)
			}
			if !tt.check(b) {
				t.Fatalf("unexpected batch: %+v", b.Spans)
			}
		})
	}
}

// TestDecodeJSONCompactForms covers the forms the fast paths read in place (compact attributes,
// ids of the right length, plain integers) next to the ones they hand to the general path: both
// must give what the protobuf JSON mapping means.
func TestDecodeJSONCompactForms(t *testing.T) {
	body := jsonSpan(`"traceId":"000000000000000000000000000000aa","spanId":"00000000000000bb","parentSpanId":"00000000000000c",` +
		`"startTimeUnixNano":"0018446744073709551615","endTimeUnixNano":1700000000000000001,"kind":3,` +
		`"attributes":[{"key":"url.full","value":{"stringValue":"http://h/p?a=1\u0026b=2"}},` +
		`{"key":"not.known","value":{"stringValue":"x\u003cy"}},` +
		`{"key":"resilience.attempt","value":{"intValue":"0007"}},` +
		`{"key":"resilience.deadline","value":{"intValue":-9223372036854775808}},` +
		`{"key":"resilience.backoff_ms","value":{"intValue":"+5"}},` +
		`{"key":"resilience.budget.remaining","value":{"intValue":"123456789012345678"}},` +
		`{"key":"resilience.terminal","value":{"boolValue":true}},` +
		`{"key":"resilience.owner","value":{"stringValue":"o\"}"}}]`)
	for _, o := range bothOptions {
		t.Run(o.name, func(t *testing.T) {
			b, err := spans.DecodeJSON([]byte(body), o.opt)
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			s := b.Spans[0]
			num := func(k string) int64 { n, _ := s.Int(k); return n }
			term, _ := s.Attr(spans.AttrTerminal)
			if s.Str(spans.AttrURLFull) != "http://h/p?a=1&b=2" || s.Str(spans.AttrOwner) != `o"}` ||
				num(spans.AttrAttempt) != 7 || num(spans.AttrDeadline) != math.MinInt64 || num(spans.AttrBackoff) != 5 ||
				num(spans.AttrBudgetRemaining) != 123456789012345678 || term.Type != spans.ValueBool || term.Num != 1 ||
				s.StartUnixNano != -1 || s.EndUnixNano != 1700000000000000001 || s.Kind != spans.KindClient || !s.ParentID.IsZero() {
				t.Fatalf("unexpected span: %+v", s)
			}
			unknown, kept := s.Attr("not.known")
			if kept != o.opt.AllAttributes || (kept && unknown.Str != "x<y") {
				t.Fatalf("not.known: kept %v, %+v; want kept only with AllAttributes, unescaped", kept, unknown)
			}
		})
	}
}

func TestDecodeJSONBadInput(t *testing.T) {
	deep := `{"stringValue":"x"}`
	for i := 0; i < spans.MaxValueDepth+2; i++ {
		deep = `{"arrayValue":{"values":[` + deep + `]}}`
	}
	tests := []struct{ name, body, want, at string }{
		{"empty body", "", "empty body", ``},
		{"not an object", `[]`, `expected '{', found '['`, ``},
		{"truncated", `{"resourceSpans":[{"scopeSpans":[`, "resourceSpans[0]: scopeSpans[0]: at offset @: expected '{', found end of input", `END`},
		{"trailing data", `{} {}`, "data after the request object", ``},
		{"trailing data after a NUL byte", "{}\x00{}", "data after the request object", ``},
		{"missing comma", `{"a":1 "b":2}`, "expected ',' or '}'", ``},
		{"bad literal", `{"a":tru}`, "invalid literal", ``},
		{"unterminated string", `{"a":"abc`, "unterminated string", ``},
		{"control character", "{\"a\":\"a\x01\"}", "control character", ``},
		{"bad escape", `{"a":"\q"}`, `bad escape \q`, ``},
		{"bad escape of a control byte", "{\"a\":\"\\\x1b[31m\"}", `bad escape \ and byte 0x1b`, ``},
		{"short unicode escape", `{"a":"\u12"}`, "bad \\u escape", ``},
		{"resourceSpans not an array", `{"resourceSpans":{}}`, "resourceSpans: at offset 17: expected '['", ``},
		{"id not a string", jsonSpan(`"traceId":5`), "spans[0]: traceId: at offset", ``},
		{"bad kind name", jsonSpan(jsonIDs + `,"kind":"SPAN_KIND_SIDEWAYS"`), `kind: at offset @: unknown enum value "SPAN_KIND_SIDEWAYS"`, `"SPAN_KIND_SIDEWAYS"`},
		{"bad status code", jsonSpan(jsonIDs + `,"status":{"code":"OK"}`), `status: code: at offset`, ``},
		{"time not a number", jsonSpan(jsonIDs + `,"startTimeUnixNano":"soon"`), `startTimeUnixNano: at offset @: invalid uint64 "soon"`, `"soon"`},
		{"negative time", jsonSpan(jsonIDs + `,"endTimeUnixNano":-1`), `endTimeUnixNano: at offset`, ``},
		{"fractional int", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.attempt","value":{"intValue":1.5}}]`), `attributes[0]: value: intValue: at offset @: invalid int64 "1.5"`, `1.5`},
		{"int overflow", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.attempt","value":{"intValue":"9223372036854775808"}}]`), `invalid int64`, ``},
		{"bool as string", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.terminal","value":{"boolValue":"true"}}]`), `boolValue: at offset @: expected true or false`, `"true"}`},
		{"bad double", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.backoff_ms","value":{"doubleValue":"fast"}}]`), `invalid double "fast"`, ``},
		{"two oneof members", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.owner","value":{"stringValue":"a","intValue":1}}]`), `attributes[0]: value: more than one of`, ``},
		{"bad base64", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.owner","value":{"bytesValue":"!!"}}]`), `bytesValue: invalid base64`, ``},
		{"too deep", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.owner","value":` + deep + `}]`), `nested too deeply`, ``},
		{"unknown field too deep", `{"x":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "JSON nested more than 256 deep", ``},
		{"attribute not an object", jsonSpan(jsonIDs + `,"attributes":["k"]`), `spans[0]: attributes[0]: at offset @: expected '{'`, `"k"`},
		{"key not a string", jsonSpan(jsonIDs + `,"attributes":[{"key":1}]`), `attributes[0]: key: at offset`, ``},
		{"name not a string", jsonSpan(jsonIDs + `,"name":{}`), `name: at offset`, ``},
		{"missing colon", `{"resourceSpans" []}`, `expected ':'`, ``},
		{"bad escape in a compact attribute", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.owner","value":{"stringValue":"a\qb"}}]`), `attributes[0]: value: stringValue: at offset @: bad escape \q`, `\qb`},
		{"bad escape in a dropped attribute", jsonSpan(jsonIDs + `,"attributes":[{"key":"not.known","value":{"stringValue":"a\u12"}}]`), `attributes[0]: at offset @: bad \u escape`, `\u12`},
		{"int of 19 digits out of range", jsonSpan(jsonIDs + `,"attributes":[{"key":"resilience.attempt","value":{"intValue":9999999999999999999}}]`), `invalid int64`, ``},
		{"time of 20 digits out of range", jsonSpan(jsonIDs + `,"startTimeUnixNano":"99999999999999999999"`), `invalid uint64`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := spans.DecodeJSON([]byte(tt.body), spans.DecodeOptions{})
			if err == nil {
				t.Fatalf("no error; batch %+v", b)
			}
			// "@" in want stands for the offset of the token tt.at (the end of input for END).
			want := tt.want
			if i := strings.Index(want, "@"); i >= 0 {
				off := len(tt.body)
				if tt.at != "END" {
					off = strings.LastIndex(tt.body, tt.at)
				}
				want = want[:i] + strconv.Itoa(off) + want[i+1:]
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			if !strings.HasPrefix(err.Error(), "decode OTLP/JSON request: ") || !errors.Is(err, spans.ErrMalformed) || !spans.IsPermanent(err) {
				t.Errorf("error %q is not a permanent ErrMalformed with context", err)
			}
		})
	}
}

// spaced inserts a space after every '{', '[', ',' and ':' outside strings: the same JSON, but not
// in the compact layout the decoder's fast paths read in place, so it goes the general way.
func spaced(body []byte) []byte {
	out := make([]byte, 0, len(body)*5/4)
	inString, escaped := false, false
	for _, c := range body {
		out = append(out, c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '[' || c == ',' || c == ':'):
			out = append(out, ' ')
		}
	}
	return out
}

// TestDecodeJSONFastPathsMatchGeneralPaths decodes each seed body, and mutations of it, both as
// it is and spaced out: the compact-layout fast paths (attributes, member names, ids, integers)
// must accept and reject exactly what the general paths do, with the same result.
func TestDecodeJSONFastPathsMatchGeneralPaths(t *testing.T) {
	_, bench, _ := benchBodies(t)
	seeds := append(jsonSeeds(t), bench)
	state := uint64(0x9E3779B97F4A7C15)
	rnd := func(n int) int { // xorshift: deterministic, no global source
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		return int(state % uint64(n))
	}
	// What the fast paths look at: quotes, escapes, digits, signs, exponents, brackets.
	edits := []string{`"`, `\`, `\u0026`, `\u12`, `\q`, "0", "9", "-", "+", ".", "e", "}", "{", "]", ",", "\x01", "null", `"7"`,
		"99999999999999999999", "1e3", `"a\"b"`, " ", "\n"}
	checked, accepted := 0, 0
	for _, seed := range seeds {
		for k := 0; k < 100; k++ {
			body := append([]byte(nil), seed...)
			for m := 0; k > 0 && m <= rnd(2) && len(body) > 0; m++ {
				i := rnd(len(body))
				switch e := []byte(edits[rnd(len(edits))]); rnd(7) {
				case 0, 1, 2:
					body = append(body[:i], append(e, body[i+1:]...)...)
				case 3, 4, 5:
					body = append(body[:i], append(e, body[i:]...)...)
				default:
					body = body[:i]
				}
			}
			for _, o := range bothOptions {
				fast, ferr := spans.DecodeJSON(body, o.opt)
				general, gerr := spans.DecodeJSON(spaced(body), o.opt)
				checked++
				if (ferr == nil) != (gerr == nil) {
					t.Fatalf("%s: compact error %v, spaced error %v\n%s", o.name, ferr, gerr, body)
				}
				if ferr != nil {
					continue
				}
				accepted++
				if d := spanstest.Diff(general, fast); d != "" {
					t.Fatalf("%s: compact and spaced decode differently:\n%s\n%s", o.name, d, body)
				}
			}
		}
	}
	t.Logf("%d of %d decoded", accepted, checked)
	if accepted < checked/5 {
		t.Fatalf("only %d of %d bodies decoded: the mutations are too harsh to compare much", accepted, checked)
	}
}

// TestDecodeJSONKeysAlikeInTheirFirstBytes: the decoder remembers the attribute keys it met by
// their first bytes; keys that share those and differ after them are still told apart - a
// well-known key is kept and its look-alike dropped (or kept as itself), in either order.
func TestDecodeJSONKeysAlikeInTheirFirstBytes(t *testing.T) {
	known := spans.AttrHTTPStatus // longer than the 24 bytes remembered
	if len(known) <= 24 {
		t.Fatalf("%q: want a well-known key of more than 24 bytes", known)
	}
	alike := known[:len(known)-1] + "X"
	attr := func(k string, v int) string {
		return `{"key":"` + k + `","value":{"intValue":"` + strconv.Itoa(v) + `"}}`
	}
	for _, order := range [][2]string{{known, alike}, {alike, known}} {
		var list []string
		for i := range 4 { // each key met again after the other
			list = append(list, attr(order[0], 2*i), attr(order[1], 2*i+1))
		}
		body := jsonSpan(`"traceId":"000000000000000000000000000000aa","spanId":"00000000000000bb",` +
			`"attributes":[` + strings.Join(list, ",") + `]`)
		for _, o := range bothOptions {
			b, err := spans.DecodeJSON([]byte(body), o.opt)
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			var got []string
			for _, a := range b.Spans[0].Attrs {
				got = append(got, a.Key+"="+strconv.FormatInt(a.Num, 10))
			}
			var want []string
			for i := range 8 {
				if k := order[i%2]; k == known || o.opt.AllAttributes {
					want = append(want, k+"="+strconv.Itoa(i))
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s, %s first: got %v, want %v", o.name, order[0], got, want)
			}
		}
	}
}
