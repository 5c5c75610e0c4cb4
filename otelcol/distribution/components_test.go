package distribution

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	yaml "go.yaml.in/yaml/v3"
)

type manifestModule struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
	Path   string `yaml:"path"`
}

type manifest struct {
	Receivers  []manifestModule `yaml:"receivers"`
	Processors []manifestModule `yaml:"processors"`
	Exporters  []manifestModule `yaml:"exporters"`
	Connectors []manifestModule `yaml:"connectors"`
	Extensions []manifestModule `yaml:"extensions"`
	Providers  []manifestModule `yaml:"providers"`
	Telemetry  manifestModule   `yaml:"telemetry"`
	Replaces   []string         `yaml:"replaces"`
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	data, err := os.ReadFile("../builder-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("builder-config.yaml: %v", err)
	}
	return m
}

// renamed are the modules whose component type is no longer their package name without its kind:
// release v0.161.0 renamed them and keeps the old names as deprecated aliases.
var renamed = map[string]string{"otlpexporter": "otlp_grpc", "otlphttpexporter": "otlp_http", "loadbalancingexporter": "load_balancing"}

// typeOf is the component type a module provides, by the collector's naming convention: the
// package name without its kind (otlpreceiver -> otlp, debugexporter -> debug).
func typeOf(mod manifestModule, kind string) string {
	imp := mod.Import
	if imp == "" {
		imp, _, _ = strings.Cut(mod.GoMod, " ")
	}
	pkg := imp[strings.LastIndex(imp, "/")+1:]
	if t, ok := renamed[pkg]; ok {
		return t
	}
	return strings.TrimSuffix(pkg, kind)
}

// names are the canonical types of a factory map (MakeFactoryMap also files each factory under
// its deprecated alias, e.g. otlp for otlp_grpc).
func names[T component.Factory](m map[component.Type]T) []string {
	var out []string
	for k, f := range m {
		if f.Type() == k {
			out = append(out, k.String())
		}
	}
	slices.Sort(out)
	return out
}

func manifestNames(mods []manifestModule, kind string) []string {
	var out []string
	for _, m := range mods {
		out = append(out, typeOf(m, kind))
	}
	slices.Sort(out)
	return out
}

// TestComponentsMatchBuilderManifest keeps the `go build` distribution and the builder's in step:
// the same components, and every collector module at the version go.mod resolves.
func TestComponentsMatchBuilderManifest(t *testing.T) {
	m := readManifest(t)
	f, err := Components()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind      string
		got, want []string
	}{
		{"receiver", names(f.Receivers), manifestNames(m.Receivers, "receiver")},
		{"processor", names(f.Processors), manifestNames(m.Processors, "processor")},
		{"exporter", names(f.Exporters), manifestNames(m.Exporters, "exporter")},
		{"connector", names(f.Connectors), manifestNames(m.Connectors, "connector")},
		{"extension", names(f.Extensions), manifestNames(m.Extensions, "extension")},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%ss: Components() has %v, builder-config.yaml has %v", c.kind, c.got, c.want)
		}
	}
	// The module each component is listed under is the manifest's.
	mods := map[string]string{}
	for kind, ms := range map[string]map[component.Type]string{"receiver": f.ReceiverModules, "processor": f.ProcessorModules,
		"exporter": f.ExporterModules, "connector": f.ConnectorModules} {
		for typ, mod := range ms {
			mods[kind+"/"+typ.String()] = mod
		}
	}
	for kind, list := range map[string][]manifestModule{"receiver": m.Receivers, "processor": m.Processors, "exporter": m.Exporters, "connector": m.Connectors} {
		for _, mod := range list {
			want := mod.GoMod
			if mod.Path != "" {
				want, _, _ = strings.Cut(mod.GoMod, " ") // built from the directory: no version
			}
			if got := mods[kind+"/"+typeOf(mod, kind)]; got != want {
				t.Errorf("%s %s: Components() names module %q, builder-config.yaml %q", kind, typeOf(mod, kind), got, want)
			}
		}
	}
	for _, want := range []string{"otlp_grpc", "load_balancing", "prometheus", "debug"} {
		if _, ok := f.Exporters[component.MustNewType(want)]; !ok {
			t.Errorf("the distribution lacks the %s exporter", want)
		}
	}

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Concat(m.Receivers, m.Processors, m.Exporters, m.Connectors, m.Extensions, m.Providers, []manifestModule{m.Telemetry})
	release := regexp.MustCompile(`^(v0\.161\.0|v1\.67\.0)$`)
	for _, mod := range all {
		path, version, _ := strings.Cut(mod.GoMod, " ")
		if mod.Path != "" {
			continue // this repository's own module, built from its directory
		}
		if !release.MatchString(version) {
			t.Errorf("%s is at %s: every collector module must come from release v0.161.0 (core v1.67.0)", path, version)
		}
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + ` ` + regexp.QuoteMeta(version) + `\b`).Match(gomod) {
			t.Errorf("go.mod does not resolve %s at %s, as builder-config.yaml asks", path, version)
		}
	}
	if !slices.ContainsFunc(m.Replaces, func(r string) bool { return strings.Contains(r, "servicediscovery v1.49.0") }) {
		t.Error("builder-config.yaml must pin servicediscovery v1.49.0 (v1.48.0 cannot be downloaded)")
	}
}
