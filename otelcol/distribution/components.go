package distribution

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/forwardconnector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/nopexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/stormwatch/stormwatch/otelcol/stormwatchconnector"
)

// The modules the components come from, as builder-config.yaml names them (`components` prints
// them; TestComponentsMatchBuilderManifest checks both lists agree).
const (
	core    = " v0.161.0"
	contrib = " v0.161.0"
	ours    = "github.com/stormwatch/stormwatch/otelcol"
)

type entry[F component.Factory] struct {
	factory F
	module  string
}

func build[F component.Factory](entries ...entry[F]) (map[component.Type]F, map[component.Type]string, error) {
	fs := make([]F, len(entries))
	mods := make(map[component.Type]string, len(entries))
	for i, e := range entries {
		fs[i] = e.factory
		mods[e.factory.Type()] = e.module
	}
	m, err := otelcol.MakeFactoryMap(fs...)
	return m, mods, err
}

// Components are the factories of the distribution: the list in builder-config.yaml.
func Components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Extensions, f.ExtensionModules, err = build[extension.Factory](); err != nil {
		return f, err
	}
	if f.Receivers, f.ReceiverModules, err = build(
		entry[receiver.Factory]{otlpreceiver.NewFactory(), "go.opentelemetry.io/collector/receiver/otlpreceiver" + core},
	); err != nil {
		return f, err
	}
	if f.Processors, f.ProcessorModules, err = build(
		entry[processor.Factory]{batchprocessor.NewFactory(), "go.opentelemetry.io/collector/processor/batchprocessor" + core},
	); err != nil {
		return f, err
	}
	if f.Exporters, f.ExporterModules, err = build(
		entry[exporter.Factory]{otlpexporter.NewFactory(), "go.opentelemetry.io/collector/exporter/otlpexporter" + core},
		entry[exporter.Factory]{otlphttpexporter.NewFactory(), "go.opentelemetry.io/collector/exporter/otlphttpexporter" + core},
		entry[exporter.Factory]{debugexporter.NewFactory(), "go.opentelemetry.io/collector/exporter/debugexporter" + core},
		entry[exporter.Factory]{nopexporter.NewFactory(), "go.opentelemetry.io/collector/exporter/nopexporter" + core},
		entry[exporter.Factory]{loadbalancingexporter.NewFactory(), "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter" + contrib},
		entry[exporter.Factory]{prometheusexporter.NewFactory(), "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter" + contrib},
	); err != nil {
		return f, err
	}
	if f.Connectors, f.ConnectorModules, err = build(
		entry[connector.Factory]{forwardconnector.NewFactory(), "go.opentelemetry.io/collector/connector/forwardconnector" + core},
		entry[connector.Factory]{stormwatchconnector.NewFactory(), ours},
	); err != nil {
		return f, err
	}
	return f, nil
}
