package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/reference/lab"
	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestLabPrintsTheSeedTable(t *testing.T) {
	code, out, errOut := runCLI(t, "", "lab", "budget")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"== budget:",
		"retry=3                            origin saw 120 (3.00x)  ok=0  503=40",
		"retry=3, budget_ratio=0.1          origin saw  50 (1.25x)  ok=0  503=40  budget refused 40",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestLabAllScenariosByDefault(t *testing.T) {
	code, out, errOut := runCLI(t, "", "lab")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, s := range []string{"retry-cost", "deadline", "budget", "breaker-waves", "breaker-key", "breaker-signals",
		"breaker-logical", "breaker-probe", "layers", "fanout", "post-deadline", "fallback-retry", "unsafe-write"} {
		if !strings.Contains(out, "== "+s+":") {
			t.Errorf("scenario %s missing", s)
		}
	}
	if !strings.Contains(out, " 0.01 s  refused, probe in 0.50s") || !strings.Contains(out, "slowest caller 1.00s") {
		t.Errorf("seed figures missing:\n%s", out)
	}
}

func TestLabJSON(t *testing.T) {
	code, out, _ := runCLI(t, "", "lab", "breaker-signals", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d rows:\n%s", len(lines), out)
	}
	var r struct {
		Scenario string         `json:"scenario"`
		Variant  string         `json:"variant"`
		Outcomes map[string]int `json:"outcomes"`
		Refusals struct {
			Breaker int `json:"breaker"`
		} `json:"refusals"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Scenario != "breaker-signals" || r.Variant != "connection refused" || r.Outcomes["connect error"] != 5 || r.Refusals.Breaker != 5 {
		t.Fatalf("row %+v", r)
	}
}

func TestLabBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "nope"}, `unknown scenario "nope"; known: retry-cost,`},
		{[]string{"lab", "budget", "--record", "x.jsonl", "--otlp", "127.0.0.1:1"}, "none of the others can be"},
		{[]string{"lab", "budget", "--otlp", "no-port"}, `--otlp "no-port": want host:port`},
		{[]string{"lab", "budget", "--record", filepath.Join(t.TempDir(), "missing", "x.jsonl")}, "lab: --record:"},
		{[]string{"lab", "budget", "--seed", "0"}, "--seed must not be 0"},
		{[]string{"lab", "a", "b"}, "accepts at most 1 arg"},
	} {
		code, _, errOut := runCLI(t, "", tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestLabList(t *testing.T) {
	code, out, _ := runCLI(t, "", "lab", "--list")
	if code != 0 || !strings.Contains(out, "breaker-probe") || !strings.Contains(out, "principles: breakers") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestLabRecordThenAnalyze: the recording is a trace file the analyzer reads, and the reference
// client's spans let it name the 27x amplification of three retrying layers.
func TestLabRecordThenAnalyze(t *testing.T) {
	path := filepath.Join(t.TempDir(), "layers.jsonl")
	code, _, errOut := runCLI(t, "", "lab", "layers", "--record", path)
	if code != 0 || !strings.Contains(errOut, "spans written to "+path) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("recording: %v", err)
	}
	code, out, errOut := runCLI(t, "", "analyze", "--format", "json", path)
	if code != 1 {
		t.Fatalf("analyze exit %d (want 1: a critical finding): %s", code, errOut)
	}
	var rep struct {
		Findings []struct {
			Detector string         `json:"detector"`
			Evidence map[string]any `json:"evidence"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Detector == "retry-amplification" && f.Evidence["factor"] == 27.0 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no 27x retry-amplification finding in %s", out)
	}
}

// TestLabDefectsAreFound: each defect the lab builds on purpose is found by the analyzer in the
// recording, beside its correction.
func TestLabDefectsAreFound(t *testing.T) {
	for scenario, detector := range map[string]string{
		"breaker-key":     "breaker-wrong-key",
		"breaker-logical": "breaker-counts-attempts",
		"fanout":          "unbounded-fanout",
		"post-deadline":   "post-deadline-work",
		"fallback-retry":  "hidden-fallback-retry",
		"unsafe-write":    "unsafe-write-retry",
	} {
		path := filepath.Join(t.TempDir(), scenario+".jsonl")
		if code, _, errOut := runCLI(t, "", "lab", scenario, "--record", path); code != 0 {
			t.Fatalf("%s: exit %d: %s", scenario, code, errOut)
		}
		_, out, errOut := runCLI(t, "", "analyze", "--format", "json", "--fail-on", "critical", path)
		var rep struct {
			Findings []struct {
				Detector string `json:"detector"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v (%s)", scenario, err, errOut)
		}
		found := false
		for _, f := range rep.Findings {
			found = found || f.Detector == detector
		}
		if !found {
			t.Errorf("%s: no %s finding in %s", scenario, detector, out)
		}
	}
}

// TestLabOTLP sends a run's spans over real OTLP/gRPC to the real collector on loopback.
func TestLabOTLP(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	sink := spans.ConsumerFunc(func(_ context.Context, b *spans.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range b.Spans {
			got[s.Kind.String()]++
		}
		return nil
	})
	c, err := collector.New(collector.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: collector.Disabled}, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(context.Background())
	code, _, errOut := runCLI(t, "", "lab", "breaker-probe", "--otlp", c.GRPCAddr())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The command returns once its exporter's last request was accepted; Shutdown drains what the
	// collector accepted into the sink, so the counts are final after it.
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// 6 calls: 5 reached the origin (5 CLIENT + 5 SERVER spans), 6 operations.
	if got["CLIENT"] != 5 || got["SERVER"] != 5 || got["INTERNAL"] != 6 {
		t.Fatalf("collector received %v", got)
	}
}

// TestLabStopsOnSignal: SIGINT/SIGTERM cancel run's context (signal.NotifyContext in main). A
// wall-clock post-deadline run, whose origin works 2 s for a caller that leaves after 1 s, must
// return promptly with a clear message and exit 130, not finish its tables or hang. The bound is
// generous: this checks that the run stops, not how fast.
func TestLabStopsOnSignal(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "post-deadline", "--realtime"},
		{"lab", "deadline", "--realtime", "--record", filepath.Join(t.TempDir(), "d.jsonl")},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb bytes.Buffer
		done := make(chan error, 1)
		serving := originServing(t)
		go func() { done <- run(ctx, args, strings.NewReader(""), &out, &errb) }()
		// Cancel while the first caller waits on its origin, as a signal would arrive mid-run.
		select {
		case <-serving:
		case err := <-done:
			t.Fatalf("%v: returned before any origin served a request: %v", args, err)
		}
		cancel()
		select {
		case err := <-done:
			code := exitCode(err, &errb)
			if code != 130 || !strings.Contains(errb.String(), "lab: interrupted during "+args[1]+": origins and clients stopped") {
				t.Errorf("%v: exit %d, stderr %q; want 130 and the interruption", args, code, errb.String())
			}
			if strings.Contains(out.String(), "origin saw") {
				t.Errorf("%v: printed the figures of a cancelled run:\n%s", args, out.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still running 10 s after its context was cancelled", args)
		}
	}
}

// originServing makes the lab runs of the test report, on the returned channel, the first time an
// origin starts serving a request (its SERVER span starts): from then on a caller is waiting on it.
// Spans are still recorded as the command's flags ask.
func originServing(t *testing.T) <-chan struct{} {
	serving := make(chan struct{})
	var once sync.Once
	orig := runScenario
	t.Cleanup(func() { runScenario = orig })
	runScenario = func(ctx context.Context, name string, opts lab.Options) (*lab.Result, error) {
		inner := opts.TracerProvider
		opts.TracerProvider = func(service string) trace.TracerProvider {
			var tp trace.TracerProvider = noop.NewTracerProvider()
			if inner != nil {
				tp = inner(service)
			}
			return watchedProvider{tp, func() { once.Do(func() { close(serving) }) }}
		}
		return orig(ctx, name, opts)
	}
	return serving
}

type watchedProvider struct {
	trace.TracerProvider
	server func()
}

func (p watchedProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return watchedTracer{p.TracerProvider.Tracer(name, opts...), p.server}
}

type watchedTracer struct {
	trace.Tracer
	server func()
}

func (t watchedTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if cfg := trace.NewSpanStartConfig(opts...); cfg.SpanKind() == trace.SpanKindServer {
		t.server()
	}
	return t.Tracer.Start(ctx, name, opts...)
}
