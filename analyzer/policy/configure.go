package policy

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

// RunPolicy is the run value under which Configure leaves the *Policy for the policy-aware
// detectors (analyzer/passes/internal/audit reads it).
var RunPolicy = analyzer.NewRunValue[*Policy]("policy")

// RunWindow is the run value holding the live sliding window of the cross-trace detectors: 0
// offline, where they see the whole input. Read it with Window.
var RunWindow = analyzer.NewRunValue[time.Duration]("policy.window")

// Mode says how the analyzer is driven, which decides whether the cross-trace detectors look at a
// sliding window (live) or at everything (offline).
type Mode uint8

const (
	// Offline: `stormwatch analyze`; the windowed detectors judge every operation of the input once.
	Offline Mode = iota
	// Live: the collector; the windowed detectors see the operations that ended within the last
	// Window.
	Live
)

// Configure applies p to a suite's detectors and their run settings: an engine.Config's Detectors
// and Settings, which it takes apart because the detectors import this package and must not
// import the engine. Call it after the detectors are listed (suite.Default()), with p parsed for
// those detectors:
//   - detectors the policy turns off (enabled: false) are removed;
//   - a detector whose settings the policy writes runs as a copy carrying them (the fields the
//     file leaves out keep the detector's defaults), read through analyzer.SettingsOf;
//   - a severity the policy sets replaces the detector's own on every finding it reports;
//   - p itself is the run's RunPolicy, for the detectors that read the class rules (each
//     class's maxFanout, for one, is unbounded-fanout's limit for its operations);
//   - in Live mode the window bounds the cross-trace detectors.
//
// The detectors of the suite are never changed: every change is made on a copy. A nil p
// configures the built-in defaults.
func Configure(detectors *[]*analyzer.Detector, settings *analyzer.RunSettings, p *Policy, mode Mode) {
	if p == nil {
		p = Default()
	}
	kept := (*detectors)[:0:0]
	for _, d := range *detectors {
		if d == nil {
			continue
		}
		s := p.Detector(d.Name)
		if !s.Enabled {
			continue
		}
		if len(s.Set) > 0 {
			d = withSettings(d, s)
		}
		if s.Severity.Set {
			d = withSeverity(d, s.Severity.Value)
		}
		kept = append(kept, d)
	}
	*detectors = kept
	RunPolicy.Set(settings, p)
	window := time.Duration(0) // offline: everything
	if mode == Live {
		window = p.Window.Value
	}
	RunWindow.Set(settings, window)
}

// Window is the live sliding window set by Configure (RunWindow), or 0 offline (everything).
func Window(s analyzer.RunSettings) time.Duration {
	w, _ := RunWindow.Get(s)
	return w
}

// withSettings is a copy of d carrying the settings s writes, on a copy of d's own: the keys the
// file leaves out keep d's defaults. s was decoded for a detector of d's name; one whose settings
// lack a key of s, or give it another type, is a caller's mistake (a policy parsed for other
// detectors than it configures) and panics.
func withSettings(d *analyzer.Detector, s DetectorSettings) *analyzer.Detector {
	dstFields, err := analyzer.SettingFields(d.Settings)
	if err != nil || d.Settings == nil {
		panic(fmt.Sprintf("policy: detector %s cannot take the settings the policy was parsed for: %v", d.Name, err))
	}
	srcFields, err := analyzer.SettingFields(s.Values)
	if err != nil {
		panic(fmt.Sprintf("policy: detector %s: %v", d.Name, err))
	}
	dst := reflect.New(reflect.TypeOf(d.Settings).Elem())
	dst.Elem().Set(reflect.ValueOf(d.Settings).Elem())
	src := reflect.ValueOf(s.Values).Elem()
	for key := range s.Set {
		i := slices.IndexFunc(dstFields, func(f analyzer.SettingField) bool { return f.Key == key })
		j := slices.IndexFunc(srcFields, func(f analyzer.SettingField) bool { return f.Key == key })
		if i < 0 || j < 0 || dstFields[i].Type != srcFields[j].Type {
			panic(fmt.Sprintf("policy: detector %s has no setting %s of the type the policy was parsed for", d.Name, key))
		}
		dst.Elem().Field(dstFields[i].Index).Set(src.Field(srcFields[j].Index))
	}
	c := *d
	c.Settings = dst.Interface()
	return &c
}

// withSeverity is a copy of d whose findings all carry sev: detectors suggest a severity, the
// driver - here the policy - decides it.
func withSeverity(d *analyzer.Detector, sev analyzer.Severity) *analyzer.Detector {
	c := *d
	c.Severity = sev
	run := d.Run
	c.Run = func(pass *analyzer.Pass) error {
		report := pass.Report
		pass.Report = func(f analyzer.Finding) {
			f.Severity = sev
			report(f)
		}
		defer func() { pass.Report = report }()
		return run(pass)
	}
	return &c
}
