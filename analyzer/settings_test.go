package analyzer_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

type goodSettings struct {
	Pause   time.Duration `policy:"pause" doc:"a pause" min:"0s" max:"1m"`
	Samples int           `policy:"samples" doc:"how many" min:"1"`
	Ratio   float64       `policy:"ratio" doc:"a share" min:"0" max:"1"`
	Strict  bool          `policy:"strict" doc:"whether to be strict"`
	Label   string        `policy:"label" doc:"a name"`
}

func TestSettingFieldsDescribeTheTags(t *testing.T) {
	fields, err := analyzer.SettingFields(&goodSettings{Samples: 3, Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range fields {
		keys = append(keys, f.Key)
	}
	if strings.Join(keys, " ") != "pause samples ratio strict label" {
		t.Errorf("keys %v", keys)
	}
	if f := fields[0]; f.Doc != "a pause" || f.Min != "0s" || f.Max != "1m" || f.Type != reflect.TypeFor[time.Duration]() || f.Index != 0 {
		t.Errorf("pause: %+v", f)
	}
	checks := []struct {
		field int
		v     any
		want  string
	}{
		{0, -time.Millisecond, "must be between 0s and 1m"},
		{0, time.Minute, ""},
		{1, 0, "must be at least 1"},
		{1, math.MaxInt, ""},
		{2, 1.5, "must be a ratio between 0 and 1"},
		{2, 0.0, ""},
	}
	for _, c := range checks {
		if got := fields[c.field].Check(reflect.ValueOf(c.v)); got != c.want {
			t.Errorf("%s = %v: Check %q, want %q", fields[c.field].Key, c.v, got, c.want)
		}
	}
	if got := fields[0].Format(reflect.ValueOf(5 * time.Millisecond)); got != "5ms" {
		t.Errorf("Format = %q", got)
	}
	if fields, err := analyzer.SettingFields(nil); fields != nil || err != nil {
		t.Errorf("nil settings: %v, %v", fields, err)
	}
}

// A declaration a policy could not set, or could not set safely, is refused with the field named.
func TestSettingFieldsRejectBadDeclarations(t *testing.T) {
	cases := []struct {
		name     string
		settings any
		want     string
	}{
		{"not a pointer", goodSettings{}, "must be a non-nil pointer to a struct, got analyzer_test.goodSettings"},
		{"nil pointer", (*goodSettings)(nil), "must be a non-nil pointer to a struct"},
		{"no policy tag", &struct {
			N int `doc:"d"`
		}{}, "N: no policy tag"},
		{"no doc tag", &struct {
			N int `policy:"n"`
		}{}, "N: no doc tag"},
		{"reserved key", &struct {
			On bool `policy:"enabled" doc:"d"`
		}{}, `On: policy key "enabled" is every detector's own`},
		{"repeated key", &struct {
			A int `policy:"n" doc:"d"`
			B int `policy:"n" doc:"d"`
		}{}, `B: policy key "n" already names A`},
		{"unexported", &struct {
			n int
		}{}, "n: unexported"},
		{"unsupported type", &struct {
			L []string `policy:"l" doc:"d"`
		}{}, "L: type []string is not one a policy can set"},
		{"bounds on a bool", &struct {
			B bool `policy:"b" doc:"d" min:"1"`
		}{}, "B: min and max bound numbers and durations only"},
		{"bad bound", &struct {
			D time.Duration `policy:"d" doc:"d" min:"5"`
		}{}, "D: min tag: time: missing unit in duration"},
		{"max below min", &struct {
			N int `policy:"n" doc:"d" min:"2" max:"1"`
		}{N: 2}, "N: max 1 is below min 2"},
		{"default out of bounds", &struct {
			R float64 `policy:"r" doc:"d" min:"0" max:"1"`
		}{R: 2}, "R: the default 2 must be a ratio between 0 and 1"},
	}
	for _, c := range cases {
		_, err := analyzer.SettingFields(c.settings)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestSettingsOf(t *testing.T) {
	own := &goodSettings{Samples: 7}
	d := &analyzer.Detector{Name: "x", Settings: own}
	got := analyzer.SettingsOf[goodSettings](&analyzer.Pass{Detector: d})
	if got != *own {
		t.Errorf("SettingsOf = %+v, want the detector's %+v", got, *own)
	}
	// A copy: a detector writing to what it was given changes nothing for the next run.
	got.Samples = 99
	if own.Samples != 7 {
		t.Errorf("writing to SettingsOf's result changed the detector's settings to %+v", *own)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "detector y: settings are <nil>, not *analyzer_test.goodSettings") {
			t.Errorf("panic %v", p)
		}
	}()
	analyzer.SettingsOf[goodSettings](&analyzer.Pass{Detector: &analyzer.Detector{Name: "y"}})
}

// TestRunValues: a package's run value is read back with its type; values of the same type
// declared twice are two keys; an unset value reads as its zero and false; and Set changes only
// the settings it is given, not a copy made before (a driver's settings are copied into every
// pass).
func TestRunValues(t *testing.T) {
	limit := analyzer.NewRunValue[time.Duration]("limit")
	other := analyzer.NewRunValue[time.Duration]("other")
	names := analyzer.NewRunValue[[]string]("names")
	var s analyzer.RunSettings
	if v, ok := limit.Get(s); ok || v != 0 {
		t.Fatalf("unset: %v, %v", v, ok)
	}
	limit.Set(&s, time.Minute)
	names.Set(&s, []string{"a"})
	before := s
	limit.Set(&s, time.Hour)
	if v, ok := limit.Get(s); !ok || v != time.Hour {
		t.Errorf("limit = %v, %v, want 1h", v, ok)
	}
	if v, ok := limit.Get(before); !ok || v != time.Minute {
		t.Errorf("the copy made before the second Set reads %v, %v, want 1m", v, ok)
	}
	if v, ok := other.Get(s); ok {
		t.Errorf("a value declared apart reads %v from another's", v)
	}
	if v, ok := names.Get(s); !ok || len(v) != 1 || v[0] != "a" {
		t.Errorf("names = %v, %v", v, ok)
	}
	if limit.String() != "limit" {
		t.Errorf("String = %q", limit.String())
	}
}
