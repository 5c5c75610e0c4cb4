package analyzer

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"time"
)

// RunSettings are the values every detector of a run shares, as opposed to a detector's own
// thresholds (Detector.Settings): they describe the run, not one check. The clock skew tolerated
// between services is a property of the traced system that every timing comparison must agree
// on. Any other run-wide value is declared, typed, by the package that gives it meaning (a
// RunValue: the policy package's policy and live window, which policy.Configure sets once per
// run and the detectors that follow a policy read). The zero value means the documented
// defaults and no RunValue set.
type RunSettings struct {
	// SkewTolerance is the clock skew tolerated between services. 0 means DefaultSkewTolerance.
	SkewTolerance time.Duration

	values map[any]any // by *RunValue[T], a T each (see RunValue)
}

// RunValue names one value of type T that a driver sets for a whole run (RunValue.Set) and
// detectors read (RunValue.Get) from RunSettings: the package whose meaning it carries declares
// it, as a variable, so that the framework lists nothing that one package or detector needs.
// Make one with NewRunValue; each is a key of its own, whatever its name.
type RunValue[T any] struct {
	name string
}

// NewRunValue declares a run value of type T. name says what it is, for messages: "policy".
func NewRunValue[T any](name string) *RunValue[T] { return &RunValue[T]{name: name} }

// Set makes x the run's value of v in s. It changes s alone: a copy of s made before keeps what
// it had (the values are copied on write, which a driver does once per run).
func (v *RunValue[T]) Set(s *RunSettings, x T) {
	m := make(map[any]any, len(s.values)+1)
	maps.Copy(m, s.values)
	m[v] = x
	s.values = m
}

// Get is the run's value of v in s, and whether one was set.
func (v *RunValue[T]) Get(s RunSettings) (T, bool) {
	x, ok := s.values[v].(T)
	return x, ok
}

// String is the name v was declared with.
func (v *RunValue[T]) String() string { return v.name }

// Skew is the SkewTolerance in nanoseconds with its default.
func (s RunSettings) Skew() int64 {
	if s.SkewTolerance > 0 {
		return int64(s.SkewTolerance)
	}
	return int64(DefaultSkewTolerance)
}

// SettingsOf is a copy of the running detector's own settings (pass.Detector.Settings, which
// must be a *T): the configured values when a policy set some of them, the declared defaults
// otherwise. A copy, so that no detector can change the defaults every run shares; settings hold
// only numbers, durations, booleans and strings, so it is cheap. Asking for a type the detector
// does not declare is a bug in the detector: it panics, which the analyzer reports as that
// detector's error.
func SettingsOf[T any](pass *Pass) T {
	s, ok := pass.Detector.Settings.(*T)
	if !ok || s == nil {
		panic(fmt.Sprintf("detector %s: settings are %T, not %T", pass.Detector.Name, pass.Detector.Settings, (*T)(nil)))
	}
	return *s
}

// SettingField is one field of a detector's declared settings, as its tags describe it (see
// Detector.Settings).
type SettingField struct {
	// Key is the field's name in a policy file (the policy tag).
	Key string
	// Doc is one line saying what the value does (the doc tag).
	Doc string
	// Index is the field's index in the settings struct.
	Index int
	// Type is the field's type: time.Duration, int, float64, bool or string.
	Type reflect.Type
	// Min and Max are the bounds written in the min and max tags ("" for none), in the field's
	// own syntax: 1, 0.5, 10ms.
	Min, Max string

	min, max reflect.Value
}

var durationType = reflect.TypeFor[time.Duration]()

// SettingFields describes the fields of settings, a detector's Settings: a pointer to a struct
// whose exported fields each carry a policy tag (the key, unique, neither "enabled" nor
// "severity", which every detector takes), a doc tag, and optional min and max tags on numbers.
// Its error names what is wrong with the declaration. nil settings declare no field.
func SettingFields(settings any) ([]SettingField, error) {
	if settings == nil {
		return nil, nil
	}
	v := reflect.ValueOf(settings)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || v.IsNil() {
		return nil, fmt.Errorf("settings must be a non-nil pointer to a struct, got %T", settings)
	}
	t := v.Elem().Type()
	var out []SettingField
	seen := map[string]string{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			return nil, fmt.Errorf("%s.%s: unexported: every field of a detector's settings is a policy key", t, sf.Name)
		}
		f := SettingField{Key: sf.Tag.Get("policy"), Doc: sf.Tag.Get("doc"), Index: i, Type: sf.Type,
			Min: sf.Tag.Get("min"), Max: sf.Tag.Get("max")}
		switch {
		case f.Key == "":
			return nil, fmt.Errorf("%s.%s: no policy tag (its key in a policy file)", t, sf.Name)
		case f.Key == "enabled" || f.Key == "severity":
			return nil, fmt.Errorf("%s.%s: policy key %q is every detector's own", t, sf.Name, f.Key)
		case seen[f.Key] != "":
			return nil, fmt.Errorf("%s.%s: policy key %q already names %s", t, sf.Name, f.Key, seen[f.Key])
		case f.Doc == "":
			return nil, fmt.Errorf("%s.%s: no doc tag (one line for the docs)", t, sf.Name)
		}
		seen[f.Key] = sf.Name
		numeric := false
		switch {
		case sf.Type == durationType, sf.Type.Kind() == reflect.Int, sf.Type.Kind() == reflect.Float64:
			numeric = true
		case sf.Type.Kind() == reflect.Bool, sf.Type.Kind() == reflect.String:
		default:
			return nil, fmt.Errorf("%s.%s: type %s is not one a policy can set (time.Duration, int, float64, bool, string)", t, sf.Name, sf.Type)
		}
		if !numeric && (f.Min != "" || f.Max != "") {
			return nil, fmt.Errorf("%s.%s: min and max bound numbers and durations only", t, sf.Name)
		}
		var err error
		if f.min, err = parseBound(sf.Type, f.Min); err != nil {
			return nil, fmt.Errorf("%s.%s: min tag: %v", t, sf.Name, err)
		}
		if f.max, err = parseBound(sf.Type, f.Max); err != nil {
			return nil, fmt.Errorf("%s.%s: max tag: %v", t, sf.Name, err)
		}
		if f.min.IsValid() && f.max.IsValid() && less(f.max, f.min) {
			return nil, fmt.Errorf("%s.%s: max %s is below min %s", t, sf.Name, f.Max, f.Min)
		}
		if msg := f.Check(v.Elem().Field(i)); msg != "" {
			return nil, fmt.Errorf("%s.%s: the default %s %s", t, sf.Name, f.Format(v.Elem().Field(i)), msg)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseBound(t reflect.Type, s string) (reflect.Value, error) {
	if s == "" {
		return reflect.Value{}, nil
	}
	v := reflect.New(t).Elem()
	switch {
	case t == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return v, err
		}
		v.SetInt(int64(d))
	case t.Kind() == reflect.Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return v, err
		}
		v.SetInt(n)
	default:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return v, err
		}
		v.SetFloat(f)
	}
	return v, nil
}

func less(a, b reflect.Value) bool {
	if a.Kind() == reflect.Float64 {
		return a.Float() < b.Float()
	}
	return a.Int() < b.Int()
}

// Check says what v, a value of the field, breaks: "" when it is within the bounds, otherwise a
// phrase such as "must be at least 1" or "must not be negative".
func (f SettingField) Check(v reflect.Value) string {
	lo, hi := f.min.IsValid() && less(v, f.min), f.max.IsValid() && less(f.max, v)
	if v.Kind() == reflect.Float64 && v.Float() != v.Float() && (f.min.IsValid() || f.max.IsValid()) {
		lo = true // NaN is in no range
	}
	switch {
	case !lo && !hi:
		return ""
	case f.min.IsValid() && f.max.IsValid():
		if f.Type.Kind() == reflect.Float64 && f.min.Float() == 0 && f.max.Float() == 1 {
			return "must be a ratio between 0 and 1"
		}
		return fmt.Sprintf("must be between %s and %s", f.Min, f.Max)
	case lo && f.min.IsValid() && f.min.IsZero():
		return "must not be negative"
	case lo && f.min.IsValid():
		return "must be at least " + f.Min
	default:
		return "must be at most " + f.Max
	}
}

// Format writes v, a value of the field, as a policy file would: 5ms, 0.05, 8.
func (f SettingField) Format(v reflect.Value) string {
	switch {
	case f.Type == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return fmt.Sprint(v.Interface())
	}
}

// DefaultSkewTolerance is how far a child may start before its parent, or a callee's clock may
// run ahead of its caller's, before the analyzer believes the timestamps over the tree.
const DefaultSkewTolerance = 5 * time.Millisecond
