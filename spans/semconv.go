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
	// AttrReqHeaderEnvoyAttempt is Envoy's attempt number of the request as the callee received
	// it (x-envoy-attempt-count), recorded where an instrumentation captures request headers.
	AttrReqHeaderEnvoyAttempt = "http.request.header.x-envoy-attempt-count"
	// AttrEnvoyUpstreamCluster names the cluster (the callee) on the spans Envoy itself emits.
	AttrEnvoyUpstreamCluster = "upstream_cluster"
	// AttrEnvoyUpstreamAddress is the address (host:port) of the upstream host Envoy forwarded
	// to, on its spans: loopback when a sidecar hands an inbound request to its own app.
	AttrEnvoyUpstreamAddress = "upstream_address"
	// AttrGRPCAttemptPrevious is the per-attempt span attribute of gRPC's own OpenTelemetry
	// tracing: how many attempts of the call came before this one.
	AttrGRPCAttemptPrevious = "previous-rpc-attempts"

	// Messaging: the system and the destination that name a broker that redelivers. RabbitMQ's
	// destination is its exchange (empty for the default one), so the routing key names the queue
	// there. The legacy keys are those of instrumentations on conventions before 1.21 (amqplib's).
	AttrMessagingSystem                   = "messaging.system"
	AttrMessagingDestinationName          = "messaging.destination.name"
	AttrMessagingRabbitMQRoutingKey       = "messaging.rabbitmq.destination.routing_key"
	AttrLegacyMessagingDestination        = "messaging.destination"
	AttrLegacyMessagingRabbitMQRoutingKey = "messaging.rabbitmq.routing_key"
	// How long the caller will wait, as captured request headers (gRPC's grpc-timeout, "100m";
	// Envoy's expected and per-try timeouts in milliseconds) and as Envoy tags its own spans.
	AttrReqHeaderGRPCTimeout       = "http.request.header.grpc-timeout"
	AttrGRPCMetadataTimeout        = "rpc.grpc.request.metadata.grpc-timeout"
	AttrEnvoyGRPCTimeout           = "grpc.timeout"
	AttrReqHeaderEnvoyExpectedRqMs = "http.request.header.x-envoy-expected-rq-timeout-ms"
	AttrReqHeaderEnvoyPerTryMs     = "http.request.header.x-envoy-upstream-rq-per-try-timeout-ms"
	// Outcomes in the tags of OpenTracing, Zipkin and Envoy's tracer: error ("true" or a bool),
	// Envoy's response_flags ("UT": upstream timeout) and retry.count (tries before this one),
	// gRPC status as Envoy tags it, and peer.service naming the callee.
	AttrLegacyError        = "error"
	AttrEnvoyResponseFlags = "response_flags"
	AttrEnvoyRetryCount    = "retry.count"
	AttrEnvoyGRPCStatus    = "grpc.status_code"
	AttrPeerService        = "peer.service"

	// stormwatch's resilience.* namespace: see docs/attributes.md for meanings. resilience.deadline
	// is an instant (Unix ns), as are the captured Request-Deadline header and a Retry-After
	// HTTP-date: a replay must move them with the span times, so tracefile/replay lists them
	// (timeAttrs), and a new key whose value is an instant belongs in that list too.
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

	// AttrTraceState is no attribute of the wire: the decoders keep a span's W3C trace state
	// (the OTLP span's trace_state) under this key when it carries OpenTelemetry's "ot" entry,
	// whose "th" sub-key is the probability the trace was sampled with.
	AttrTraceState = "w3c.tracestate"
	// Jaeger's sampler tags, on the root span of a sampled trace: "probabilistic" with the
	// probability, "const" with 1, "ratelimiting" with a rate (no probability).
	AttrJaegerSamplerType  = "sampler.type"
	AttrJaegerSamplerParam = "sampler.param"
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
	AttrReqHeaderEnvoyAttempt, AttrEnvoyUpstreamCluster, AttrGRPCAttemptPrevious,
	AttrMessagingSystem, AttrMessagingDestinationName, AttrMessagingRabbitMQRoutingKey,
	AttrLegacyMessagingDestination, AttrLegacyMessagingRabbitMQRoutingKey,
	AttrReqHeaderGRPCTimeout, AttrGRPCMetadataTimeout, AttrEnvoyGRPCTimeout, AttrReqHeaderEnvoyExpectedRqMs,
	AttrReqHeaderEnvoyPerTryMs, AttrLegacyError, AttrEnvoyResponseFlags, AttrEnvoyRetryCount, AttrEnvoyGRPCStatus,
	AttrPeerService,
	AttrOpID, AttrOpName, AttrAttempt, AttrAttemptKind, AttrOwner, AttrOutcome, AttrDecision, AttrStopReason,
	AttrDeadline, AttrDeadlineRemaining, AttrBackoff, AttrRetryAfter, AttrBudgetRemaining, AttrBreakerState,
	AttrFanoutWidth, AttrIdempotencyKey, AttrTerminal,
	"exception.type", "exception.message",
	AttrTraceState, AttrJaegerSamplerType, AttrJaegerSamplerParam,
	AttrEnvoyUpstreamAddress,
}

// internSlots is an open-addressing table of the well-known keys. Decoders look a key up for every
// attribute they read, so the lookup is the hot spot of decoding: hashing only the length and the
// first and last eight bytes costs a few nanoseconds where a map lookup hashes the whole key.
// It is built once and only read afterwards.
var internSlots = func() *[internTableSize]internEntry {
	var t [internTableSize]internEntry
	for _, k := range WellKnown {
		for i := internHash(k); ; i = (i + 1) & (internTableSize - 1) {
			if t[i].key == "" || t[i].key == k {
				t[i] = internEntry{key: k, code: keyCodeOf(k)}
				break
			}
		}
	}
	return &t
}()

// internEntry is a well-known key and its key byte in the packed form (keyCodeOf): a packer
// reading keys from the wire finds both in one lookup.
type internEntry struct {
	key  string
	code byte
}

// internTableSize is a power of two, several times len(WellKnown) so probe chains stay short.
const internTableSize = 256

func internHash[T string | []byte](key T) uint32 {
	n := len(key)
	var x uint64
	if n >= 8 {
		x = load64(key[:8]) ^ load64(key[n-8:])*0xff51afd7ed558ccd
	} else {
		for i := 0; i < n; i++ {
			x = x<<8 | uint64(key[i])
		}
	}
	x ^= uint64(n) * 0xc4ceb9fe1a85ec53
	x *= 0x9e3779b97f4a7c15
	return uint32(x>>56) & (internTableSize - 1)
}

func load64[T string | []byte](b T) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// Intern returns the canonical string for a well-known key and true, or "" and false. It does not
// allocate.
func Intern[T string | []byte](key T) (string, bool) {
	if e := internLookup(key); e != nil {
		return e.key, true
	}
	return "", false
}

// internLookup is key's entry in internSlots, or nil.
func internLookup[T string | []byte](key T) *internEntry {
	t := internSlots
	for i := internHash(key); ; i = (i + 1) & (internTableSize - 1) {
		e := &t[i]
		if e.key == "" {
			return nil
		}
		if len(e.key) == len(key) && e.key == string(key) {
			return e
		}
	}
}

// IsWellKnown reports whether key is in [WellKnown].
func IsWellKnown(key string) bool {
	_, ok := Intern(key)
	return ok
}

// Header attributes may carry secrets: the decoder keeps only the header keys above, and the
// idempotency key is shown hashed by the reports (see docs/attributes.md).

// samplingState reports whether a W3C trace state carries OpenTelemetry's "ot" entry, the one
// that says how the trace was sampled: only such a trace state is kept (see AttrTraceState).
// A list member begins at the start or after a comma, past optional blanks; an "ot=" anywhere
// else is part of another member's value.
func samplingState[T string | []byte](ts T) bool {
	atMember := true
	for i := 0; i < len(ts); i++ {
		switch c := ts[i]; {
		case c == ',':
			atMember = true
		case c == ' ' || c == '\t':
		case atMember && c == 'o' && i+3 <= len(ts) && ts[i+1] == 't' && ts[i+2] == '=':
			return true
		default:
			atMember = false
		}
	}
	return false
}
