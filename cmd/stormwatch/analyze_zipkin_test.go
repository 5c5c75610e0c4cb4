package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openzipkin/zipkin-go"
	"github.com/openzipkin/zipkin-go/model"
	zipkinhttp "github.com/openzipkin/zipkin-go/reporter/http"
)

// TestAnalyzeZipkinGoSharedSpans records a retried call with zipkin-go, Zipkin's own Go tracer,
// through its HTTP reporter to a loopback server, and analyzes exactly what it posted. zipkin-go
// joins the callee's SERVER span to the caller's CLIENT span (B3 shared spans, one id for both),
// so only the split into two spans lets the analyzer see three attempts that each reached the
// callee: three physical calls for one logical operation, the last one a success.
func TestAnalyzeZipkinGoSharedSpans(t *testing.T) {
	var mu sync.Mutex
	var posted []json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []json.RawMessage
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/v2/spans" || json.Unmarshal(body, &batch) != nil {
			t.Errorf("reporter posted %s %s: %.200s", r.Method, r.URL.Path, body)
		}
		mu.Lock()
		posted = append(posted, batch...)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	rep := zipkinhttp.NewReporter(srv.URL+"/api/v2/spans", zipkinhttp.BatchSize(1000))
	tracer := func(service string) *zipkin.Tracer {
		ep, err := zipkin.NewEndpoint(service, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := zipkin.NewTracer(rep, zipkin.WithLocalEndpoint(ep), zipkin.WithSampler(zipkin.AlwaysSample))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	checkout, inventory := tracer("checkout"), tracer("inventory")
	t0 := time.Unix(1_768_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	root := checkout.StartSpan("GET /checkout", zipkin.Kind(model.Server), zipkin.StartTime(ms(0)))
	for i, status := range []string{"503", "503", "200"} {
		start := 100 * i
		call := checkout.StartSpan("GET", zipkin.Kind(model.Client), zipkin.Parent(root.Context()), zipkin.StartTime(ms(start+10)))
		call.Tag("http.request.method", "GET")
		call.Tag("server.address", "inventory")
		call.Tag("server.port", "8080")
		call.Tag("url.full", "http://inventory:8080/items")
		call.Tag("http.response.status_code", status)
		served := inventory.StartSpan("GET /items", zipkin.Kind(model.Server), zipkin.Parent(call.Context()), zipkin.StartTime(ms(start+12)))
		if served.Context().ID != call.Context().ID {
			t.Fatalf("zipkin-go did not share the span id between client and server: the test needs it")
		}
		served.Tag("http.route", "/items")
		served.Tag("http.response.status_code", status)
		served.FinishedWithDuration(30 * time.Millisecond)
		call.FinishedWithDuration(35 * time.Millisecond)
	}
	root.FinishedWithDuration(400 * time.Millisecond)
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	doc, _ := json.Marshal(posted)
	mu.Unlock()
	path := filepath.Join(t.TempDir(), "zipkin-go.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}

	rep2 := analyzeReport(t, path)
	if rep2.Input.Spans != 7 || rep2.Input.Traces != 1 {
		t.Fatalf("input %+v, want 7 spans (1 root, 3 client and 3 server halves) in 1 trace; posted:\n%s", rep2.Input, doc)
	}
	var found bool
	for _, d := range rep2.Dependencies {
		if d.Dependency == "inventory" {
			found = true
			if d.Service != "inventory" || d.PhysicalCalls != 3 || d.LogicalOperations != 1 || d.Outcomes["503"] != 2 || d.Outcomes["200"] != 1 {
				t.Errorf("inventory: %s, want service inventory, 3 physical calls for 1 logical operation, 2x503 and 1x200", mustJSON(d))
			}
		}
	}
	if !found {
		t.Errorf("no dependency inventory in %s", mustJSON(rep2.Dependencies))
	}
}
