package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
)

func costly() *analyzer.Report {
	r := sample()
	r.Costs = []analyzer.CostEntry{
		{Kind: analyzer.CostEntryPoint, Service: "edge", Name: "GET /items/{id}", Requests: 2, RequestsPerSecond: 14.11,
			RetryShare: 0.964, AddedLatencyMs: analyzer.LatencySummary{P50: 402, P99: 402, Total: 804}, ExtraCalls: 72,
			ExtraCallsPerSecond: 508.12, LateWorkSeconds: 0.15, Seconds: 1.417, Sampling: analyzer.SamplingKnown},
		{Kind: analyzer.CostDependency, Dependency: "http://api:8080", Requests: 2, RequestsPerSecond: 14.11, RetryShare: 0.695,
			AddedLatencyMs: analyzer.LatencySummary{P50: 290, P99: 290, Total: 580}, ExtraCalls: 4, ExtraCallsPerSecond: 28.2,
			Seconds: 1.417, Sampling: analyzer.SamplingKnown},
	}
	return r
}

func TestTextSaysWhatRetriesCost(t *testing.T) {
	var buf bytes.Buffer
	if err := Text(&buf, costly()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"What retries cost (most added latency first; rates over 1.42s):",
		"entry point  requests  req/s  retry share  added p50  added p99  added total  extra calls  extra calls/s  late work",
		"edge GET /items/{id}         2  14.11        96.4%      402ms      402ms        804ms           72         508.12      150ms",
		"http://api:8080         2  14.11        69.5%      290ms      290ms        580ms            4          28.20          0",
		"added = the time requests waited in failed attempts that were retried",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sampled") {
		t.Errorf("every request's sampling is known, yet the text qualifies the rates:\n%s", out)
	}
	// A report whose spans do not say how they were sampled says so beside the rates.
	r := costly()
	r.Costs[0].Sampling, r.Costs[1].Sampling = analyzer.SamplingUnknown, analyzer.SamplingUnknown
	buf.Reset()
	if err := Text(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "rates are as recorded: the spans do not say how they were sampled") {
		t.Errorf("unknown sampling is not said:\n%s", buf.String())
	}
	// Costs all zero: one line, no table of zeros.
	r = costly()
	for i := range r.Costs {
		r.Costs[i] = analyzer.CostEntry{Kind: r.Costs[i].Kind, Service: "edge", Dependency: "http://api:8080", Requests: 2}
	}
	buf.Reset()
	if err := Text(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "What retries cost: nothing (no request waited on a retry") || strings.Contains(buf.String(), "added p50") {
		t.Errorf("a report where retries cost nothing shows a table:\n%s", buf.String())
	}
	// No costs, no section.
	buf.Reset()
	if err := Text(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "What retries cost") {
		t.Errorf("a report without costs shows the section:\n%s", buf.String())
	}
}

func TestMarkdownCostTable(t *testing.T) {
	r := costly()
	for i := range 12 {
		r.Costs = append(r.Costs, analyzer.CostEntry{Kind: analyzer.CostDependency, Dependency: fmt.Sprintf("http://d%02d|x:80", i),
			Sampling: analyzer.SamplingPartly})
	}
	var buf bytes.Buffer
	if err := Markdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"### What retries cost",
		"| edge GET /items/{id} | 2 | 14.11 | 96.4% | 402ms | 402ms | 804ms | 72 | 508.12 | 150ms |",
		"| `http://api:8080` | 2 | 14.11 | 69.5% | 290ms | 290ms | 580ms | 4 | 28.20 | 0 |",
		"`http://d00\\|x:80`",
		"3 more in the JSON report.",
		"rates scale the requests whose spans say how they were sampled",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "d09") {
		t.Errorf("markdown lists more than %d dependencies:\n%s", costRows, out)
	}
}

func TestMs(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 0.25: "0.2ms", 3.5: "3.5ms", 402: "402ms", 1882.476: "1.88s"} {
		if got := Ms(in); got != want {
			t.Errorf("Ms(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestDiffShowsCostsBeforeAfter(t *testing.T) {
	before := costly()
	after := costly()
	after.Costs = after.Costs[:1]
	after.Costs[0].AddedLatencyMs = analyzer.LatencySummary{P50: 35, P99: 35, Total: 70}
	r := diff.Compare(diff.Input{Before: before, After: after}, diff.Options{})
	var buf bytes.Buffer
	if err := DiffText(&buf, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"What retries cost (before -> after", "edge GET /items/{id}", "402ms -> 35ms", "http://api:8080", "290ms -> -"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("diff text lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := DiffMarkdown(&buf, &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| edge GET /items/{id} | 96.4% -> 96.4% | 402ms -> 35ms |") {
		t.Errorf("diff markdown lacks the entry point's row:\n%s", buf.String())
	}
}
