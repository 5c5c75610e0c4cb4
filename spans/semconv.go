package spans

// Attribute keys the analyzer reads. The decoder keeps these (interned, so comparing keys costs a
// pointer compare in the common case) and, unless asked to keep everything, drops the rest: they
// cost memory on every held span and nothing reads them.
//
// Stable OpenTelemetry semantic conventions come first, then the older spellings still sent by
// stock instrumentation, then stormwatch's own resilience.* namespace (docs/attributes.md).
const (
	AttrServiceName     = "service.name"
	AttrServiceInstance = "service.instance.id"

	AttrHTTPMethod      = "http.request.method"
	AttrHTTPStatus      = "http.response.status_code"
	AttrHTTPResendCount = "http.request.resend_count"
	AttrHTTPRoute       = "http.route"
	AttrServerAddress   = "server.address"
	AttrServerPort      = "server.port"
	AttrURLFull         = "url.full"
	AttrURLPath         = "url.path"
	AttrURLScheme       = "url.scheme"
	AttrErrorType       = "error.type"
	AttrRPCSystem       = "rpc.system"
	AttrRPCService      = "rpc.service"
	AttrRPCMethod       = "rpc.method"
	// AttrRPCStatus is the current semconv spelling, a string such as "UNAVAILABLE".
	AttrRPCStatus = "rpc.response.status_code"
	// AttrRPCGRPCStatus is the older integer spelling.
	AttrRPCGRPCStatus = "rpc.grpc.status_code"
	// AttrGRPCPreviousAttempts is gRPC's per-attempt counter, sent as metadata and copied to spans
	// by some instrumentation.
	AttrGRPCPreviousAttempts = "rpc.grpc.previous_rpc_attempts"
	AttrNetworkPeerAddress   = "network.peer.address"
	AttrNetworkPeerPort      = "network.peer.port"

	// Older spellings (semconv before 1.21) that stock instrumentation still emits.
	AttrLegacyHTTPMethod     = "http.method"
	AttrLegacyHTTPStatusCode = "http.status_code"
	AttrLegacyHTTPURL        = "http.url"
	AttrLegacyHTTPTarget     = "http.target"
	AttrLegacyNetPeerName    = "net.peer.name"
	AttrLegacyNetPeerPort    = "net.peer.port"
	AttrLegacyNetHostName    = "net.host.name"
	AttrLegacyNetHostPort    = "net.host.port"

	// Captured headers, as the HTTP semconv names them (lowercase header name).
	AttrReqHeaderIdempotencyKey = "http.request.header.idempotency-key"
	AttrResHeaderRetryAfter     = "http.response.header.retry-after"
	AttrReqHeaderDeadline       = "http.request.header.request-deadline"

	// stormwatch's resilience.* namespace: see docs/attributes.md for meanings.
	AttrOpID              = "resilience.operation.id"
	AttrOpName            = "resilience.operation.name"
	AttrAttempt           = "resilience.attempt"
	AttrAttemptKind       = "resilience.attempt.kind"
	AttrOwner             = "resilience.owner"
	AttrOutcome           = "resilience.outcome"
	AttrDecision          = "resilience.decision"
	AttrStopReason        = "resilience.stop_reason"
	AttrDeadline          = "resilience.deadline"
	AttrDeadlineRemaining = "resilience.deadline.remaining_ms"
	AttrBackoff           = "resilience.backoff_ms"
	AttrRetryAfter        = "resilience.retry_after_ms"
	AttrBudgetRemaining   = "resilience.budget.remaining"
	AttrBreakerState      = "resilience.breaker.state"
	AttrFanoutWidth       = "resilience.fanout.width"
	AttrIdempotencyKey    = "resilience.idempotency_key"
	AttrTerminal          = "resilience.terminal"
)

// WellKnown lists every key the decoder keeps by default. Decoders intern keys through it.
var WellKnown = []string{
	AttrServiceName, AttrServiceInstance,
	AttrHTTPMethod, AttrHTTPStatus, AttrHTTPResendCount, AttrHTTPRoute, AttrServerAddress, AttrServerPort,
	AttrURLFull, AttrURLPath, AttrURLScheme, AttrErrorType,
	AttrRPCSystem, AttrRPCService, AttrRPCMethod, AttrRPCStatus, AttrRPCGRPCStatus, AttrGRPCPreviousAttempts,
	AttrNetworkPeerAddress, AttrNetworkPeerPort,
	AttrLegacyHTTPMethod, AttrLegacyHTTPStatusCode, AttrLegacyHTTPURL, AttrLegacyHTTPTarget,
	AttrLegacyNetPeerName, AttrLegacyNetPeerPort, AttrLegacyNetHostName, AttrLegacyNetHostPort,
	AttrReqHeaderIdempotencyKey, AttrResHeaderRetryAfter, AttrReqHeaderDeadline,
	AttrOpID, AttrOpName, AttrAttempt, AttrAttemptKind, AttrOwner, AttrOutcome, AttrDecision, AttrStopReason,
	AttrDeadline, AttrDeadlineRemaining, AttrBackoff, AttrRetryAfter, AttrBudgetRemaining, AttrBreakerState,
	AttrFanoutWidth, AttrIdempotencyKey, AttrTerminal,
	"exception.type", "exception.message",
}

var wellKnownSet = func() map[string]string {
	m := make(map[string]string, len(WellKnown))
	for _, k := range WellKnown {
		m[k] = k
	}
	return m
}()

// Intern returns the canonical string for a well-known key and true, or "" and false. The lookup
// with a []byte converted in the map index does not allocate.
func Intern(key []byte) (string, bool) {
	s, ok := wellKnownSet[string(key)]
	return s, ok
}

// IsWellKnown reports whether key is in [WellKnown].
func IsWellKnown(key string) bool {
	_, ok := wellKnownSet[key]
	return ok
}

// Header attributes may carry secrets: the decoder keeps only the header keys above, and the
// idempotency key is shown hashed by the reports (see docs/attributes.md).
