package collector

import (
	"bytes"
	"context"
	"io"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpcencoding "google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip decompressor: exporters may compress
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/tap"
)

// rawRequest is an ExportTraceServiceRequest left as bytes: the fast decoder reads them in place and
// the recorder writes them as received, so the generated message tree is never built. buf is
// body's buffer from the collector's body pool.
type rawRequest struct {
	body []byte
	buf  *[]byte
	// gzipped: body is the message as sent, gzip-compressed (see gzipPassthrough).
	gzipped bool
}

// rawCodec is the server's codec: requests arrive as rawRequest, everything else (the response, the
// status details) goes through the standard protobuf codec.
type rawCodec struct {
	std    grpcencoding.CodecV2
	bodies mem.BufferPool
}

func (c rawCodec) Name() string { return proto.Name }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) { return c.std.Marshal(v) }

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		// A compressed message is the slice gzipPassthrough.Do made, handed over as a
		// mem.SliceBuffer that nothing reuses: the handler reads it in place and decompresses it
		// into a buffer of the pool.
		if len(data) == 1 {
			if sb, ok := data[0].(mem.SliceBuffer); ok && len(sb) > 0 && sb[0] == gzipMarker {
				r.body, r.buf, r.gzipped = sb[1:], nil, true
				return nil
			}
		}
		// Copied out of gRPC's pooled buffers, which are reused after this returns, into one of
		// the collector's: it goes back to the body pool once the consumer and the recorder are
		// done with it (bodies.go).
		r.buf = c.bodies.Get(data.Len())
		r.body = (*r.buf)[:data.CopyTo(*r.buf)]
		if len(r.body) > 0 && r.body[0] == gzipMarker {
			r.body, r.gzipped = r.body[1:], true
		}
		return nil
	}
	return c.std.Unmarshal(data, v)
}

// gzipPassthrough is the server's gzip decompressor, and does not decompress: it hands the
// compressed message on, behind gzipMarker, for the handler to decompress as the HTTP receiver
// does (Collector.gunzip). grpc-go answers any failure of a decompressor itself, INTERNAL for a
// body that is not gzip, and never asks the handler; decompressed by the handler, a bad body is
// INVALID_ARGUMENT and a bomb RESOURCE_EXHAUSTED through the one error table, and counted as
// such. It is a server option (grpc.RPCDecompressor), not a registration: the process-wide gzip
// compressor stays grpc-go's, for clients and for compressing answers.
type gzipPassthrough struct{}

// gzipMarker precedes a compressed message handed to the codec. No ExportTraceServiceRequest
// starts with it (field number 0 does not exist), so a plain message is never taken for one.
const gzipMarker = 0x00

func (gzipPassthrough) Type() string { return "gzip" }

func (gzipPassthrough) Do(r io.Reader) ([]byte, error) {
	size := 4096
	if rem, ok := r.(interface{ Remaining() int }); ok { // grpc-go's mem.Reader: the exact size
		size = rem.Remaining()
	}
	b := make([]byte, 1, 1+size)
	b[0] = gzipMarker
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// grpcMaxConnectionIdle is how long a gRPC connection may carry no call before it is closed.
// Exporters send every few seconds; this is for connections nobody uses any more.
const grpcMaxConnectionIdle = 5 * time.Minute

// grpcReadBufferSize is each connection's socket read buffer.
const grpcReadBufferSize = 128 << 10

// grpcExporter is the handler type of traceServiceDesc.
type grpcExporter interface {
	exportGRPC(ctx context.Context, dec func(any) error) (*coltracepb.ExportTraceServiceResponse, error)
}

// traceServiceDesc is the generated TraceService description with a handler that receives the
// request as bytes (see rawRequest). Service and method names come from the generated code, so a
// stock OTLP exporter cannot tell the difference.
var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: coltracepb.TraceService_ServiceDesc.ServiceName,
	HandlerType: (*grpcExporter)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: coltracepb.TraceService_ServiceDesc.Methods[0].MethodName,
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(grpcExporter).exportGRPC(ctx, dec)
		},
	}},
	Metadata: coltracepb.TraceService_ServiceDesc.Metadata,
}

func (c *Collector) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{std: grpcencoding.GetCodecV2(proto.Name), bodies: c.bodies}),
		// gRPC checks this after decompression too, so a gzip bomb stops at the limit.
		grpc.MaxRecvMsgSize(int(c.cfg.MaxRequestBytes)),
		// A request of 100 spans is about 58 KB: read from the socket in one call, not two or
		// three of grpc-go's default 32 KiB. Each connection has its own, for as long as it is
		// open, so not the OpenTelemetry Collector receiver's 512 KiB: a fleet of a thousand SDK
		// exporters would hold half a gigabyte in them.
		grpc.ReadBufferSize(grpcReadBufferSize),
		// Deprecated for a process-wide registration, which is what this must not be.
		//lint:ignore SA1019 supported throughout grpc-go 1.x; the replacement is process-wide
		grpc.RPCDecompressor(gzipPassthrough{}),
		// A connection left open with nothing on it (an exporter gone without a goodbye) holds a
		// slot of --max-connections and its buffers: close it; a client that comes back
		// reconnects on its next export, as it does after any GOAWAY.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: grpcMaxConnectionIdle}),
	}
	if c.cfg.Token != "" {
		// Authorize from the headers, before gRPC reads (and decompresses) the message: an
		// unauthenticated client costs no more than its headers.
		opts = append(opts, grpc.InTapHandle(c.grpcAuthorize))
	}
	if c.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c.cfg.TLS)))
	}
	s := grpc.NewServer(opts...)
	s.RegisterService(&traceServiceDesc, grpcHandler{c})
	for _, sd := range ignoredSignalServices(c) {
		s.RegisterService(&sd, c)
	}
	return s
}

// grpcHandler keeps exportGRPC off the Collector's method set.
type grpcHandler struct{ c *Collector }

func (h grpcHandler) exportGRPC(ctx context.Context, dec func(any) error) (*coltracepb.ExportTraceServiceResponse, error) {
	c := h.c
	start := time.Now()
	res, err := c.grpcExport(ctx, dec)
	c.metrics.observe(transportGRPC, start, res, err)
	if err != nil {
		return nil, grpcStatus(err, c.cfg.RetryAfter)
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if msg := res.partialMessage(); msg != "" {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{
			RejectedSpans: int64(res.invalid),
			ErrorMessage:  msg,
		}
	}
	return resp, nil
}

// grpcAuthorize is the tap handle that checks the bearer token of every gRPC call.
func (c *Collector) grpcAuthorize(ctx context.Context, info *tap.Info) (context.Context, error) {
	var auth string
	if v := info.Header.Get("authorization"); len(v) > 0 {
		auth = v[0]
	}
	if err := c.authorize(auth); err != nil {
		c.metrics.observe(transportGRPC, time.Now(), exportResult{}, err)
		return ctx, grpcStatus(err, c.cfg.RetryAfter)
	}
	return ctx, nil
}

func (c *Collector) grpcExport(ctx context.Context, dec func(any) error) (exportResult, error) {
	var raw rawRequest
	if err := dec(&raw); err != nil {
		return exportResult{}, recvError(err)
	}
	body, buf := raw.body, raw.buf
	if raw.gzipped {
		// Spans compress about 4 to 10 times; start there and grow.
		hint := min(4*int64(len(body)), c.cfg.MaxRequestBytes)
		var err error
		body, buf, err = c.gunzip(bytes.NewReader(raw.body), hint)
		if raw.buf != nil {
			c.bodies.Put(raw.buf)
		}
		if err != nil {
			return exportResult{}, err
		}
	}
	return c.export(body, buf, encProto)
}
