package distribution

import (
	"github.com/spf13/cobra"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// BuildInfo names the distribution in the collector's own telemetry and --version.
func BuildInfo(version string) component.BuildInfo {
	return component.BuildInfo{
		Command:     "otelcol-stormwatch",
		Description: "OpenTelemetry Collector with the stormwatch retry-storm connector",
		Version:     version,
	}
}

// Settings are the collector settings for configs given as URIs ("file:backend.yaml",
// "yaml:receivers: ...", "env:VAR"), the schemes the collector's own distributions accept.
func Settings(version string, uris ...string) otelcol.CollectorSettings {
	return otelcol.CollectorSettings{
		BuildInfo: BuildInfo(version),
		Factories: Components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs: uris,
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
				DefaultScheme: "file",
			},
		},
	}
}

// NewCommand is the collector's standard command line (--config, validate, components).
func NewCommand(version string) *cobra.Command {
	return otelcol.NewCommand(Settings(version))
}
