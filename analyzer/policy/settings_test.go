package policy_test

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

// withSettings is a detector of the suite that declares settings, with their fields.
type withSettings struct {
	*analyzer.Detector
	fields []analyzer.SettingField
}

// declared lists the detectors of the suite that declare settings, in suite order.
func declared(t *testing.T) []withSettings {
	t.Helper()
	var out []withSettings
	for _, d := range suite.Default() {
		fields, err := analyzer.SettingFields(d.Settings)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if len(fields) > 0 {
			out = append(out, withSettings{d, fields})
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d detectors declare settings; the suite's thresholds are its detectors' own", len(out))
	}
	return out
}

// other is a value of f's type that differs from cur and lies within f's bounds.
func other(t *testing.T, f analyzer.SettingField, cur reflect.Value) reflect.Value {
	t.Helper()
	var candidates []any
	switch {
	case f.Type == reflect.TypeFor[time.Duration]():
		d := time.Duration(cur.Int())
		candidates = []any{d + time.Millisecond, d * 2, d - time.Millisecond, d / 2}
	case f.Type.Kind() == reflect.Int:
		n := int(cur.Int())
		candidates = []any{n + 1, n - 1, n * 2}
	case f.Type.Kind() == reflect.Float64:
		x := cur.Float()
		candidates = []any{x + 0.125, x - 0.125, x * 2, x / 2}
	case f.Type.Kind() == reflect.Bool:
		candidates = []any{!cur.Bool()}
	default:
		candidates = []any{cur.String() + "-other"}
	}
	for _, c := range candidates {
		v := reflect.ValueOf(c).Convert(f.Type)
		if !v.Equal(cur) && f.Check(v) == "" {
			return v
		}
	}
	t.Fatalf("%s: no value other than %v within its bounds", f.Key, cur)
	return reflect.Value{}
}

// yamlValue writes v as a policy file does: durations with their unit, strings quoted.
func yamlValue(f analyzer.SettingField, v reflect.Value) string {
	if v.Kind() == reflect.String {
		return strconv.Quote(v.String())
	}
	return f.Format(v)
}

// configured parses src for the suite and returns the detector Configure runs under the name.
func configured(t *testing.T, src, name string) *analyzer.Detector {
	t.Helper()
	p, err := policy.Parse("p.yaml", []byte(src), suite.Default())
	if err != nil {
		t.Fatalf("%s\n%v", src, err)
	}
	detectors, settings := suite.Default(), analyzer.RunSettings{}
	policy.Configure(&detectors, &settings, p, policy.Offline)
	for _, d := range detectors {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("%s not configured", name)
	return nil
}

// Every declared setting of every detector can be written in a policy file and reaches the
// detector Configure runs: each set to another value than its default (chosen from the field's
// type and bounds, so a new setting is covered without a line here), and each written at its
// default, which reads back as the defaults.
func TestEverySettingRoundTrips(t *testing.T) {
	for _, ds := range declared(t) {
		d, fields := ds.Detector, ds.fields
		t.Run(d.Name, func(t *testing.T) {
			defaults := reflect.ValueOf(d.Settings).Elem()
			want := reflect.New(defaults.Type()).Elem()
			want.Set(defaults)
			var changed, same strings.Builder
			fmt.Fprintf(&changed, "detectors:\n  %s:\n", d.Name)
			fmt.Fprintf(&same, "detectors:\n  %s:\n", d.Name)
			for _, f := range fields {
				v := other(t, f, defaults.Field(f.Index))
				want.Field(f.Index).Set(v)
				fmt.Fprintf(&changed, "    %s: %s\n", f.Key, yamlValue(f, v))
				fmt.Fprintf(&same, "    %s: %s\n", f.Key, yamlValue(f, defaults.Field(f.Index)))
			}

			got := configured(t, changed.String(), d.Name)
			if !reflect.DeepEqual(got.Settings, want.Addr().Interface()) {
				t.Errorf("policy\n%s\nconfigured %+v, want %+v", changed.String(), got.Settings, want.Interface())
			}
			if got == d || got.Settings == d.Settings {
				t.Errorf("Configure must run a copy, not change the suite's detector")
			}
			if !reflect.DeepEqual(reflect.ValueOf(d.Settings).Elem().Interface(), defaults.Interface()) {
				t.Errorf("the suite's defaults changed: %+v", d.Settings)
			}

			if got := configured(t, same.String(), d.Name); !reflect.DeepEqual(got.Settings, d.Settings) {
				t.Errorf("defaults written out read back as %+v, want %+v", got.Settings, d.Settings)
			}
		})
	}
}

// A key the file leaves out keeps the detector's default, and the file's position of each key it
// writes is kept.
func TestSettingsLeftOutKeepTheirDefaults(t *testing.T) {
	src := "detectors:\n  retry-amplification:\n    criticalFactor: 27\n"
	got := configured(t, src, "retry-amplification")
	fields, _ := analyzer.SettingFields(got.Settings)
	v := reflect.ValueOf(got.Settings).Elem()
	def := reflect.ValueOf(mustDetector(t, "retry-amplification").Settings).Elem()
	for _, f := range fields {
		switch f.Key {
		case "criticalFactor":
			if v.Field(f.Index).Int() != 27 {
				t.Errorf("criticalFactor = %v", v.Field(f.Index))
			}
		default:
			if !v.Field(f.Index).Equal(def.Field(f.Index)) {
				t.Errorf("%s = %v, want the default %v", f.Key, v.Field(f.Index), def.Field(f.Index))
			}
		}
	}
	p, err := policy.Parse("p.yaml", []byte(src), suite.Default())
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Detector("retry-amplification"); len(s.Set) != 1 || s.Set["criticalFactor"].String() != "p.yaml:3:5" {
		t.Errorf("positions %v", s.Set)
	}
	// Without a policy the detector is the suite's, defaults and all.
	detectors, settings := suite.Default(), analyzer.RunSettings{}
	policy.Configure(&detectors, &settings, nil, policy.Offline)
	for i, d := range detectors {
		if d != suite.Default()[i] {
			t.Errorf("%s copied without a policy", d.Name)
		}
	}
}

func mustDetector(t *testing.T, name string) *analyzer.Detector {
	t.Helper()
	d, ok := suite.ByName(name)
	if !ok {
		t.Fatalf("no detector %s", name)
	}
	return d
}

// A detector that declares its settings badly cannot be configured: the policy says so at the
// detector's key rather than ignoring what the file writes.
func TestBadlyDeclaredSettingsAreRefused(t *testing.T) {
	bad := &analyzer.Detector{Name: "home-made", Settings: &struct {
		N int `policy:"n"`
	}{}}
	_, err := policy.Parse("p.yaml", []byte("detectors:\n  home-made: {n: 1}\n"), []*analyzer.Detector{bad})
	want := `p.yaml:2:3: detectors.home-made: the detector's settings cannot be configured: struct { N int "policy:\"n\"" }.N: no doc tag (one line for the docs)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

// Parse knows only the detectors it is given: a policy for another suite's detector is refused.
func TestParseKnowsOnlyTheDetectorsGiven(t *testing.T) {
	_, err := policy.Parse("p.yaml", []byte("detectors:\n  no-backoff: {minPause: 2ms}\n"), nil)
	want := `p.yaml:2:3: detectors: unknown key "no-backoff" (known keys: window)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}
