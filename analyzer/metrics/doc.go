// Package metrics publishes the live analysis as Prometheus series: physical calls, logical
// operations and amplification per dependency and per (caller service, dependency), attempts by
// outcome, findings by detector and severity - the figures, names and labels of the OpenTelemetry
// Collector connector (otelcol/stormwatchconnector) as its Prometheus exporter spells them, so a
// dashboard built on one works on the other.
//
// It reads analyzer snapshots through a [Cache] that takes at most one snapshot per interval, so
// however often /metrics (or anything else sharing the cache) is asked, the analyzer's lock is
// taken a bounded number of times and ingestion does not slow down.
package metrics
