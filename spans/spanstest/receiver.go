package spanstest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPHTTPReceiver starts a loopback server that accepts OTLP/HTTP protobuf trace exports, for
// tests that point the SDK's own otlptracehttp exporter at it to learn what a real exporter sends.
// It returns the URL to export to and a function that returns the requests received so far. A
// body that is not an export request fails the test. The server closes when the test ends.
func OTLPHTTPReceiver(t testing.TB) (url string, received func() []*coltracepb.ExportTraceServiceRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if err != nil {
			t.Errorf("OTLP/HTTP receiver: reading the exported request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1/traces", func() []*coltracepb.ExportTraceServiceRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]*coltracepb.ExportTraceServiceRequest(nil), got...)
	}
}
