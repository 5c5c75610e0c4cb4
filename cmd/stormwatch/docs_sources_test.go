package main

import (
	"os"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// The Jaeger configuration docs/sources.md gives to copy is valid YAML with what stormwatch needs
// of it: the query service on loopback port 16686, OTLP in on ports that are not stormwatch's own,
// and Jaeger's own telemetry off (otherwise it exports its traces to a stormwatch on 4317).
func TestDocsJaegerConfigToCopy(t *testing.T) {
	b, err := os.ReadFile("../../docs/sources.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# jaeger.yaml")
	if !ok {
		t.Fatal("docs/sources.md has no jaeger.yaml block")
	}
	block, _, _ := strings.Cut("# jaeger.yaml"+rest, "```")
	var cfg struct {
		Service struct {
			Extensions []string `yaml:"extensions"`
			Telemetry  map[string]struct {
				Level string `yaml:"level"`
			} `yaml:"telemetry"`
		} `yaml:"service"`
		Extensions struct {
			Query struct {
				EnableTracing *bool `yaml:"enable_tracing"`
				HTTP          struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"http"`
			} `yaml:"jaeger_query"`
		} `yaml:"extensions"`
		Receivers struct {
			OTLP struct {
				Protocols map[string]struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
	}
	dec := yaml.NewDecoder(strings.NewReader(block))
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("the jaeger.yaml block is not valid YAML: %v\n%s", err, block)
	}
	if cfg.Extensions.Query.HTTP.Endpoint != "127.0.0.1:16686" {
		t.Errorf("query endpoint %q, want 127.0.0.1:16686", cfg.Extensions.Query.HTTP.Endpoint)
	}
	if q := cfg.Extensions.Query.EnableTracing; q == nil || *q {
		t.Error("jaeger_query.enable_tracing must be false")
	}
	for _, sig := range []string{"metrics", "traces"} {
		if cfg.Service.Telemetry[sig].Level != "none" {
			t.Errorf("service.telemetry.%s.level %q, want none", sig, cfg.Service.Telemetry[sig].Level)
		}
	}
	for proto, p := range cfg.Receivers.OTLP.Protocols {
		if !strings.HasPrefix(p.Endpoint, "127.0.0.1:") || strings.HasSuffix(p.Endpoint, ":4317") || strings.HasSuffix(p.Endpoint, ":4318") {
			t.Errorf("otlp %s endpoint %q: want loopback, off stormwatch's 4317/4318", proto, p.Endpoint)
		}
	}
	if len(cfg.Receivers.OTLP.Protocols) != 2 || len(cfg.Service.Extensions) != 2 {
		t.Errorf("want OTLP over grpc and http and the two extensions: %+v", cfg)
	}
}
