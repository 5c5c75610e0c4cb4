package collector

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/stormwatch/stormwatch/spans"
)

// Error classes. The transports and the export path wrap one of these (fmt.Errorf("%w: ...")) and
// this file alone decides what each means on the wire, so gRPC and HTTP never disagree.
var (
	// ErrMalformed: the body is not a valid OTLP request. Retrying the same bytes cannot help.
	ErrMalformed = errors.New("malformed request")
	// ErrTooLarge: the body, or its gzip-decompressed form, exceeds Config.MaxRequestBytes.
	ErrTooLarge = errors.New("request too large")
	// ErrUnsupportedMediaType: a Content-Type or Content-Encoding the collector does not speak.
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	// ErrMethodNotAllowed: anything but POST on the OTLP/HTTP traces path.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrNotFound: an OTLP/HTTP path the collector does not serve (logs, metrics, typos).
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated: a token is configured and the request did not carry it.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrOverloaded: the ingest queue (requests or bytes) is full. The client should retry later.
	ErrOverloaded = errors.New("overloaded")
	// ErrShuttingDown: the collector stopped accepting; another instance may take the retry.
	ErrShuttingDown = errors.New("shutting down")
)

// errorClass is what an error means to a client.
type errorClass struct {
	// outcome labels the stormwatch_collector_requests_total metric.
	outcome string
	http    int
	grpc    codes.Code
	// retryAfter adds Retry-After (HTTP) and RetryInfo (gRPC): the OTLP exporters retry
	// RESOURCE_EXHAUSTED only when RetryInfo is present, so overload must carry it.
	retryAfter bool
}

// classify is the one mapping from error to transport status. The order matters only for errors
// that wrap two classes, which the collector never builds.
func classify(err error) errorClass {
	switch {
	case errors.Is(err, ErrMalformed), spans.IsPermanent(err):
		return errorClass{outcome: "malformed", http: http.StatusBadRequest, grpc: codes.InvalidArgument}
	case errors.Is(err, ErrTooLarge):
		// gRPC itself answers RESOURCE_EXHAUSTED without RetryInfo for an oversized message
		// (grpc.MaxRecvMsgSize), which the exporters treat as permanent; keep the same answer.
		return errorClass{outcome: "too_large", http: http.StatusRequestEntityTooLarge, grpc: codes.ResourceExhausted}
	case errors.Is(err, ErrUnsupportedMediaType):
		return errorClass{outcome: "unsupported_media_type", http: http.StatusUnsupportedMediaType, grpc: codes.InvalidArgument}
	case errors.Is(err, ErrMethodNotAllowed):
		return errorClass{outcome: "method_not_allowed", http: http.StatusMethodNotAllowed, grpc: codes.Unimplemented}
	case errors.Is(err, ErrNotFound):
		return errorClass{outcome: "not_found", http: http.StatusNotFound, grpc: codes.Unimplemented}
	case errors.Is(err, ErrUnauthenticated):
		return errorClass{outcome: "unauthenticated", http: http.StatusUnauthorized, grpc: codes.Unauthenticated}
	case errors.Is(err, ErrOverloaded):
		return errorClass{outcome: "overloaded", http: http.StatusTooManyRequests, grpc: codes.ResourceExhausted, retryAfter: true}
	case errors.Is(err, ErrShuttingDown):
		return errorClass{outcome: "shutting_down", http: http.StatusServiceUnavailable, grpc: codes.Unavailable}
	}
	return errorClass{outcome: "internal", http: http.StatusInternalServerError, grpc: codes.Internal}
}

// recvError is the class of a request grpc-go refused while reading it (too large on the wire,
// cut short, cancelled). grpc-go has answered it already, with a status of its own: the class is
// the one whose gRPC code that status has, so the metrics count what the client was told.
func recvError(err error) error {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	case codes.Unavailable:
		return fmt.Errorf("%w: %v", ErrShuttingDown, err)
	}
	return fmt.Errorf("read request: %w", err) // INTERNAL, CANCELLED...: counted as internal
}

// grpcStatus turns an export error into the status the gRPC client sees.
func grpcStatus(err error, retryAfter time.Duration) error {
	cl := classify(err)
	st := status.New(cl.grpc, err.Error())
	if cl.retryAfter {
		if withInfo, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
			st = withInfo
		}
	}
	return st.Err()
}

// writeHTTPError answers an OTLP/HTTP request that failed. The body is a google.rpc.Status in the
// request's content type, as the OTLP specification asks, or plain text when the content type
// itself was the problem.
func writeHTTPError(w http.ResponseWriter, err error, enc encoding, retryAfter time.Duration) {
	cl := classify(err)
	h := w.Header()
	switch cl.http {
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="stormwatch"`)
	}
	if cl.retryAfter {
		h.Set("Retry-After", retryAfterSeconds(retryAfter))
	}
	writeHTTPStatus(w, cl.http, int32(cl.grpc), err.Error(), enc)
}

// retryAfterSeconds renders a delay as Retry-After's whole seconds, rounded up and at least 1, so a
// client never reads "retry immediately".
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
