package stormwatchconnector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	yaml "go.yaml.in/yaml/v3"

	"github.com/stormwatch/stormwatch/analyzer/policy"
)

func TestFactoryMatchesMetadata(t *testing.T) {
	data, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Type   string `yaml:"type"`
		Status struct {
			Class     string              `yaml:"class"`
			Stability map[string][]string `yaml:"stability"`
		} `yaml:"status"`
	}
	if err := yaml.Unmarshal(data, &md); err != nil {
		t.Fatalf("metadata.yaml: %v", err)
	}
	f := NewFactory()
	if f.Type().String() != md.Type || md.Type != "stormwatch" || md.Status.Class != "connector" {
		t.Fatalf("factory type %q, metadata type %q class %q", f.Type(), md.Type, md.Status.Class)
	}
	declared := map[string]string{}
	for level, pairs := range md.Status.Stability {
		for _, p := range pairs {
			declared[p] = level
		}
	}
	for pair, got := range map[string]component.StabilityLevel{
		"traces_to_metrics": f.TracesToMetricsStability(),
		"traces_to_logs":    f.TracesToLogsStability(),
	} {
		if want := declared[pair]; !strings.EqualFold(got.String(), want) {
			t.Errorf("%s: factory says %s, metadata.yaml says %q", pair, got, want)
		}
	}
	if got := f.TracesToTracesStability(); got != component.StabilityLevelUndefined {
		t.Errorf("traces_to_traces should be unsupported, got %s", got)
	}
}

func TestDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	if err := componenttest.CheckConfigStruct(cfg); err != nil {
		t.Fatal(err)
	}
	if err := confmap.Validate(cfg); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	c := cfg.(*Config)
	if c.settle() != 5*time.Second || c.tick() != time.Second || c.emit() != 10*time.Second {
		t.Fatalf("defaults: settle %s tick %s emit %s", c.settle(), c.tick(), c.emit())
	}
	short := &Config{Settle: 100 * time.Millisecond}
	if short.tick() != 50*time.Millisecond {
		t.Errorf("a 100ms settle should tick every 50ms by default, got %s", short.tick())
	}
}

// loadConfig reads the connector's section as the collector does: YAML, then the typed config,
// then Validate. A user sees the returned message when the collector refuses to start.
func loadConfig(t *testing.T, text string) (*Config, error) {
	t.Helper()
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := confmap.NewFromStringMap(raw).Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestConfigFromYAML(t *testing.T) {
	cfg, err := loadConfig(t, "settle: 2s\ntick_interval: 250ms\nemit_interval: 30s\nmax_spans: 100000\nmax_trace_spans: -1\nwindow_interval: 1m\nall_attributes: true\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Settle: 2 * time.Second, TickInterval: 250 * time.Millisecond, EmitInterval: 30 * time.Second,
		MaxSpans: 100000, MaxTraceSpans: -1, WindowInterval: time.Minute, AllAttributes: true}
	if *cfg != want {
		t.Fatalf("got %+v\nwant %+v", *cfg, want)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "setle: 2s\n", []string{"setle"}},
		{"not a duration", "settle: soon\n", []string{"settle", "invalid duration"}},
		{"negative settle", "settle: -1s\n", []string{"settle must not be negative, got -1s"}},
		{"negative emit", "emit_interval: -5s\n", []string{"emit_interval must not be negative"}},
		{"tick too short", "tick_interval: 1ms\n", []string{"tick_interval must be at least 10ms, got 1ms"}},
		{"tick beyond settle", "settle: 1s\ntick_interval: 2s\n", []string{"tick_interval (2s) must not exceed settle (1s)"}},
		{"emit shorter than tick", "tick_interval: 2s\nemit_interval: 1s\n", []string{"emit_interval (1s) must not be shorter than tick_interval (2s)"}},
		{"bad bound", "max_spans: -5\n", []string{"max_spans must be positive, or -1 for no bound, got -5"}},
		{"every error at once", "settle: -1s\nmax_findings: -2\nmax_trace_spans: -3\n", []string{"settle must not be negative", "max_findings", "max_trace_spans"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(t, tc.yaml)
			if err == nil {
				t.Fatalf("config %q accepted", tc.yaml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestConfigPolicyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, policy.Example, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(t, "policy: "+good+"\n"); err != nil {
		t.Fatalf("the example policy was refused: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nbogus_key: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(t, "policy: "+bad+"\n")
	if err == nil || !strings.Contains(err.Error(), bad+":2:") || !strings.Contains(err.Error(), "bogus_key") {
		t.Fatalf("a bad policy should be refused at startup with file:line and the key, got %v", err)
	}
}
