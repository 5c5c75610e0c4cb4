// Package reference is a resilient HTTP client that does resilience right and shows, in its
// OpenTelemetry spans, what a compliant trace looks like.
//
// A Go service adopts it by changing its transport:
//
//	rt, err := reference.New(reference.Config{Service: "orders"},
//		reference.WithTracerProvider(tp), reference.WithMeterProvider(mp))
//	httpClient := &http.Client{Transport: rt}
//
// Every logical call gets one deadline for all its attempts and pauses, a retry policy that only
// repeats transient failures of requests that are safe to repeat, full-jitter exponential backoff
// that honours Retry-After within the deadline, a retry budget shared by the whole client, a
// circuit breaker per origin whose state lives in a [Runtime] shared by every client of the process,
// an optional per-origin bulkhead, hedging for reads, and a fallback hook. One INTERNAL span per
// logical call and one CLIENT span per physical attempt carry the stable HTTP semantic conventions
// and the resilience.* attributes of docs/attributes.md; the keys come from package spans so the
// client and the analyzer cannot drift apart.
//
// [Handler] is the server half: it reads the propagated deadline and cancels the request context
// at it, so downstream work stops when the caller has given up.
//
// Configuration is the [Config] struct, whose zero value is safe; functional options carry only the
// injected things (tracer and meter providers, clock, random source, base transport, runtime).
package reference
