package collector

import (
	"compress/gzip"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const (
	tracesPath  = "/v1/traces"
	metricsPath = "/metrics"

	contentTypeProto = "application/x-protobuf"
	contentTypeJSON  = "application/json"
)

func (c *Collector) newHTTPServer() *http.Server {
	mux := http.NewServeMux()
	h := &httpHandler{c: c}
	mux.Handle(tracesPath, h)
	h.mountIgnoredSignals(mux)
	mux.Handle(metricsPath, promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	c.mountHandlers(mux)
	// Everything else is a 404 in the OTLP shape, which names the path that is served.
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		err := fmt.Errorf("%w: %s (OTLP traces are served at POST %s)", ErrNotFound, r.URL.Path, tracesPath)
		c.metrics.observe(transportHTTP, start, exportResult{}, err)
		writeHTTPError(w, err, requestEncoding(r), c.cfg.RetryAfter)
	}))
	return &http.Server{
		Handler: mux,
		// A client that never finishes its headers must not hold a connection forever.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Handshake failures and the like are the client's problem: debug level, not stderr noise.
		ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelDebug),
	}
}

func (c *Collector) httpTLSConfig() *tls.Config {
	cfg := c.cfg.TLS.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	return cfg
}

type httpHandler struct {
	c *Collector
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := h.c
	start := time.Now()
	enc := requestEncoding(r)
	res, err := h.handle(w, r, enc)
	c.metrics.observe(transportHTTP, start, res, err)
	if err != nil {
		// Read what is left (bounded) so the connection can be reused for the client's retry.
		io.CopyN(io.Discard, r.Body, 64<<10)
		writeHTTPError(w, err, enc, c.cfg.RetryAfter)
		return
	}
	msg := res.partialMessage()
	if msg == "" {
		// The common answer, an empty ExportTraceServiceResponse, needs no encoding: no bytes in
		// protobuf, "{}" in JSON.
		h := w.Header()
		if enc == encJSON {
			h["Content-Type"] = jsonContentType
			h["Content-Length"] = emptyJSONLength
			w.WriteHeader(http.StatusOK)
			w.Write(emptyJSON)
		} else {
			h["Content-Type"] = protoContentType
			h["Content-Length"] = zeroLength
			w.WriteHeader(http.StatusOK)
		}
		return
	}
	resp := &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: int64(res.invalid), ErrorMessage: msg}}
	writeHTTPMessage(w, http.StatusOK, resp, enc)
}

// Header values of the empty success answer, shared read-only (net/http does not modify them).
var (
	jsonContentType  = []string{contentTypeJSON}
	protoContentType = []string{contentTypeProto}
	emptyJSON        = []byte("{}")
	emptyJSONLength  = []string{"2"}
	zeroLength       = []string{"0"}
)

func (h *httpHandler) handle(w http.ResponseWriter, r *http.Request, enc encoding) (exportResult, error) {
	c := h.c
	if r.Method != http.MethodPost {
		return exportResult{}, fmt.Errorf("%w: %s %s (use POST)", ErrMethodNotAllowed, r.Method, tracesPath)
	}
	if err := c.authorize(r.Header.Get("Authorization")); err != nil {
		return exportResult{}, err
	}
	if enc == encUnknown {
		return exportResult{}, fmt.Errorf("%w: Content-Type %q (send %s or %s)",
			ErrUnsupportedMediaType, r.Header.Get("Content-Type"), contentTypeProto, contentTypeJSON)
	}
	body, buf, err := h.readBody(w, r)
	if err != nil {
		return exportResult{}, err
	}
	return c.export(body, buf, enc)
}

// readBody reads the request body, decompressing gzip, refusing more than MaxRequestBytes on the
// wire and, separately, after decompression (a small gzip bomb must not expand without limit).
func (h *httpHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *[]byte, error) {
	limit := h.c.cfg.MaxRequestBytes
	if r.ContentLength > limit {
		return nil, nil, fmt.Errorf("%w: body of %d bytes exceeds the limit of %d bytes (--max-request-bytes)", ErrTooLarge, r.ContentLength, limit)
	}
	gz := false
	switch ce := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); ce {
	case "", "identity":
	case "gzip", "x-gzip":
		gz = true
	default:
		return nil, nil, fmt.Errorf("%w: Content-Encoding %q (send gzip or none)", ErrUnsupportedMediaType, ce)
	}
	wire := http.MaxBytesReader(w, r.Body, limit)
	if !gz {
		body, buf, err := readAll(wire, limit, r.ContentLength, h.c.bodies)
		return body, buf, bodyError(err, limit, "read body")
	}
	hint := int64(-1)
	if r.ContentLength > 0 {
		// Spans compress about 4 to 10 times; start there and grow.
		hint = min(4*r.ContentLength, limit)
	}
	return h.c.gunzip(wire, hint)
}

// gunzip decompresses a gzip body from src into a buffer of the body pool, refusing more than
// MaxRequestBytes once decompressed (a small gzip bomb must not expand without limit). Both
// transports decompress here, so a bad or oversized gzip body is the same error class on both.
func (c *Collector) gunzip(src io.Reader, hint int64) ([]byte, *[]byte, error) {
	limit := c.cfg.MaxRequestBytes
	zr, _ := c.gzips.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(src)
	} else {
		err = zr.Reset(src)
	}
	if err != nil {
		return nil, nil, bodyError(err, limit, "read gzip header")
	}
	defer c.gzips.Put(zr)
	body, buf, err := readAll(zr, limit, hint, c.bodies)
	return body, buf, bodyError(err, limit, "decompress gzip body")
}

// errDecompressedTooLarge marks a body whose decompressed form passed the limit.
var errDecompressedTooLarge = errors.New("too large")

// readAll reads src to the end into a buffer of pool, failing with errDecompressedTooLarge past
// limit bytes. It returns the body and, while the body is still in the pooled buffer it started
// in, that buffer (the batch aliases the body: the collector gives it back once the consumer
// releases the batch, see bodies.go); a body that outgrew it is in memory of its own.
func readAll(src io.Reader, limit, hint int64, pool mem.BufferPool) ([]byte, *[]byte, error) {
	size := int64(4096)
	if hint > 0 {
		// One more byte so the final read that sees EOF does not grow the buffer.
		size = min(hint, limit) + 1
	}
	pooled := pool.Get(int(size))
	buf := (*pooled)[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
			if pooled != nil {
				pool.Put(pooled) // copied out by the append
				pooled = nil
			}
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			err = errDecompressedTooLarge
		}
		if err == io.EOF {
			return buf, pooled, nil
		}
		if err != nil {
			if pooled != nil {
				pool.Put(pooled)
			}
			return nil, nil, err
		}
	}
}

// bodyError classifies a failure to read the body.
func bodyError(err error, limit int64, what string) error {
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return fmt.Errorf("%w: body exceeds the limit of %d bytes (--max-request-bytes)", ErrTooLarge, limit)
	case errors.Is(err, errDecompressedTooLarge):
		return fmt.Errorf("%w: decompressed body exceeds the limit of %d bytes (--max-request-bytes)", ErrTooLarge, limit)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
}

// requestEncoding is the body format named by Content-Type, or encUnknown.
func requestEncoding(r *http.Request) encoding {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return encUnknown
	}
	switch mt {
	case contentTypeProto:
		return encProto
	case contentTypeJSON:
		return encJSON
	}
	return encUnknown
}

// writeHTTPMessage writes m in the request's encoding: OTLP/HTTP answers in the content type it
// was sent.
func writeHTTPMessage(w http.ResponseWriter, code int, m proto.Message, enc encoding) {
	var (
		body []byte
		err  error
		ct   string
	)
	if enc == encJSON {
		body, err = protojson.Marshal(m)
		ct = contentTypeJSON
	} else {
		body, err = proto.Marshal(m)
		ct = contentTypeProto
	}
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

// writeHTTPStatus writes a google.rpc.Status, the OTLP/HTTP error body, or plain text when the
// request's content type is not one the client could decode a Status from.
func writeHTTPStatus(w http.ResponseWriter, code int, grpcCode int32, msg string, enc encoding) {
	if enc == encUnknown {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		io.WriteString(w, msg+"\n")
		return
	}
	writeHTTPMessage(w, code, &rpcstatus.Status{Code: grpcCode, Message: msg}, enc)
}
