package collector

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stormwatch/stormwatch/spans"
)

// stubs are n finished spans for calling an SDK exporter's ExportSpans directly, which returns the
// export's error (a TracerProvider would only log it).
func stubs(first, n int) []sdktrace.ReadOnlySpan {
	var ss tracetest.SpanStubs
	for i := first; i < first+n; i++ {
		var tid trace.TraceID
		var sid trace.SpanID
		copy(tid[:], traceID(i))
		copy(sid[:], spanID(i))
		ss = append(ss, tracetest.SpanStub{
			Name:        "GET",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}),
			SpanKind:    trace.SpanKindClient,
			StartTime:   time.Unix(1_700_000_000, 0),
			EndTime:     time.Unix(1_700_000_001, 0),
			Attributes:  []attribute.KeyValue{attribute.Int(spans.AttrAttempt, i)},
		})
	}
	return ss.Snapshots()
}

func TestAuthRejectsMissingAndWrongTokens(t *testing.T) {
	const token = "s3cret-token"
	for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(false)} {
		t.Run(ek.name, func(t *testing.T) {
			s := &sink{}
			c := start(t, Config{Token: token}, s)
			for _, tc := range []struct {
				name    string
				headers map[string]string
				ok      bool
			}{
				{"missing", nil, false},
				{"wrong", map[string]string{"Authorization": "Bearer nope"}, false},
				{"not bearer", map[string]string{"Authorization": "Basic " + token}, false},
				{"prefix of the token", map[string]string{"Authorization": "Bearer s3cret"}, false},
				{"right", map[string]string{"Authorization": "Bearer " + token}, true},
			} {
				exp, err := ek.make(context.Background(), c, tc.headers, nil)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = exp.ExportSpans(ctx, stubs(0, 3))
				cancel()
				if tc.ok != (err == nil) {
					t.Errorf("%s: export error %v, want ok=%v", tc.name, err, tc.ok)
				}
				if err != nil && !strings.Contains(strings.ToLower(err.Error()), "unauthenticated") && !strings.Contains(err.Error(), "401") {
					t.Errorf("%s: error %q does not say unauthenticated", tc.name, err)
				}
				if err != nil && strings.Contains(err.Error(), token) {
					t.Errorf("%s: the error echoes the token: %q", tc.name, err)
				}
			}
			// Refusals are decided before admission, so once the authorized spans are in, the
			// count is final.
			waitFor(t, "authorized spans", func() bool { return s.count() >= 3 })
			if n := s.count(); n != 3 {
				t.Errorf("stored %d spans, want only the authorized 3", n)
			}
			transport := strings.SplitN(ek.name, "/", 2)[0]
			want := `stormwatch_collector_requests_total{outcome="unauthenticated",transport="` + transport + `"} 4`
			if m := scrape(t, c); !strings.Contains(m, want) {
				t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "unauthenticated"))
			}
		})
	}
	t.Run("http 401 answer", func(t *testing.T) {
		c := start(t, Config{Token: token}, &sink{})
		resp := post(t, c, protoBody(t, request(0, 1, 0)), map[string]string{"Content-Type": contentTypeProto})
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})
}

func TestOverloadAnswersRetryableAndTheSDKRetrySucceeds(t *testing.T) {
	for _, ek := range []exporterKind{grpcSDKExporter(false), httpSDKExporter(false)} {
		t.Run(ek.name, func(t *testing.T) {
			s := &sink{gate: make(chan struct{})}
			c := start(t, Config{QueueSize: 1, RetryAfter: 50 * time.Millisecond}, s)
			exp, err := ek.make(context.Background(), c, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The first request is accepted and blocks the consumer; the queue is then full.
			if err := exp.ExportSpans(context.Background(), stubs(0, 2)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- exp.ExportSpans(context.Background(), stubs(2, 3)) }()
			waitFor(t, "an overload answer", func() bool { return c.Stats().RefusedRequests >= 1 })
			select {
			case err := <-done:
				t.Fatalf("the export finished (%v) while the queue was full", err)
			default:
			}
			close(s.gate) // the consumer catches up; the exporter's retry must now get through
			if err := <-done; err != nil {
				t.Fatalf("export after overload: %v", err)
			}
			waitFor(t, "all spans", func() bool { return s.count() >= 5 })
			got := s.spans()
			if len(got) != 5 {
				t.Fatalf("got %d spans, want 5 (each once)", len(got))
			}
			if st := c.Stats(); st.AcceptedSpans != 5 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestOverloadAnswerCarriesRetryHints(t *testing.T) {
	s := &sink{gate: make(chan struct{})}
	defer close(s.gate)
	c := start(t, Config{QueueSize: 1, RetryAfter: 1500 * time.Millisecond}, s)
	body := protoBody(t, request(0, 2, 0))
	if resp := post(t, c, body, map[string]string{"Content-Type": contentTypeProto}); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	waitFor(t, "queue full", func() bool { return c.Stats().QueueDepth == 1 })

	resp := post(t, c, body, map[string]string{"Content-Type": contentTypeProto})
	msg := readStatus(t, resp, encProto)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("HTTP: status %d Retry-After %q, want 429 and 2 (1.5s rounded up)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(msg, "overloaded") || !strings.Contains(msg, "queue full") {
		t.Errorf("HTTP message %q", msg)
	}

	conn := dialGRPC(t, c)
	err := conn.Invoke(context.Background(), coltracepb.TraceService_Export_FullMethodName, request(0, 2, 0), &coltracepb.ExportTraceServiceResponse{})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("gRPC: %v, want RESOURCE_EXHAUSTED", err)
	}
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 1500*time.Millisecond {
		t.Errorf("gRPC RetryInfo delay %v, want 1.5s", delay)
	}
	if st := c.Stats(); st.RejectedSpans != 4 || st.RefusedRequests != 2 {
		t.Errorf("refused spans are counted, not dropped silently: %+v", st)
	}
}

func TestQueueByteBound(t *testing.T) {
	s := &sink{gate: make(chan struct{})}
	defer close(s.gate)
	body := protoBody(t, request(0, 50, 0))
	// Room for two requests' bytes: the first is held by the blocked consumer, the second waits,
	// the third would pass the byte bound although the request-count bound has room.
	c := start(t, Config{QueueSize: 10, MaxQueueBytes: int64(2*len(body) + 10)}, s)
	for i, want := range []int{200, 200, 429} {
		resp := post(t, c, body, map[string]string{"Content-Type": contentTypeProto})
		msg := readStatus(t, resp, encProto)
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d %q, want %d", i, resp.StatusCode, msg, want)
		}
		if want == 429 && !strings.Contains(msg, "bytes") {
			t.Errorf("message %q does not name the byte bound", msg)
		}
	}
}

func TestConsumerErrorsAreCounted(t *testing.T) {
	s := &sink{err: errors.New("disk full")}
	c := start(t, Config{}, s)
	resp := post(t, c, protoBody(t, request(0, 3, 0)), map[string]string{"Content-Type": contentTypeProto})
	resp.Body.Close()
	waitFor(t, "the consumer failure counted", func() bool { return c.Stats().ConsumerFailures == 1 })
	if st := c.Stats(); st.RejectedSpans != 3 {
		t.Errorf("stats %+v: the 3 spans the consumer refused must be counted as rejected", st)
	}
	if m := scrape(t, c); !strings.Contains(m, `stormwatch_collector_rejected_spans_total{reason="consumer"} 3`) {
		t.Errorf("metrics do not show the consumer's refusal:\n%s", grepLines(m, "rejected"))
	}
}

func dialGRPC(t testing.TB, c *Collector, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(c.GRPCAddr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func scrape(t *testing.T, c *Collector) string {
	t.Helper()
	resp, err := http.Get("http://" + c.HTTPAddr() + metricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
