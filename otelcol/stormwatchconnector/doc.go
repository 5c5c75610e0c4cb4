// Package stormwatchconnector is the stormwatch analyzer as an OpenTelemetry Collector connector:
// traces in, retry-amplification metrics and one log record per finding out.
//
// It lets stormwatch's analysis run inside collectors that are already deployed, sharded by trace ID
// with the contrib loadbalancing exporter in front (docs/scale.md): each backend holds whole traces,
// settles and analyzes them exactly as the single binary does (package analyzer, unchanged), and
// emits cumulative counters that a metrics backend sums across backends. The connector does the
// timing the analyzer leaves to its caller: a ticker drives the settle period, another the emission.
package stormwatchconnector
