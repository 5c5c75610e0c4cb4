package detectortest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

// retriedTrace is web calling catalog three times (lines 3, 5, 7): the stand-in detector reports
// the operation about the second and third attempts. want goes on line 5.
const retriedTrace = `# web tries catalog three times.
trace checkout
web server "GET /checkout" 0s+20ms http.request.method=GET http.route=/checkout
  web client "HTTP GET" 1ms+3ms error http.request.method=GET url.full=http://catalog:8080/items server.address=catalog server.port=8080 http.response.status_code=503
    catalog server "GET /items" 1.5ms+2ms error http.route=/items http.response.status_code=503
  web client "HTTP GET" 5ms+3ms error http.request.method=GET url.full=http://catalog:8080/items server.address=catalog server.port=8080 http.response.status_code=503{want}
    catalog server "GET /items" 5.5ms+2ms error http.route=/items http.response.status_code=503
  web client "HTTP GET" 9ms+3ms http.request.method=GET url.full=http://catalog:8080/items server.address=catalog server.port=8080 http.response.status_code=200
    catalog server "GET /items" 9.5ms+2ms http.route=/items http.response.status_code=200
`

// textCase writes text as dir/case.trace and returns the case read from it.
func textCase(t *testing.T, text string) Case {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "case.trace"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cases[0]
}

// A want is about the span of its line: it passes there, and fails with a message naming its
// line when the finding is about other spans, says something else, or is missing; a finding no
// want expects fails naming the lines of its spans.
func TestTextWantIsAboutItsSpan(t *testing.T) {
	const finding = "warning web -> catalog attempts=3"
	for _, tt := range []struct {
		name, want string
		diff       []string // what the failure says, "" when the case passes
	}{
		{"on a span of the finding", "6: # want " + finding, nil},
		{"on a later line of its own, about the span above", "6:\n    # want " + finding, nil},
		{"on a span the finding is not about", "4: # want " + finding, []string{
			"- " + "DIR/case.trace:4: want " + finding,
			"# reported, but about the spans on lines 6, 8, not this line's",
		}},
		{"a value that differs", "6: # want warning web -> catalog attempts=4", []string{
			"- DIR/case.trace:6: want warning web -> catalog attempts=4",
			"+ warning web -> catalog attempts=3",
		}},
		{"no want for a finding", "", []string{
			"+ warning web -> catalog attempts=3 classes=0",
			"# unexpected: no want on the lines 6, 8",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := retriedTrace
			if line, want, ok := strings.Cut(tt.want, ":"); ok {
				// Put the want at the end of the line it names (the first line is 1).
				lines := strings.Split(text, "\n")
				n := int(line[0]-'0') - 1
				lines[n] = strings.Replace(lines[n], "{want}", "", 1) + " " + strings.TrimPrefix(want, " ")
				text = strings.Join(lines, "\n")
			}
			text = strings.Replace(text, "{want}", "", 1)
			c := textCase(t, text)
			got, err := c.Analyze(retried)
			if err != nil {
				t.Fatal(err)
			}
			diff := c.diff(got)
			if len(tt.diff) == 0 {
				if diff != "" {
					t.Errorf("fails:\n%s", diff)
				}
				return
			}
			for _, w := range tt.diff {
				w = strings.ReplaceAll(w, "DIR/", filepath.Dir(c.Trace)+string(filepath.Separator))
				if !strings.Contains(diff, w) {
					t.Errorf("failure\n%s\ndoes not say %q", diff, w)
				}
			}
		})
	}
}

// Every mistake in a .trace file is an error naming its line.
func TestTextErrorsNameTheLine(t *testing.T) {
	const head = "trace t\nweb server root 0s+10ms\n"
	for _, tt := range []struct{ text, err string }{
		{"web server root 0s+1ms\n", "case.trace:1: a span before the first `trace NAME` line"},
		{"# want warning a -> b\n" + head, "case.trace:1: a want comment must follow the span it is about"},
		{head + "  web client x\n", "case.trace:3: 3 fields: a span is SERVICE KIND NAME START+DURATION"},
		{head + "  web cleint x 1ms+1ms\n", `case.trace:3: kind "cleint"`},
		{head + "  web client x 1ms\n", `case.trace:3: time "1ms": START+DURATION`},
		{head + "  web client x 1ms+1\n", `case.trace:3: time "1ms+1"`},
		{head + "  web client x 1ms+1ms http.route=/a http.route=/b\n", "case.trace:3: http.route is written twice"},
		{head + "  web client x 1ms+1ms colour=red\n", "case.trace:3: colour: not an attribute the analyzer keeps"},
		{head + "  web client x 1ms+1ms url.full=\"http://a\n", "case.trace:3: a quote is not closed"},
		{head + "  web client x 1ms+1ms ok error\n", "case.trace:3: error: the status is written once"},
		{head + "  web client x 1ms+1ms # want warn a -> b\n", `case.trace:3: unknown severity "warn"`},
		{head + "  web client x 1ms+1ms parent=p\n", "case.trace:3: parent=p on an indented line"},
		{head + "\tweb client x 1ms+1ms\n", "case.trace:3: indent with spaces, not tabs"},
		{head + "trace t\n", `case.trace:3: trace "t" is written twice`},
		{"trace a:b\n", `case.trace:1: trace "a:b": a trace's name is one word`},
		{"start yesterday\n" + head, "case.trace:1: start:"},
		{"# nothing\n", "case.trace: no spans"},
	} {
		_, err := parseText("case.trace", []byte(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: error %v, want %q", tt.text, err, tt.err)
		}
	}
}

// The text form holds everything of a span the analyzer reads: written back, a file reads the
// same, and the spans are what its lines say.
func TestTextReadsBackTheSame(t *testing.T) {
	const text = `start 2026-02-01T08:00:00Z

trace t1
edge server "GET /a b" 0s+10ms ok http.request.method=GET http.route=/a
  edge client "HTTP GET" 1ms+2.5ms error instance=edge-2 url.full="http://api:8080/x?q=#1" http.response.status_code=503 error.type="503" resilience.backoff_ms=1.5 error=true http.request.header.grpc-timeout=["40m"] message="503 Service Unavailable" # want warning edge -> http://api:8080
    api server "GET /x" 1.25ms+2ms id=s1
worker consumer work 20ms+1ms parent=s2 link=s1 link=t2:s1

trace t2
api producer publish 3ms+-1ms id=s1 messaging.system=rabbitmq
`
	tt, err := parseText("case.trace", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(tt.batches) != 2 || len(tt.batches[0].Spans) != 4 || len(tt.want) != 1 {
		t.Fatalf("%d batches, %d wants", len(tt.batches), len(tt.want))
	}
	s := tt.batches[0].Spans
	base := int64(1769932800000000000) // 2026-02-01T08:00:00Z
	if s[1].ParentID != s[0].SpanID || s[2].ParentID != s[1].SpanID || s[3].ParentID.IsZero() || s[3].ParentID == s[2].SpanID {
		t.Errorf("parents: %v", s)
	}
	if s[1].StartUnixNano != base+1e6 || s[1].EndUnixNano != base+3.5e6 || s[1].Kind != spans.KindClient ||
		s[1].Status != spans.StatusError || s[1].Instance() != "edge-2" || s[1].StatusMessage != "503 Service Unavailable" {
		t.Errorf("client span %+v", s[1])
	}
	attrs := map[string]spans.Attr{}
	for _, a := range s[1].Attrs {
		attrs[a.Key] = a
	}
	if a := attrs["url.full"]; a.Str != "http://api:8080/x?q=#1" || a.Type != spans.ValueString {
		t.Errorf("url.full %+v", a)
	}
	if a := attrs["error.type"]; a.Type != spans.ValueString || attrs["http.response.status_code"].Type != spans.ValueInt ||
		attrs["resilience.backoff_ms"].Float() != 1.5 || attrs["error"].Type != spans.ValueBool ||
		attrs["http.request.header.grpc-timeout"].Type != spans.ValueOther {
		t.Errorf("attribute types %+v", attrs)
	}
	if tt.want[0].Span != s[1].SpanID.String() || tt.want[0].Pos != "case.trace:5" {
		t.Errorf("want %+v is not about line 5's span", tt.want[0])
	}
	other := tt.batches[1].Spans[0]
	if len(s[3].Links) != 2 || s[3].Links[0].SpanID != s[2].SpanID || s[3].Links[1].SpanID != other.SpanID ||
		s[3].Links[1].TraceID != other.TraceID || other.EndUnixNano != other.StartUnixNano-1e6 {
		t.Errorf("links %+v to %+v", s[3].Links, other)
	}

	wants := map[string][]string{s[1].SpanID.String(): {"warning edge -> http://api:8080"}}
	var batches []*spans.Batch
	batches = append(batches, tt.batches...)
	out, _, err := formatText(batches, wants, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseText("again.trace", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out2, _, err := formatText(again.batches, map[string][]string{again.batches[0].Spans[1].SpanID.String(): {"warning edge -> http://api:8080"}}, nil)
	if err != nil || string(out2) != string(out) {
		t.Errorf("written twice differs (%v):\n%s\n%s", err, out, out2)
	}
	for i, b := range again.batches {
		for j, s := range b.Spans {
			o := tt.batches[i].Spans[j]
			if s.Name != o.Name || s.StartUnixNano != o.StartUnixNano || s.EndUnixNano != o.EndUnixNano ||
				s.Kind != o.Kind || s.Status != o.Status || s.StatusMessage != o.StatusMessage ||
				len(s.Attrs) != len(o.Attrs) || len(s.Links) != len(o.Links) || s.Instance() != o.Instance() ||
				s.ParentID.IsZero() != o.ParentID.IsZero() {
				t.Errorf("span %d/%d read back as %+v, was %+v", i, j, s, o)
			}
		}
	}
}

// The keys a span line holds besides attributes are none the decoder keeps, so a line never
// means both.
func TestMetaKeysAreNoAttributes(t *testing.T) {
	for _, k := range metaKeys {
		if spans.IsWellKnown(k) {
			t.Errorf("%s is an attribute the decoder keeps", k)
		}
	}
}

// Convert rewrites a passing OTLP case as a .trace with the same findings, and leaves a failing
// one alone.
func TestConvert(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("testdata/retried.jsonl", "good.jsonl")
	copyFile("testdata/retried.want", "good.want")
	copyFile("testdata/retried.jsonl", "bad.jsonl")
	if err := os.WriteFile(filepath.Join(dir, "bad.want"), []byte("warning web -> catalog attempts=9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done, err := Convert(retried, dir, "*")
	if len(done) != 1 || done[0] != "good" || err == nil || !strings.Contains(err.Error(), "bad.jsonl: not converted: the case fails as it is") {
		t.Fatalf("converted %v, error %v", done, err)
	}
	for _, f := range []string{"good.jsonl", "good.want"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s is left beside good.trace", f)
		}
	}
	text, err := os.ReadFile(filepath.Join(dir, "good.trace"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "# web tried catalog four times") || !strings.Contains(string(text), "# want warning web -> catalog attempts=4 classes=0") {
		t.Errorf("good.trace:\n%s", text)
	}
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.Name == "good" {
			got, err := c.Analyze(retried)
			if diff := c.diff(got); err != nil || diff != "" {
				t.Errorf("good.trace fails (%v):\n%s", err, diff)
			}
		}
	}
}
