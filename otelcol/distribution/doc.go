// Package distribution is the otelcol-stormwatch collector distribution: the component factories
// of builder-config.yaml (otlp receiver and exporters, the contrib loadbalancing and prometheus
// exporters, the debug exporter, the forward and stormwatch connectors) and the settings that turn
// them into a collector. cmd/otelcol-stormwatch wraps it in a main; the end-to-end tests start
// collectors from it in-process.
package distribution
