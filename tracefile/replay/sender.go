package replay

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/internal/loopback"
	"github.com/stormwatch/stormwatch/tracefile"
)

// Protocol is the OTLP transport a Sender uses; the names are OTEL_EXPORTER_OTLP_PROTOCOL's.
type Protocol string

const (
	GRPC         Protocol = "grpc"
	HTTPProtobuf Protocol = "http/protobuf"
	HTTPJSON     Protocol = "http/json"
)

// ParseProtocol accepts the three OTLP protocol names.
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(s); p {
	case GRPC, HTTPProtobuf, HTTPJSON:
		return p, nil
	}
	return "", fmt.Errorf("unknown protocol %q: use grpc, http/protobuf or http/json", s)
}

// Target says where and how to send.
type Target struct {
	// Endpoint is host:port (gRPC by default), or an http:// or https:// URL (HTTP protobuf by
	// default; the path defaults to /v1/traces).
	Endpoint string
	// Protocol overrides the one the endpoint implies.
	Protocol Protocol
	// Insecure sends without TLS. Without it, TLS is used except for http:// URLs and loopback
	// addresses (a local collector, the usual replay target, rarely has a certificate).
	Insecure bool
	// Token is sent as "Authorization: Bearer <token>" when not empty.
	Token string
	// Timeout bounds one export; 0 means 10 seconds.
	Timeout time.Duration
}

// resolved is a Target made concrete.
type resolved struct {
	proto  Protocol
	addr   string // host:port for gRPC
	url    string // for HTTP
	tls    bool
	token  string
	timout time.Duration
}

func (t Target) resolve() (resolved, error) {
	r := resolved{token: t.Token, timout: t.Timeout}
	if r.timout <= 0 {
		r.timout = 10 * time.Second
	}
	ep := strings.TrimSpace(t.Endpoint)
	if ep == "" {
		return r, errors.New("no endpoint: give --to host:port or --to http://host:port")
	}
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return r, fmt.Errorf("endpoint %q: %w", ep, err)
		}
		switch u.Scheme {
		case "http", "https":
		default:
			return r, fmt.Errorf("endpoint %q: scheme %q: use http:// or https://, or host:port for gRPC", ep, u.Scheme)
		}
		if u.Host == "" {
			return r, fmt.Errorf("endpoint %q has no host", ep)
		}
		if t.Insecure && u.Scheme == "https" {
			return r, fmt.Errorf("endpoint %q: --insecure contradicts https://", ep)
		}
		r.proto = HTTPProtobuf
		r.tls = u.Scheme == "https"
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		r.url = u.String()
		r.addr = u.Host
		if u.Port() == "" {
			port := "80"
			if r.tls {
				port = "443"
			}
			r.addr = net.JoinHostPort(u.Hostname(), port)
		}
	} else {
		h, _, err := net.SplitHostPort(ep)
		if err != nil {
			return r, fmt.Errorf("endpoint %q: want host:port or an http:// URL: %w", ep, err)
		}
		r.proto = GRPC
		r.addr = ep
		r.tls = !t.Insecure && !loopback.Is(h)
		scheme := "http"
		if r.tls {
			scheme = "https"
		}
		r.url = scheme + "://" + ep + "/v1/traces"
	}
	if t.Protocol != "" {
		r.proto = t.Protocol
	}
	return r, nil
}

// Sender exports requests to one endpoint over one connection. It is safe for concurrent use, but
// Blast gives each worker its own so the load spreads over connections.
type Sender struct {
	r    resolved
	conn *grpc.ClientConn
	http *http.Client
}

// NewSender prepares a connection to t (gRPC connects lazily; HTTP on the first request).
func NewSender(t Target) (*Sender, error) {
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	s := &Sender{r: r}
	switch r.proto {
	case GRPC:
		creds := insecure.NewCredentials()
		if r.tls {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
		s.conn, err = grpc.NewClient(r.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("set up gRPC connection to %s: %w", r.addr, err)
		}
	default:
		// One transport per sender, one connection each: Blast's workers must not share.
		tr := &http.Transport{
			Proxy:               nil, // loopback benchmarks must not go through a proxy from the environment
			MaxIdleConnsPerHost: 1,
			MaxConnsPerHost:     1,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   false,
		}
		s.http = &http.Client{Transport: tr}
	}
	return s, nil
}

// Protocol is the protocol in use.
func (s *Sender) Protocol() Protocol { return s.r.proto }

// Endpoint describes where requests go, for messages.
func (s *Sender) Endpoint() string {
	if s.r.proto == GRPC {
		return s.r.addr + " (OTLP/gRPC)"
	}
	return s.r.url + " (OTLP/" + strings.TrimPrefix(string(s.r.proto), "http/") + ")"
}

// Close releases the connection.
func (s *Sender) Close() error {
	if s.conn != nil {
		return s.conn.Close()
	}
	s.http.CloseIdleConnections()
	return nil
}

// Request is one export request, encoded for the sender's protocol by Encode.
type Request struct {
	Body  []byte // protobuf for grpc and http/protobuf, OTLP/JSON for http/json
	Spans int
	// pb is the protobuf form when Body is OTLP/JSON, plan where a shift changes Body, and pbPlan
	// where it changes pb (for a Body the JSON plan cannot patch): Blast makes later passes from
	// them, planned once rather than on every pass.
	pb     []byte
	plan   plan
	pbPlan plan
}

// Encode prepares a protobuf request for protocol p.
func Encode(p Protocol, pb []byte, spans int) (*Request, error) {
	if p == HTTPJSON {
		js, err := tracefile.ProtoToJSON(pb)
		if err != nil {
			return nil, err
		}
		r := &Request{Body: js, Spans: spans, pb: pb, plan: planJSON(js)}
		if r.plan == nil {
			r.pbPlan = planProto(pb)
		}
		return r, nil
	}
	return &Request{Body: pb, Spans: spans, plan: planProto(pb)}, nil
}

// Result is the collector's answer to one export.
type Result struct {
	// Rejected spans reported through OTLP partial success, and its message.
	Rejected int64
	Message  string
}

// ExportError is a request the endpoint refused or could not take.
type ExportError struct {
	Endpoint string
	// Status is the HTTP status or the gRPC code's name; empty when nothing answered.
	Status string
	// Message is the server's explanation.
	Message string
	// Retryable says a later retry may succeed (429, 503, RESOURCE_EXHAUSTED, UNAVAILABLE).
	Retryable bool
	// RetryAfter is the server's hint, when it gave one.
	RetryAfter time.Duration
	// Unreachable says no connection could be made.
	Unreachable bool
	Err         error
}

func (e *ExportError) Error() string {
	switch {
	case e.Unreachable:
		return fmt.Sprintf("cannot reach %s: %v (is a collector listening there?)", e.Endpoint, e.Err)
	case e.Status != "":
		msg := e.Message
		if msg == "" {
			msg = "no message"
		}
		return fmt.Sprintf("%s rejected the request: %s: %s", e.Endpoint, e.Status, msg)
	}
	return fmt.Sprintf("export to %s: %v", e.Endpoint, e.Err)
}

func (e *ExportError) Unwrap() error { return e.Err }

// Send exports one request.
func (s *Sender) Send(ctx context.Context, req *Request) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.r.timout)
	defer cancel()
	if s.r.proto == GRPC {
		return s.sendGRPC(ctx, req)
	}
	return s.sendHTTP(ctx, req)
}

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// rawCodec passes pre-encoded protobuf through gRPC untouched: the request is encoded once, however
// many times it is sent.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot receive into %T", v)
	}
	*b = data.Materialize()
	return nil
}

func (s *Sender) sendGRPC(ctx context.Context, req *Request) (Result, error) {
	if s.r.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.r.token)
	}
	in, out := req.Body, []byte(nil)
	err := s.conn.Invoke(ctx, exportMethod, &in, &out, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		st := status.Convert(err)
		e := &ExportError{Endpoint: s.Endpoint(), Status: st.Code().String(), Message: st.Message(), Err: err}
		switch st.Code() {
		case codes.Unavailable:
			e.Retryable = true
			if strings.Contains(st.Message(), "connect") || strings.Contains(st.Message(), "dial") {
				e.Unreachable, e.Status = true, ""
				e.Err = errors.New(st.Message())
			}
		case codes.ResourceExhausted:
			e.Retryable = true
		case codes.DeadlineExceeded:
			e.Retryable = true
		}
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				e.RetryAfter = ri.GetRetryDelay().AsDuration()
			}
		}
		return Result{}, e
	}
	return parseResponse(out, false)
}

// parseResponse reads an export response, protobuf or (asJSON) OTLP/JSON.
func parseResponse(body []byte, asJSON bool) (Result, error) {
	resp := &coltracepb.ExportTraceServiceResponse{}
	unmarshal := proto.Unmarshal
	if asJSON {
		unmarshal = protojson.Unmarshal
	}
	if err := unmarshal(body, resp); err != nil {
		return Result{}, fmt.Errorf("decode export response: %w", err)
	}
	ps := resp.GetPartialSuccess()
	return Result{Rejected: ps.GetRejectedSpans(), Message: ps.GetErrorMessage()}, nil
}

func (s *Sender) sendHTTP(ctx context.Context, req *Request) (Result, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.r.url, bytes.NewReader(req.Body))
	if err != nil {
		return Result{}, fmt.Errorf("build request to %s: %w", s.r.url, err)
	}
	ct := "application/x-protobuf"
	if s.r.proto == HTTPJSON {
		ct = "application/json"
	}
	hr.Header.Set("Content-Type", ct)
	if s.r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+s.r.token)
	}
	resp, err := s.http.Do(hr)
	if err != nil {
		e := &ExportError{Endpoint: s.Endpoint(), Err: err, Retryable: true}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			e.Unreachable = true
			e.Err = op
		}
		return Result{}, e
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Result{}, &ExportError{Endpoint: s.Endpoint(), Err: fmt.Errorf("read response: %w", err), Retryable: true}
	}
	if resp.StatusCode != http.StatusOK {
		e := &ExportError{Endpoint: s.Endpoint(), Status: resp.Status, Message: httpMessage(resp, body)}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			e.Retryable = true
			if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
				e.RetryAfter = time.Duration(secs) * time.Second
			}
		}
		return Result{}, e
	}
	// An answer we cannot read (or none) is still a 200: the spans were taken.
	res, _ := parseResponse(body, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
	return res, nil
}

// httpMessage extracts the explanation from an OTLP error body (a google.rpc.Status, in the
// request's encoding) or falls back to the body's text.
func httpMessage(resp *http.Response, body []byte) string {
	text := strings.TrimSpace(string(body))
	st := &spb.Status{}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/x-protobuf"):
		if err := proto.Unmarshal(body, st); err == nil && st.GetMessage() != "" {
			return st.GetMessage()
		}
		return fmt.Sprintf("%d bytes of protobuf", len(body))
	case strings.HasPrefix(ct, "application/json"):
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, st); err == nil && st.GetMessage() != "" {
			return st.GetMessage()
		}
	}
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	return text
}
