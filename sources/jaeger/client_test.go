package jaeger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/internal/deadaddr"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile/foreigntest"
)

// oneTrace is a trace of two spans as the v1 API would answer it.
func oneTrace() []byte {
	tid := spans.TraceID{15: 1}
	res := &spans.Resource{ServiceName: "edge"}
	return foreigntest.Jaeger([]spans.Span{
		{TraceID: tid, SpanID: spans.SpanID{7: 1}, Name: "GET /", Kind: spans.KindServer, StartUnixNano: 1e15, EndUnixNano: 1e15 + 1e6, Resource: res},
		{TraceID: tid, SpanID: spans.SpanID{7: 2}, ParentID: spans.SpanID{7: 1}, Name: "GET", Kind: spans.KindClient, StartUnixNano: 1e15, EndUnixNano: 1e15 + 1e5, Resource: res},
	})
}

var window = Query{Service: "edge", Start: time.Unix(1000, 0), End: time.Unix(2000, 0)}

// recordSleeps is a Config.Sleep that waits for nothing and keeps the pauses asked for.
func recordSleeps(pauses *[]time.Duration) func(context.Context, time.Duration) error {
	return func(_ context.Context, d time.Duration) error {
		*pauses = append(*pauses, d)
		return nil
	}
}

// TestFallsBackToV1: a Jaeger without the OTLP query API (404 with no Jaeger error body) is asked
// through /api/traces, and keeps being asked there; the v1 answer's parameters are as Jaeger reads
// them (microseconds).
func TestFallsBackToV1(t *testing.T) {
	var v3, v1 atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jaeger/api/v3/traces":
			v3.Add(1)
			http.NotFound(w, r)
		case "/jaeger/api/traces":
			v1.Add(1)
			q := r.URL.Query()
			if q.Get("service") != "edge" || q.Get("start") != "1000000000" || q.Get("end") != "2000000000" || q.Get("limit") != "20" {
				t.Errorf("v1 query %s", r.URL.RawQuery)
			}
			w.Write(oneTrace())
		default:
			t.Errorf("unexpected %s", r.URL.Path)
		}
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL + "/jaeger/"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		traces, _, err := c.FindTraces(context.Background(), window)
		if err != nil || len(traces) != 1 || len(traces[0].Spans) != 2 {
			t.Fatalf("traces %v err %v", traces, err)
		}
	}
	if v3.Load() != 1 || v1.Load() != 2 || c.API() != APIv1 {
		t.Errorf("v3 asked %d times, v1 %d, API %q: want v3 once, then v1", v3.Load(), v1.Load(), c.API())
	}
	if got := c.TraceURL("abc"); got != srv.URL+"/jaeger/trace/abc" {
		t.Errorf("TraceURL %s", got)
	}
}

// TestV3NothingFound: Jaeger's OTLP query API answers an empty search with 404 and its error
// body; that is no traces, not a missing API.
func TestV3NothingFound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v3/traces" {
			t.Errorf("asked %s", r.URL.Path)
		}
		q := r.URL.Query()
		if q.Get("query.service_name") != "edge" || q.Get("query.num_traces") != "20" || q.Get("query.start_time_min") != "1970-01-01T00:16:40Z" {
			t.Errorf("v3 query %s", r.URL.RawQuery)
		}
		http.Error(w, `{"error":{"httpCode":404,"message":"No traces found"}}`, http.StatusNotFound)
	}))
	defer srv.Close()
	c, _ := New(Config{URL: srv.URL})
	traces, _, err := c.FindTraces(context.Background(), window)
	if err != nil || len(traces) != 0 || c.API() != APIv3 {
		t.Errorf("traces %d err %v api %q", len(traces), err, c.API())
	}
}

// TestRetriesWithBackoff: 503s are retried with jittered pauses that grow and stay under the
// ceiling; Retry-After is honoured up to it; after Attempts the error says how many failed.
func TestRetriesWithBackoff(t *testing.T) {
	var calls atomic.Int32
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case down.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case n == 2:
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.Write(oneTrace())
		}
	}))
	defer srv.Close()
	var pauses []time.Duration
	c, _ := New(Config{URL: srv.URL, API: APIv1, Attempts: 3, Backoff: time.Second, MaxBackoff: 10 * time.Second,
		Rand: func() float64 { return 0.5 }, Sleep: recordSleeps(&pauses)})
	traces, _, err := c.FindTraces(context.Background(), window)
	if err != nil || len(traces) != 1 {
		t.Fatalf("traces %d err %v", len(traces), err)
	}
	if len(pauses) != 2 || pauses[0] != 500*time.Millisecond || pauses[1] != 10*time.Second {
		t.Errorf("pauses %v: want half of the 1s ceiling, then Retry-After capped at 10s", pauses)
	}

	down.Store(true) // every answer a 503 from now on
	pauses = nil
	_, _, err = c.FindTraces(context.Background(), window)
	if err == nil || !strings.Contains(err.Error(), "3 attempts failed") || !strings.Contains(err.Error(), "503") {
		t.Errorf("err = %v", err)
	}
	if len(pauses) != 2 || pauses[1] != time.Second {
		t.Errorf("pauses %v: want 2, the second half of a 2s ceiling", pauses)
	}
}

// TestAuth: the token or the basic credentials are sent; a 401 is not retried and says what to
// check, without echoing the secret.
func TestAuth(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		u, p, ok := r.BasicAuth()
		if r.Header.Get("Authorization") == "Bearer s3cret" || ok && u == "oncall" && p == "pw" {
			w.Write(oneTrace())
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	for _, cfg := range []Config{{Token: "s3cret"}, {Username: "oncall", Password: "pw"}} {
		cfg.URL, cfg.API = srv.URL, APIv1
		c, _ := New(cfg)
		if _, _, err := c.FindTraces(context.Background(), window); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	calls.Store(0)
	c, _ := New(Config{URL: srv.URL, API: APIv1, Token: "wrong-token"})
	_, _, err := c.FindTraces(context.Background(), window)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 401 || !strings.Contains(err.Error(), "check the token") || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("err = %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("a 401 was tried %d times", calls.Load())
	}
	if _, err := New(Config{URL: srv.URL, Token: "t", Username: "u"}); err == nil {
		t.Error("token and basic auth together accepted")
	}
}

// TestTLS: an https Jaeger is verified against the CA given, and refused without it.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(oneTrace()) }))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c, _ := New(Config{URL: srv.URL, API: APIv1, TLS: &tls.Config{RootCAs: pool}})
	if _, _, err := c.FindTraces(context.Background(), window); err != nil {
		t.Errorf("with the CA: %v", err)
	}
	c, _ = New(Config{URL: srv.URL, API: APIv1, Attempts: 1})
	if _, _, err := c.FindTraces(context.Background(), window); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v", err)
	}
}

// TestBadAnswers: what a Jaeger (or something else at its address) can answer wrongly fails with
// a message that says what came back.
func TestBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
		status           int
		max              int64
	}{
		{"not json", "<html>login</html>", "invalid JSON on line 1", 200, 0},
		{"cut short", string(oneTrace()[:50]), "the JSON ends in the middle", 200, 0},
		{"server error", "storage down", "500: storage down", 500, 0},
		{"too large", string(oneTrace()), "is over 100 bytes", 200, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			cl, _ := New(Config{URL: srv.URL, API: APIv1, MaxResponseBytes: c.max})
			_, _, err := cl.FindTraces(context.Background(), window)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := New(Config{URL: "jaeger:16686"}); err == nil || !strings.Contains(err.Error(), "want http(s)://host:port") {
		t.Errorf("bad URL: %v", err)
	}
}

// TestUnreachableSaysWhereNotTheQuery: a Jaeger that refuses connections is named by its address
// and path; the search's parameters (timestamps, service) are noise in that message, and so is
// counting one attempt.
func TestUnreachableSaysWhereNotTheQuery(t *testing.T) {
	addr := deadaddr.Loopback(t)
	c, err := New(Config{URL: "http://" + addr, API: APIv3, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.FindTraces(context.Background(), window)
	if err == nil {
		t.Fatal("a closed port answered")
	}
	msg := err.Error()
	if !strings.Contains(msg, "GET /api/v3/traces at "+addr) || !strings.Contains(msg, "connection refused") {
		t.Errorf("error %q: want the path, the address and the cause", msg)
	}
	if strings.Contains(msg, "query.") || strings.Contains(msg, "start_time") || strings.Contains(msg, "attempts") {
		t.Errorf("error %q repeats the query string", msg)
	}
}
