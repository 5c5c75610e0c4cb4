package collector

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/stormwatch/stormwatch/internal/loopback"
	"github.com/stormwatch/stormwatch/spans"
)

// Defaults for the zero values of [Config].
const (
	DefaultGRPCAddr            = "127.0.0.1:4317"
	DefaultHTTPAddr            = "127.0.0.1:4318"
	DefaultMaxRequestBytes     = 20 << 20
	DefaultQueueSize           = 64
	DefaultMaxQueueBytes       = 256 << 20
	DefaultRetryAfter          = time.Second
	DefaultRecordFlushInterval = time.Second
	// DefaultMaxConnections bounds each listener's open connections: one per exporter (SDK or
	// OpenTelemetry Collector) is the usual use, so a thousand exporters fit, and the memory they
	// can hold stays bounded (about 160 KiB an idle gRPC connection).
	DefaultMaxConnections = 1024

	// MaxQueueSize caps QueueSize: the queue's channels are allocated up front.
	MaxQueueSize = 1 << 16

	// Disabled as an address turns that transport off.
	Disabled = "none"
)

// Config is the collector's configuration. Its zero value is a loopback-only collector on the
// standard OTLP ports with the limits below.
type Config struct {
	// GRPCAddr is the OTLP/gRPC listen address; "" means DefaultGRPCAddr, [Disabled] turns gRPC off.
	// Anything but a loopback host exposes the collector: Start logs a warning for it.
	GRPCAddr string
	// HTTPAddr is the OTLP/HTTP listen address (POST /v1/traces, GET /metrics); "" means
	// DefaultHTTPAddr, [Disabled] turns HTTP off.
	HTTPAddr string
	// MaxRequestBytes bounds one request body, and separately its gzip-decompressed form (a small
	// gzip bomb must not expand without limit). 0 means DefaultMaxRequestBytes (20 MiB).
	MaxRequestBytes int64
	// QueueSize is how many accepted requests may wait for the consumer (and the recorder) before
	// the collector answers 429 / RESOURCE_EXHAUSTED. 0 means DefaultQueueSize.
	QueueSize int
	// MaxQueueBytes bounds the request bytes held by that queue, the collector's own memory bound:
	// a request that would exceed it is refused as overload, unless the queue is empty (so one
	// request of MaxRequestBytes always fits). 0 means DefaultMaxQueueBytes (256 MiB).
	MaxQueueBytes int64
	// RetryAfter is the delay suggested to clients refused for overload (Retry-After, rounded up
	// to whole seconds, and gRPC RetryInfo). 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// Token, when not empty, is the bearer token every OTLP request must carry
	// ("authorization: Bearer TOKEN"). It is compared in constant time and never logged.
	Token string
	// TLS, when not nil, serves both transports over TLS with this configuration.
	TLS *tls.Config
	// RecordFlushInterval is how often the recorder is flushed; 0 means DefaultRecordFlushInterval.
	RecordFlushInterval time.Duration
	// RecordSync holds the answer to every request until the recorder has it durably - written,
	// flushed and fsync'd ([SyncRecorder.Sync]) - so that whatever a client was told was taken
	// survives a crash. Requests that arrive while one fsync runs share the next: the cost is one
	// fsync per burst, not per request. It needs a recorder that is a SyncRecorder.
	RecordSync bool
	// MaxConnections bounds the connections each listener (gRPC, HTTP) holds open at once; one more
	// is closed as soon as it is accepted, and counted. 0 means DefaultMaxConnections; negative
	// means no bound.
	MaxConnections int
	// Decode tunes the span decoder (e.g. keep every attribute for a span-detail view).
	Decode spans.DecodeOptions
}

func (c Config) withDefaults() Config {
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.RecordFlushInterval == 0 {
		c.RecordFlushInterval = DefaultRecordFlushInterval
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("max request bytes %d: must be positive", c.MaxRequestBytes))
	}
	if c.QueueSize < 0 || c.QueueSize > MaxQueueSize {
		errs = append(errs, fmt.Errorf("queue size %d: must be between 1 and %d", c.QueueSize, MaxQueueSize))
	}
	if c.MaxQueueBytes < 0 {
		errs = append(errs, fmt.Errorf("max queue bytes %d: must be positive", c.MaxQueueBytes))
	}
	if c.RetryAfter < 0 || c.RecordFlushInterval < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if c.GRPCAddr == Disabled && c.HTTPAddr == Disabled {
		errs = append(errs, errors.New("both gRPC and HTTP are disabled: nothing to listen on"))
	}
	return errors.Join(errs...)
}

// Recorder receives every accepted request whole, as received. tracefile.Writer implements it.
// The collector calls it from one goroutine and closes it at shutdown. WriteRequest must not keep
// body: the collector reuses it for another request once the consumer is done with it too.
type Recorder interface {
	WriteRequest(body []byte, isJSON bool) error
	Flush() error
	Close() error
}

// SyncRecorder is a Recorder that can make what it has written durable (fsync). tracefile.Writer is
// one; Config.RecordSync needs one.
type SyncRecorder interface {
	Recorder
	Sync() error
}

// HeldStats is what the span holder downstream (the analyzer) reports about its memory bound.
type HeldStats struct {
	Spans         int64 // spans held now
	Traces        int64 // traces held now
	EvictedSpans  int64 // spans evicted since start, oldest traces first
	EvictedTraces int64 // traces evicted since start
}

// Option injects a collaborator.
type Option func(*Collector)

// WithLogger sets where the collector logs (listening addresses, warnings, consumer and recorder
// failures). The default discards.
func WithLogger(l *slog.Logger) Option { return func(c *Collector) { c.log = l } }

// WithRecorder records every accepted request; the collector owns r from then on and closes it at
// Shutdown.
func WithRecorder(r Recorder) Option { return func(c *Collector) { c.rec = r } }

// WithHeldStats lets the span holder report held and evicted spans to the metrics and [Stats].
// f is called from the metrics scrape and status goroutines: it must be safe for concurrent use.
func WithHeldStats(f func() HeldStats) Option { return func(c *Collector) { c.held = f } }

// Collector is a running (or ready to run) OTLP receiver.
type Collector struct {
	cfg  Config
	next spans.Consumer
	log  *slog.Logger
	rec  Recorder
	held func() HeldStats
	// handlers are the extra routes of the HTTP port (WithHTTPHandler).
	handlers []extraHandler

	metrics *metrics
	ignored *ignoredMetrics // metrics and logs: received and dropped (signals.go)
	queue   *queue
	// bodies and batches are where requests' bodies and decoded batches come from and go back
	// to (bodies.go).
	bodies  mem.BufferPool
	batches sync.Pool
	// gzips reuses gzip readers: each holds a 32 KiB window that is wasteful to allocate per
	// request.
	gzips sync.Pool

	grpcSrv *grpc.Server
	httpSrv *http.Server
	grpcLn  net.Listener
	httpLn  net.Listener
	// conns bound each listener's open connections (MaxConnections), by transport; nil for a
	// transport that is off.
	conns [numTransports]*connLimit

	serveErrs chan error
	workers   sync.WaitGroup
	// recErr is the recorder's final flush and close error, set by the record worker.
	recErr error

	mu       sync.Mutex
	started  bool
	shutdown bool
}

// New builds a collector that delivers to next. It does not listen until [Collector.Start].
func New(cfg Config, next spans.Consumer, opts ...Option) (*Collector, error) {
	if next == nil {
		return nil, errors.New("collector: a consumer is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("collector config: %w", err)
	}
	c := &Collector{cfg: cfg, next: next, serveErrs: make(chan error, 2)}
	for _, o := range opts {
		o(c)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.bodies == nil {
		c.bodies = newBodyPool()
	}
	if cfg.RecordSync {
		if c.rec == nil {
			return nil, errors.New("collector config: record sync asks for a recorder (WithRecorder)")
		}
		if _, ok := c.rec.(SyncRecorder); !ok {
			return nil, fmt.Errorf("collector config: record sync: the recorder (%T) cannot sync", c.rec)
		}
	}
	c.queue = newQueue(cfg.QueueSize, cfg.MaxQueueBytes, c.rec != nil)
	c.metrics = newMetrics(c)
	c.ignored = newIgnoredMetrics(c.metrics.reg)
	return c, nil
}

// Registry is the collector's own Prometheus registry, served at GET /metrics on the HTTP port.
// Downstream parts register their collectors here.
func (c *Collector) Registry() *prometheus.Registry { return c.metrics.reg }

// ListenError is a listener Start could not bind: which transport ("gRPC" or "HTTP"), at which
// address, and why (errors.Is(err, syscall.EADDRINUSE) when another process holds it), so a
// command can name the flag that sets the address.
type ListenError struct {
	Transport, Addr string
	Err             error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("listen for OTLP/%s on %s: %v", e.Transport, e.Addr, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Start binds both listeners and starts serving; it returns once both are listening, or with the
// first bind error (having released whatever it bound). ctx bounds nothing after Start returns:
// stop the collector with Shutdown.
func (c *Collector) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("collector: already started")
	}
	lc := net.ListenConfig{}
	if c.cfg.GRPCAddr != Disabled {
		ln, err := lc.Listen(ctx, "tcp", c.cfg.GRPCAddr)
		if err != nil {
			return &ListenError{Transport: "gRPC", Addr: c.cfg.GRPCAddr, Err: err}
		}
		c.conns[transportGRPC] = newConnLimit(ln, c.cfg.MaxConnections)
		c.grpcLn = c.conns[transportGRPC]
	}
	if c.cfg.HTTPAddr != Disabled {
		ln, err := lc.Listen(ctx, "tcp", c.cfg.HTTPAddr)
		if err != nil {
			if c.grpcLn != nil {
				c.grpcLn.Close()
			}
			return &ListenError{Transport: "HTTP", Addr: c.cfg.HTTPAddr, Err: err}
		}
		c.conns[transportHTTP] = newConnLimit(ln, c.cfg.MaxConnections)
		c.httpLn = c.conns[transportHTTP]
	}
	c.started = true

	c.startWorkers()
	scheme := "http"
	if c.cfg.TLS != nil {
		scheme = "https"
	}
	if c.grpcLn != nil {
		c.grpcSrv = c.newGRPCServer()
		go func() { c.serveErrs <- c.grpcSrv.Serve(c.grpcLn) }()
		c.log.Info("OTLP/gRPC listening", "addr", c.grpcLn.Addr().String(), "tls", c.cfg.TLS != nil)
		c.warnIfExposed("OTLP/gRPC", c.cfg.GRPCAddr)
	}
	if c.httpLn != nil {
		c.httpSrv = c.newHTTPServer()
		ln := c.httpLn
		if c.cfg.TLS != nil {
			ln = tls.NewListener(ln, c.httpTLSConfig())
		}
		go func() { c.serveErrs <- c.httpSrv.Serve(ln) }()
		c.log.Info("OTLP/HTTP listening", "url", scheme+"://"+c.httpLn.Addr().String()+tracesPath,
			"metrics", scheme+"://"+c.httpLn.Addr().String()+metricsPath)
		c.warnIfExposed("OTLP/HTTP", c.cfg.HTTPAddr)
	}
	return nil
}

func (c *Collector) warnIfExposed(what, addr string) {
	if loopback.Is(addr) { // an empty host binds every interface: not loopback
		return
	}
	msg := "listening beyond loopback: anyone who can reach this address can send spans"
	if c.cfg.Token == "" {
		msg += " (no --token-file)"
	}
	if c.cfg.TLS == nil {
		msg += " (no TLS)"
	}
	c.log.Warn(msg, "transport", what, "addr", addr)
}

// GRPCAddr is the bound OTLP/gRPC address (useful with port 0), or "" when gRPC is off.
func (c *Collector) GRPCAddr() string {
	if c.grpcLn == nil {
		return ""
	}
	return c.grpcLn.Addr().String()
}

// HTTPAddr is the bound OTLP/HTTP address, or "" when HTTP is off.
func (c *Collector) HTTPAddr() string {
	if c.httpLn == nil {
		return ""
	}
	return c.httpLn.Addr().String()
}

// Shutdown stops accepting (in-flight requests finish), drains the queue into the consumer and the
// recorder, then flushes and closes the recorder. When ctx ends first the servers are closed hard
// and whatever is still queued is reported in the error, never dropped without a word.
func (c *Collector) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.shutdown {
		c.mu.Unlock()
		return nil
	}
	c.shutdown = true
	started := c.started
	c.mu.Unlock()

	var errs []error
	if started {
		errs = append(errs, c.stopServers(ctx)...)
	}
	// Nothing admits after the servers stopped; close the queue so the workers finish draining.
	c.queue.close()
	if started {
		drained := make(chan struct{})
		go func() { c.workers.Wait(); close(drained) }()
		select {
		case <-drained:
			errs = append(errs, c.recErr) // written by the record worker before it finished
		case <-ctx.Done():
			items, _ := c.queue.depth()
			errs = append(errs, fmt.Errorf("drain the ingest queue: %d requests still queued: %w", items, ctx.Err()))
		}
	}
	if c.rec != nil && !started {
		// Started collectors close the recorder in the record worker, after its last write.
		errs = append(errs, c.closeRecorder())
	}
	return errors.Join(errs...)
}

func (c *Collector) stopServers(ctx context.Context) []error {
	var errs []error
	var wg sync.WaitGroup
	if c.grpcSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopped := make(chan struct{})
			go func() { c.grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				c.grpcSrv.Stop()
				<-stopped
			}
		}()
	}
	var httpErr error
	if c.httpSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.httpSrv.Shutdown(ctx); err != nil {
				c.httpSrv.Close()
				httpErr = fmt.Errorf("stop OTLP/HTTP: %w", err)
			}
		}()
	}
	wg.Wait()
	errs = append(errs, httpErr)
	// Serve returns http.ErrServerClosed / nil after a requested stop; anything else is news.
	n := 0
	if c.grpcSrv != nil {
		n++
	}
	if c.httpSrv != nil {
		n++
	}
	for range n {
		if err := <-c.serveErrs; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			errs = append(errs, fmt.Errorf("serve: %w", err))
		}
	}
	return errs
}
