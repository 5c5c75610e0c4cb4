package collector

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// outcomes every request ends in; classify supplies the failure ones. Listed so every series
// exists at zero from the start, which keeps rate() queries and dashboards simple.
var outcomes = []string{
	"accepted", "partial", "malformed", "too_large", "unsupported_media_type", "method_not_allowed",
	"not_found", "unauthenticated", "overloaded", "shutting_down", "internal",
}

// metrics are the collector's Prometheus series, in a registry of its own (no global state), and
// the plain totals the status line reads.
type metrics struct {
	reg *prometheus.Registry

	requests       *prometheus.CounterVec
	receivedSpans  [numTransports]prometheus.Counter
	acceptedReqs   [numTransports]prometheus.Counter
	partialReqs    [numTransports]prometheus.Counter
	duration       [numTransports]prometheus.Observer
	rejectedSpans  *prometheus.CounterVec
	recorded       prometheus.Counter
	recordErrors   prometheus.Counter
	consumerErrors prometheus.Counter

	totalRequests    atomic.Int64
	totalAccepted    atomic.Int64
	totalRejected    atomic.Int64
	totalRefusedReqs atomic.Int64
	totalConsumerErr atomic.Int64
	totalRecordErr   atomic.Int64
}

func newMetrics(c *Collector) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	const ns = "stormwatch"
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "collector", Name: "requests_total",
		Help: "OTLP export requests by transport (grpc, http) and outcome (accepted, partial, or the error class).",
	}, []string{"transport", "outcome"})
	received := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "collector", Name: "received_spans_total",
		Help: "Spans accepted into the ingest queue, by transport.",
	}, []string{"transport"})
	m.rejectedSpans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "collector", Name: "rejected_spans_total",
		Help: "Spans not kept, by reason: invalid (partial success), overloaded, shutting_down, consumer (refused after acceptance).",
	}, []string{"reason"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "collector", Name: "request_duration_seconds",
		Help: "Time to answer an OTLP export request, from the handler's start to the response, by transport.",
		// 50us to ~3s: a healthy export is well under a millisecond, a huge one tens of milliseconds.
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 9),
	}, []string{"transport"})
	for t := range numTransports {
		name := t.String()
		m.receivedSpans[t] = received.WithLabelValues(name)
		m.acceptedReqs[t] = m.requests.WithLabelValues(name, "accepted")
		m.partialReqs[t] = m.requests.WithLabelValues(name, "partial")
		m.duration[t] = dur.WithLabelValues(name)
		for _, o := range outcomes {
			m.requests.WithLabelValues(name, o)
		}
	}
	for _, r := range []string{"invalid", "overloaded", "shutting_down", "consumer"} {
		m.rejectedSpans.WithLabelValues(r)
	}
	m.consumerErrors = m.rejectedSpans.WithLabelValues("consumer")
	m.recorded = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "collector", Name: "recorded_requests_total",
		Help: "Requests appended to the --record file.",
	})
	m.recordErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "collector", Name: "record_errors_total",
		Help: "Failed writes or flushes of the --record file.",
	})
	queueDepth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "collector", Name: "queue_depth",
		Help: "Accepted requests waiting for the consumer or the recorder.",
	}, func() float64 { n, _ := c.queue.depth(); return float64(n) })
	queueBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "collector", Name: "queue_bytes",
		Help: "Request bytes held by the ingest queue.",
	}, func() float64 { _, b := c.queue.depth(); return float64(b) })
	queueCap := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "collector", Name: "queue_capacity",
		Help: "Requests the ingest queue holds before answering 429 / RESOURCE_EXHAUSTED (--queue-size).",
	}, func() float64 { return float64(c.cfg.QueueSize) })
	conns := connCollector{c: c,
		open: prometheus.NewDesc(ns+"_collector_open_connections",
			"Connections open on the listener, by transport (at most --max-connections each).", []string{"transport"}, nil),
		refused: prometheus.NewDesc(ns+"_collector_refused_connections_total",
			"Connections closed as soon as accepted because the listener already held --max-connections, by transport.", []string{"transport"}, nil),
	}
	m.reg.MustRegister(m.requests, received, m.rejectedSpans, dur, m.recorded, m.recordErrors,
		queueDepth, queueBytes, queueCap, conns,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if c.held != nil {
		held := func(f func(HeldStats) int64) func() float64 {
			return func() float64 { return float64(f(c.held())) }
		}
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "held_spans",
				Help: "Spans held for analysis (bounded by --max-spans)."}, held(func(h HeldStats) int64 { return h.Spans })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "held_traces",
				Help: "Traces held for analysis."}, held(func(h HeldStats) int64 { return h.Traces })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "evicted_spans_total",
				Help: "Spans evicted, oldest traces first, to stay within --max-spans."}, held(func(h HeldStats) int64 { return h.EvictedSpans })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "evicted_traces_total",
				Help: "Traces evicted to stay within --max-spans."}, held(func(h HeldStats) int64 { return h.EvictedTraces })),
		)
	}
	return m
}

// observe records one finished request.
func (m *metrics) observe(t transport, start time.Time, res exportResult, err error) {
	m.totalRequests.Add(1)
	switch {
	case err != nil:
		cl := classify(err)
		m.requests.WithLabelValues(t.String(), cl.outcome).Inc()
		m.totalRefusedReqs.Add(1)
		if whole := res.rejected - res.invalid; whole > 0 {
			m.rejectedSpans.WithLabelValues(cl.outcome).Add(float64(whole))
		}
	case res.invalid > 0:
		m.partialReqs[t].Inc()
	default:
		m.acceptedReqs[t].Inc()
	}
	if res.invalid > 0 {
		m.rejectedSpans.WithLabelValues("invalid").Add(float64(res.invalid))
	}
	if res.accepted > 0 {
		m.receivedSpans[t].Add(float64(res.accepted))
		m.totalAccepted.Add(int64(res.accepted))
	}
	if res.rejected > 0 {
		m.totalRejected.Add(int64(res.rejected))
	}
	m.duration[t].Observe(time.Since(start).Seconds())
}

// consumerFailed counts spans the consumer refused after acceptance and returns how many times
// that has happened.
func (m *metrics) consumerFailed(spans int) int64 {
	m.consumerErrors.Add(float64(spans))
	m.totalRejected.Add(int64(spans))
	return m.totalConsumerErr.Add(1)
}

// recordFailed counts a recorder failure and returns how many there have been.
func (m *metrics) recordFailed() int64 {
	m.recordErrors.Inc()
	return m.totalRecordErr.Add(1)
}

// connCollector exports the listeners' connection counts. The listeners are bound in Start, after
// the registry is built, so the series are read from the collector at each scrape.
type connCollector struct {
	c             *Collector
	open, refused *prometheus.Desc
}

func (cc connCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cc.open; ch <- cc.refused }

func (cc connCollector) Collect(ch chan<- prometheus.Metric) {
	cc.c.mu.Lock()
	conns := cc.c.conns
	cc.c.mu.Unlock()
	for t := range numTransports {
		var open, refused int64
		if l := conns[t]; l != nil {
			open, refused = l.open.Load(), l.refused.Load()
		}
		ch <- prometheus.MustNewConstMetric(cc.open, prometheus.GaugeValue, float64(open), t.String())
		ch <- prometheus.MustNewConstMetric(cc.refused, prometheus.CounterValue, float64(refused), t.String())
	}
}
