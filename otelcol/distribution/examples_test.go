package distribution

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/otelcol"
)

// TestExamplesValidate checks every example config of docs/scale.md the way
// `otelcol-stormwatch validate --config FILE` does: every component known, every config valid.
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	t.Setenv("OTLP_ENDPOINT", "https://otlp.example.com")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			col, err := otelcol.NewCollector(Settings("test", "file:"+f))
			if err != nil {
				t.Fatal(err)
			}
			if err := col.DryRun(context.Background()); err != nil {
				t.Fatalf("%s does not validate: %v", f, err)
			}
		})
	}
}

// TestCollectorRefusesBadConnectorConfig: a mistake in the connector's section stops the
// collector at startup, naming the component and the field.
func TestCollectorRefusesBadConnectorConfig(t *testing.T) {
	for _, tc := range []struct{ name, conf, want string }{
		{"negative settle", "settle: -1s", "settle must not be negative"},
		{"unknown key", "setle: 1s", "setle"},
		{"missing policy", "policy: /nonexistent/policy.yaml", "policy /nonexistent/policy.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
connectors:
  stormwatch:
    ` + tc.conf + `
exporters:
  debug:
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [stormwatch]
    metrics:
      receivers: [stormwatch]
      exporters: [debug]
` + quiet
			col, err := otelcol.NewCollector(Settings("test", configFile(t, "bad", conf)))
			if err != nil {
				t.Fatal(err)
			}
			err = col.DryRun(context.Background())
			if err == nil {
				t.Fatal("the collector accepted the config")
			}
			if !strings.Contains(err.Error(), "stormwatch") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q should name the connector and say %q", err, tc.want)
			}
		})
	}
}
