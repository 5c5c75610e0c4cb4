// Package jaeger reads traces from a running Jaeger's query service over HTTP, so stormwatch can
// analyze traces where a team already keeps them, without re-pointing any exporter.
//
// A [Client] searches one service's recent traces through the OTLP query API (/api/v3/traces)
// when the Jaeger has it and through the older JSON API (/api/traces) otherwise, and returns them
// in the compact span form, one batch per trace. It authenticates with a bearer token or basic
// auth, verifies TLS against a given CA, bounds each request by a timeout and each response by a
// size, and retries a failed request a few times with jittered, growing pauses, so a struggling
// Jaeger is not met with a retry storm of stormwatch's own. A [Follower] polls for new traces and
// hands each one on once.
package jaeger
