package collector

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// An SDK configured with OTEL_EXPORTER_OTLP_ENDPOINT exports traces, metrics and logs to the same
// place. stormwatch analyzes traces only, but answering the other two with 404 / UNIMPLEMENTED makes
// the application log an export error on every interval and retry it. So metrics and logs are
// received on both transports, counted (requests per signal and transport) and dropped, and the
// status line says so.

// signal is an OTLP signal the collector receives and ignores.
type signal uint8

const (
	signalMetrics signal = iota
	signalLogs
	numSignals
)

var signalNames = [numSignals]string{"metrics", "logs"}

func (s signal) String() string { return signalNames[s] }

const (
	metricsSignalPath = "/v1/metrics"
	logsSignalPath    = "/v1/logs"
)

// IgnoredSignalsNote is the sentence every screen uses to say what happens to metrics and logs.
const IgnoredSignalsNote = "metrics and logs are received and ignored"

// ignoredMetrics counts the requests of the ignored signals.
type ignoredMetrics struct {
	requests [numSignals][numTransports]prometheus.Counter
	total    [numSignals]atomic.Int64
}

func newIgnoredMetrics(reg prometheus.Registerer) *ignoredMetrics {
	m := &ignoredMetrics{}
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "stormwatch", Subsystem: "collector", Name: "ignored_requests_total",
		Help: "OTLP export requests of signals stormwatch does not analyze (metrics, logs): answered with success and dropped, by signal and transport.",
	}, []string{"signal", "transport"})
	for s := range numSignals {
		for t := range numTransports {
			m.requests[s][t] = vec.WithLabelValues(s.String(), t.String())
		}
	}
	reg.MustRegister(vec)
	return m
}

func (m *ignoredMetrics) count(s signal, t transport) {
	m.requests[s][t].Inc()
	m.total[s].Add(1)
}

// ignoredSignalServices are MetricsService and LogsService with handlers that read the request as
// bytes (rawCodec, as for traces), so nothing is decoded, and answer with the empty response.
func ignoredSignalServices(c *Collector) []grpc.ServiceDesc {
	desc := func(s signal, sd grpc.ServiceDesc, resp func() any) grpc.ServiceDesc {
		return grpc.ServiceDesc{
			ServiceName: sd.ServiceName,
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{
				MethodName: sd.Methods[0].MethodName,
				Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
					var raw rawRequest
					if err := dec(&raw); err != nil {
						return nil, grpcStatus(fmt.Errorf("%w: read %s request: %v", ErrMalformed, s, err), c.cfg.RetryAfter)
					}
					if raw.buf != nil { // nil: a compressed body, not the pool's (gzipPassthrough)
						c.bodies.Put(raw.buf)
					}
					c.ignored.count(s, transportGRPC)
					return resp(), nil
				},
			}},
			Metadata: sd.Metadata,
		}
	}
	return []grpc.ServiceDesc{
		desc(signalMetrics, colmetricspb.MetricsService_ServiceDesc, func() any { return &colmetricspb.ExportMetricsServiceResponse{} }),
		desc(signalLogs, collogspb.LogsService_ServiceDesc, func() any { return &collogspb.ExportLogsServiceResponse{} }),
	}
}

// ignoredSignalHandler answers POST /v1/metrics or /v1/logs as an OTLP/HTTP receiver would, after
// the same checks and limits as traces, and drops the body.
func (h *httpHandler) ignoredSignalHandler(s signal, path string, resp proto.Message) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := h.c
		enc := requestEncoding(r)
		err := func() error {
			if r.Method != http.MethodPost {
				return fmt.Errorf("%w: %s %s (use POST)", ErrMethodNotAllowed, r.Method, path)
			}
			if err := c.authorize(r.Header.Get("Authorization")); err != nil {
				return err
			}
			if enc == encUnknown {
				return fmt.Errorf("%w: Content-Type %q (send %s or %s)",
					ErrUnsupportedMediaType, r.Header.Get("Content-Type"), contentTypeProto, contentTypeJSON)
			}
			_, buf, err := h.readBody(w, r)
			if err != nil {
				return err
			}
			if buf != nil {
				c.bodies.Put(buf)
			}
			return nil
		}()
		if err != nil {
			writeHTTPError(w, err, enc, c.cfg.RetryAfter)
			return
		}
		c.ignored.count(s, transportHTTP)
		writeHTTPMessage(w, http.StatusOK, resp, enc)
	})
}

// mountIgnoredSignals routes the metrics and logs paths to h.
func (h *httpHandler) mountIgnoredSignals(mux *http.ServeMux) {
	mux.Handle(metricsSignalPath, h.ignoredSignalHandler(signalMetrics, metricsSignalPath, &colmetricspb.ExportMetricsServiceResponse{}))
	mux.Handle(logsSignalPath, h.ignoredSignalHandler(signalLogs, logsSignalPath, &collogspb.ExportLogsServiceResponse{}))
}

// ignoredStats fills the Stats fields of the ignored signals.
func (m *ignoredMetrics) stats(s *Stats) {
	s.IgnoredMetricsRequests = m.total[signalMetrics].Load()
	s.IgnoredLogsRequests = m.total[signalLogs].Load()
}
