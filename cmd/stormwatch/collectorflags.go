package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/stormwatch/stormwatch/collector"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// collectorFlags are the collector's flags, shared by `stormwatch collect` and the root live command
// so both accept the same addresses, limits, security and recording options.
type collectorFlags struct {
	grpcAddr        string
	httpAddr        string
	maxRequestBytes byteSize
	queueSize       int
	maxQueueBytes   byteSize
	maxSpans        int
	maxConns        int
	record          string
	recordSync      bool
	tokenFile       string
	tlsCert         string
	tlsKey          string
	shutdownTimeout time.Duration

	// decode is set by the command, not by a flag: the live dashboard keeps every attribute for
	// its span detail, collect only what the analyzer reads.
	decode spans.DecodeOptions
}

// defaultMaxSpans is --max-spans' default: the analyzer holds this many spans
// and evicts the oldest traces beyond it.
const defaultMaxSpans = 1_000_000

func (f *collectorFlags) register(fs *pflag.FlagSet) {
	f.maxRequestBytes = collector.DefaultMaxRequestBytes
	f.maxQueueBytes = collector.DefaultMaxQueueBytes
	fs.StringVar(&f.grpcAddr, "grpc", collector.DefaultGRPCAddr,
		`OTLP/gRPC listen `+"`ADDR`"+` (host:port; port 0 picks a free one); "none" turns gRPC off. Loopback by default: a non-loopback address (e.g. 0.0.0.0:4317) exposes the collector to the network - use it with --token-file and --tls-cert`)
	fs.StringVar(&f.httpAddr, "http", collector.DefaultHTTPAddr,
		`OTLP/HTTP listen `+"`ADDR`"+` (POST /v1/traces, GET /metrics, GET /api/v1/report); "none" turns HTTP off. Loopback by default, like --grpc`)
	fs.Var(&f.maxRequestBytes, "max-request-bytes",
		"largest request body accepted (`SIZE`), and separately its gzip-decompressed size (e.g. 20MiB, 512KiB); larger gets 413 / RESOURCE_EXHAUSTED")
	fs.IntVar(&f.queueSize, "queue-size", collector.DefaultQueueSize,
		"accepted requests that may wait for the analyzer and the recorder; beyond it clients get 429 / RESOURCE_EXHAUSTED and retry")
	fs.Var(&f.maxQueueBytes, "max-queue-bytes",
		"request bytes (`SIZE`) the ingest queue may hold; beyond it clients get 429 / RESOURCE_EXHAUSTED and retry")
	fs.IntVar(&f.maxConns, "max-connections", collector.DefaultMaxConnections,
		"connections each listener (gRPC, HTTP) holds open at once; one more is closed at once and counted (the exporter retries)")
	fs.IntVar(&f.maxSpans, "max-spans", defaultMaxSpans,
		"spans held for analysis; beyond it the oldest traces are evicted (and counted)")
	fs.StringVar(&f.record, "record", "",
		"append every accepted request to `FILE`: .jsonl (OTLP/JSON lines, the OpenTelemetry Collector file exporter's format) or .pb (length-prefixed protobuf, the cheap choice under load), optionally .gz")
	fs.BoolVar(&f.recordSync, "record-sync", false,
		"answer a request only once --record has it on disk (written and fsync'd), so every acknowledged span survives a crash; costs an fsync per burst of requests (docs/collector.md)")
	fs.StringVar(&f.tokenFile, "token-file", "",
		"require `FILE`'s content as a bearer token (Authorization: Bearer TOKEN) on both transports; requests without it get 401 / UNAUTHENTICATED")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve both transports over TLS with this PEM certificate `FILE` (needs --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the PEM private key `FILE` for --tls-cert")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second,
		"on Ctrl-C / SIGTERM, how long (`DURATION`) to wait for queued spans to drain before giving up")
}

// config turns the flags into a collector.Config, reading the token and TLS files.
func (f *collectorFlags) config() (collector.Config, error) {
	cfg := collector.Config{
		GRPCAddr:        f.grpcAddr,
		HTTPAddr:        f.httpAddr,
		MaxRequestBytes: int64(f.maxRequestBytes),
		QueueSize:       f.queueSize,
		MaxQueueBytes:   int64(f.maxQueueBytes),
		RecordSync:      f.recordSync,
		MaxConnections:  f.maxConns,
		Decode:          f.decode,
	}
	// The collector's consumer is the analyzer, which holds spans packed by trace: packed on the
	// receivers' goroutines, the analyzer files a batch without packing it under its lock.
	cfg.Decode.PackByTrace = true
	var errs []error
	if f.recordSync && f.record == "" {
		errs = append(errs, errors.New("--record-sync needs --record FILE"))
	}
	if f.grpcAddr == "" || f.httpAddr == "" {
		errs = append(errs, errors.New(`--grpc and --http need an address; use "none" to turn one off`))
	}
	if f.maxRequestBytes <= 0 || f.maxQueueBytes <= 0 {
		errs = append(errs, errors.New("--max-request-bytes and --max-queue-bytes must be positive"))
	}
	if f.queueSize <= 0 {
		errs = append(errs, fmt.Errorf("--queue-size %d: must be positive", f.queueSize))
	}
	if f.maxSpans <= 0 {
		errs = append(errs, fmt.Errorf("--max-spans %d: must be positive", f.maxSpans))
	}
	if f.maxConns <= 0 {
		errs = append(errs, fmt.Errorf("--max-connections %d: must be positive", f.maxConns))
	}
	if f.tokenFile != "" {
		tok, err := readToken("--token-file", f.tokenFile)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Token = tok
	}
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", f.tlsCert, f.tlsKey, err))
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case f.tlsCert != "" || f.tlsKey != "":
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	return cfg, errors.Join(errs...)
}

// startCollector builds the collector from the flags, opens the recording and starts listening.
// next receives every accepted batch; held, when not nil, reports what next holds and evicts (see
// collector.WithHeldStats). Stop it with stopCollector.
func startCollector(ctx context.Context, f *collectorFlags, next spans.Consumer, held func() collector.HeldStats,
	log *slog.Logger, opts ...collector.Option) (*collector.Collector, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	opts = append([]collector.Option{collector.WithLogger(log)}, opts...)
	if held != nil {
		opts = append(opts, collector.WithHeldStats(held))
	}
	if f.tokenFile != "" {
		warnIfReadableByOthers(log, f.tokenFile)
	}
	var rec *tracefile.Writer
	if f.record != "" {
		// Append, so restarting with the same --record keeps what was recorded before.
		rec, err = tracefile.Append(f.record)
		if err != nil {
			return nil, fmt.Errorf("--record: %w", err)
		}
		if rc := rec.Recovery(); rc.Torn {
			log.Warn("--record: "+rc.String(), "file", f.record, "kept_records", rc.Kept, "cut_bytes", rc.CutBytes)
		}
		opts = append(opts, collector.WithRecorder(rec))
	}
	c, err := collector.New(cfg, next, opts...)
	if err == nil {
		err = listenHint(c.Start(ctx))
	}
	if err != nil {
		if rec != nil {
			rec.Close()
		}
		return nil, err
	}
	if rec != nil {
		log.Info("recording accepted requests", "file", f.record, "format", rec.Format().String(), "sync", f.recordSync)
	}
	return c, nil
}

// listenHint names the way out of a listener that could not be bound: the flag that sets its
// address, and port 0, which lets the system pick a free port (logged at start).
func listenHint(err error) error {
	var le *collector.ListenError
	if !errors.As(err, &le) {
		return err
	}
	flag := "--grpc"
	if le.Transport == "HTTP" {
		flag = "--http"
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w\n  another process (another stormwatch?) is listening on %s: stop it, or give %s another address,\n  e.g. %s 127.0.0.1:0 to let the system pick a free port (the log says which)", err, le.Addr, flag, flag)
	}
	return fmt.Errorf("%s %s: %w", flag, le.Addr, err)
}

// stopCollector stops accepting, drains the queue and closes the recording, within --shutdown-timeout.
func stopCollector(c *collector.Collector, f *collectorFlags) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down the collector: %w", err)
	}
	return nil
}

// warnIfReadableByOthers flags a token file other users can read: the token is then no secret.
func warnIfReadableByOthers(log *slog.Logger, path string) {
	st, err := os.Stat(path)
	if err == nil && st.Mode().Perm()&0o044 != 0 {
		log.Warn("the token file is readable by other users; chmod 600 it", "file", path)
	}
}

// newLogger is the text logger the collector commands write to stderr.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// byteSize is a pflag value for sizes: a plain number of bytes or one with a binary suffix
// (KiB, MiB, GiB; K, M, G and KB, MB, GB mean the same powers of 1024).
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
	{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
}

func (b *byteSize) Set(s string) error {
	in := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(in, u.suffix) {
			in, mult = strings.TrimSpace(strings.TrimSuffix(in, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(in, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size: use bytes or a number with KiB, MiB or GiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Type() string { return "size" }
