package analyzer_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
)

// evidenceCases are values of every kind, each with the Go value encoding/json would have been
// given for it: the report's bytes must not depend on the evidence being typed.
func evidenceCases() []struct {
	name  string
	v     analyzer.Value
	plain any
} {
	return []struct {
		name  string
		v     analyzer.Value
		plain any
	}{
		{"none", analyzer.Value{}, nil},
		{"int", analyzer.Int(27), 27},
		{"int negative", analyzer.Int(-3), -3},
		{"int max", analyzer.Int(math.MaxInt), math.MaxInt},
		{"float", analyzer.Float(0.125), 0.125},
		{"float integral", analyzer.Float(5), 5.0},
		{"float tiny", analyzer.Float(1e-7), 1e-7},
		{"float huge", analyzer.Float(1e21), 1e21},
		{"float negative zero", analyzer.Float(math.Copysign(0, -1)), math.Copysign(0, -1)},
		{"text", analyzer.Text("http://dep:8080"), "http://dep:8080"},
		{"text escaped", analyzer.Text("a<b>&\"\\\n\t\x00\x1f\b\f\u2028\u2029é"), "a<b>&\"\\\n\t\x00\x1f\b\f\u2028\u2029é"},
		{"text invalid utf-8", analyzer.Text("a\xffb\xc3"), "a\xffb\xc3"},
		{"text empty", analyzer.Text(""), ""},
		{"bool", analyzer.Bool(false), false},
		{"bool true", analyzer.Bool(true), true},
		{"texts", analyzer.Texts([]string{"b", "a"}), []string{"b", "a"}},
		{"texts nil", analyzer.Texts(nil), []string(nil)},
		{"texts empty", analyzer.Texts([]string{}), []string{}},
		{"ints", analyzer.Ints([]int{3, -1}), []int{3, -1}},
		{"ints nil", analyzer.Ints(nil), []int(nil)},
		{"floats", analyzer.Floats([]float64{0, 1.5, 2}), []float64{0, 1.5, 2}},
		{"record", analyzer.Record(analyzer.Evidence{"b": analyzer.Int(1), "a": analyzer.Text("x"), "<": analyzer.Value{}}),
			map[string]any{"b": 1, "a": "x", "<": nil}},
		{"record nil", analyzer.Record(nil), map[string]any(nil)},
		{"record empty", analyzer.Record(analyzer.Evidence{}), map[string]any{}},
		{"counts", analyzer.Counts(map[string]int{"503": 54, "200": 2}), map[string]int{"503": 54, "200": 2}},
		{"records", analyzer.Records([]analyzer.Evidence{
			{"service": analyzer.Text("edge"), "attempts": analyzer.Int(3)},
			{"service": analyzer.Text("api"), "attempts": analyzer.Int(3), "nested": analyzer.Records([]analyzer.Evidence{{"x": analyzer.Floats([]float64{0.5})}})},
			nil,
		}), []map[string]any{
			{"service": "edge", "attempts": 3},
			{"service": "api", "attempts": 3, "nested": []map[string]any{{"x": []float64{0.5}}}},
			nil,
		}},
		{"records nil", analyzer.Records(nil), []map[string]any(nil)},
		{"records of nulls", analyzer.Records([]analyzer.Evidence{nil, nil}), []map[string]any{nil, nil}},
	}
}

// TestEvidenceJSONAsPlainValues: a Value writes the bytes encoding/json writes for the Go value it
// stands for, with and without HTML escaping, alone and as part of a finding.
func TestEvidenceJSONAsPlainValues(t *testing.T) {
	for _, c := range evidenceCases() {
		for _, html := range []bool{true, false} {
			got, want := encode(t, c.v, html), encode(t, c.plain, html)
			if !bytes.Equal(got, want) {
				t.Errorf("%s (html %v): %s, encoding/json writes %s", c.name, html, got, want)
			}
			f := analyzer.Finding{Detector: "d", Summary: "s", Evidence: analyzer.Evidence{"v": c.v, "a": analyzer.Int(1)}}
			type plainFinding struct {
				Detector string         `json:"detector"`
				Severity string         `json:"severity"`
				Summary  string         `json:"summary"`
				Evidence map[string]any `json:"evidence,omitempty"`
			}
			p := plainFinding{Detector: "d", Severity: "info", Summary: "s", Evidence: map[string]any{"v": c.plain, "a": 1}}
			if got, want := encode(t, f, html), encode(t, p, html); !bytes.Equal(got, want) {
				t.Errorf("%s in a finding (html %v):\n got %s\nwant %s", c.name, html, got, want)
			}
		}
	}
	if got := encode(t, analyzer.Finding{Summary: "s"}, false); bytes.Contains(got, []byte("evidence")) {
		t.Errorf("a finding without evidence writes it: %s", got)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		if _, err := json.Marshal(analyzer.Evidence{"x": analyzer.Floats([]float64{bad})}); err == nil {
			t.Errorf("%v has no JSON form, but marshalled", bad)
		}
	}
}

func encode(t *testing.T, v any, html bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("%#v: %v", v, err)
	}
	return buf.Bytes()
}

// TestEvidenceJSONRoundTrip: every kind reads back as what it was, but for what JSON cannot say:
// a Float without a fraction reads back as an Int, invalid UTF-8 as U+FFFD, a nil list or
// record as the zero Value, an empty list as an empty Texts.
func TestEvidenceJSONRoundTrip(t *testing.T) {
	for _, c := range evidenceCases() {
		data, err := json.Marshal(analyzer.Evidence{"v": c.v})
		if err != nil {
			t.Fatal(err)
		}
		var back analyzer.Evidence
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %s: %v", c.name, data, err)
		}
		want := c.v
		switch c.name {
		case "float integral", "float negative zero":
			want = analyzer.Int(0)
			if c.name == "float integral" {
				want = analyzer.Int(5)
			}
		case "float huge":
			want = analyzer.Float(1e21) // beyond int64: stays a float
		case "text invalid utf-8":
			want = analyzer.Text("a\ufffdb\ufffd")
		case "texts nil", "ints nil", "record nil", "records nil":
			want = analyzer.Value{}
		case "floats":
			want = analyzer.Floats([]float64{0, 1.5, 2})
		case "counts":
			want = analyzer.Record(analyzer.Evidence{"503": analyzer.Int(54), "200": analyzer.Int(2)})
		}
		if got := back["v"]; !got.Equal(want) {
			t.Errorf("%s: %s read back as %s %v, want %s %v", c.name, data, got.Kind(), got, want.Kind(), want)
		}
		again, err := json.Marshal(back)
		if rewritten := strings.HasPrefix(c.name, "text invalid") || c.name == "float negative zero"; err != nil || !bytes.Equal(again, data) && !rewritten {
			t.Errorf("%s: written again as %s (%v), first %s", c.name, again, err, data)
		}
	}
	var v analyzer.Value
	for _, bad := range []string{`[1, "x"]`, `[[1]]`, `["x", 1]`, `[{}, 1]`, `[true]`, `["x", null]`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s is no evidence, read as %v", bad, v)
		}
	}
	if err := json.Unmarshal([]byte(`[1, 2.5]`), &v); err != nil || !v.Equal(analyzer.Floats([]float64{1, 2.5})) {
		t.Errorf("whole and fractional numbers: %v %v", v, err)
	}
}

// TestEvidenceAccessors: each accessor answers for its kind only; Number reads both numbers.
func TestEvidenceAccessors(t *testing.T) {
	if n, ok := analyzer.Int(3).Int(); !ok || n != 3 {
		t.Errorf("Int: %d %v", n, ok)
	}
	if _, ok := analyzer.Float(3).Int(); ok {
		t.Error("a Float is no Int")
	}
	if _, ok := analyzer.Text("3").Float(); ok {
		t.Error("a Text is no Float")
	}
	for _, v := range []analyzer.Value{analyzer.Int(3), analyzer.Float(3)} {
		if f, ok := v.Number(); !ok || f != 3 {
			t.Errorf("Number of %s: %v %v", v.Kind(), f, ok)
		}
	}
	if _, ok := analyzer.Texts([]string{"3"}).Number(); ok {
		t.Error("a list is no number")
	}
	if b, ok := analyzer.Bool(true).Bool(); !ok || !b {
		t.Errorf("Bool: %v %v", b, ok)
	}
	if b, ok := analyzer.Int(1).Bool(); ok || b {
		t.Errorf("an Int is no Bool: %v %v", b, ok)
	}
	if r, ok := analyzer.Counts(map[string]int{"200": 2}).Record(); !ok || !r["200"].Equal(analyzer.Int(2)) {
		t.Errorf("Counts: %v %v", r, ok)
	}
	for v, want := range map[*analyzer.Value]string{
		{}: "-", ptr(analyzer.Float(0.5)): "0.5", ptr(analyzer.Bool(false)): "false",
		ptr(analyzer.Texts([]string{"a", "b"})): "a, b", ptr(analyzer.Floats([]float64{1, 0.5})): "1, 0.5",
		ptr(analyzer.Record(analyzer.Evidence{"b": analyzer.Text("x"), "a": analyzer.Int(1)})): "a: 1, b: x",
		ptr(analyzer.Records([]analyzer.Evidence{{"x": analyzer.Int(1)}})):                     "(x=1)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%s: %q, want %q", v.Kind(), got, want)
		}
	}
}

func ptr(v analyzer.Value) *analyzer.Value { return &v }

// TestFindingCloneOwnsItsMemory: after Clone, changing what the original was made of - its
// slices, its records, the bytes its strings were read from - leaves the clone as it was.
func TestFindingCloneOwnsItsMemory(t *testing.T) {
	buf := []byte("edge http://dep:8080 attempt 1234abcd")
	view := func(from, to int) string { return unsafe.String(&buf[from], to-from) } // as spans are read
	ids := []string{view(29, 37)}
	targets := []string{view(5, 20), "b"}
	pauses := []float64{0.5, 1}
	counts := []int{1, 2}
	layer := analyzer.Evidence{"service": analyzer.Text(view(0, 4)), "attempts": analyzer.Int(3)}
	layers := []analyzer.Evidence{layer}
	inner := analyzer.Evidence{view(0, 4): analyzer.Int(2)}
	f := analyzer.Finding{Detector: "d", TraceID: "t", SpanIDs: ids, Service: view(0, 4), Dependency: view(5, 20),
		Summary: view(21, 28) + " failed", Action: "act",
		Evidence: analyzer.Evidence{"targets": analyzer.Texts(targets), "pauses": analyzer.Floats(pauses),
			"counts": analyzer.Ints(counts), "layers": analyzer.Records(layers), "by": analyzer.Record(inner),
			"name": analyzer.Text(view(0, 4)), view(21, 28): analyzer.Int(1)}}
	want := func() string {
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	before := want()
	c := f.Clone()
	if got := mustJSON(t, c); got != before {
		t.Fatalf("clone differs from the original:\n%s\n%s", got, before)
	}

	copy(buf, "XXXX YYYYYYYYYYYYYYY ZZZZZZZ QQQQQQQQ")
	ids[0] = "changed"
	targets[1] = "changed"
	pauses[0] = 99
	counts[0] = 99
	layer["attempts"] = analyzer.Int(99)
	layers[0] = nil
	inner["extra"] = analyzer.Int(1)
	f.Evidence["name"] = analyzer.Text("changed")
	if want() == before {
		t.Fatal("the original did not change: the test changes nothing")
	}
	if got := mustJSON(t, c); got != before {
		t.Errorf("the clone changed with the original:\n got %s\nwant %s", got, before)
	}
	if c.Service != "edge" || c.Evidence["name"].String() != "edge" {
		t.Errorf("service %q name %v", c.Service, c.Evidence["name"])
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// BenchmarkFindingClone is the copy Pass.Report makes of a retry-amplification finding.
func BenchmarkFindingClone(b *testing.B) {
	f := analyzer.Finding{Detector: "retry-amplification", TraceID: "0123456789abcdef0123456789abcdef",
		SpanIDs: []string{"0123456789abcdef", "0123456789abcdef", "0123456789abcdef"}, Service: "edge",
		Dependency: "http://dep:8080", Summary: "3 layers retried (edge x3, api x3, adapter x3): 27 calls to dep (http://dep:8080) for 1 request",
		Action: "let one layer own retries", Evidence: analyzer.Evidence{"factor": analyzer.Int(27), "leaf_calls": analyzer.Int(27),
			"layers": analyzer.Records([]analyzer.Evidence{
				{"service": analyzer.Text("edge"), "attempts": analyzer.Int(3)},
				{"service": analyzer.Text("api"), "attempts": analyzer.Int(3)},
				{"service": analyzer.Text("adapter"), "attempts": analyzer.Int(3)}})}}
	b.ReportAllocs()
	for b.Loop() {
		_ = f.Clone()
	}
}
