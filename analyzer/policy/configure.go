package policy

import (
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

// ExtraKey is the analyzer.Settings.Extra key under which Configure leaves the *Policy for the
// policy-aware detectors (analyzer/passes/internal/audit reads it).
const ExtraKey = "policy"

// WindowKey is the Settings.Extra key holding the live sliding window (a time.Duration) of the
// cross-trace detectors. It is absent offline, where they see the whole input.
const WindowKey = "policy.window"

// Mode says how the analyzer is driven, which decides whether the cross-trace detectors look at a
// sliding window (live) or at everything (offline).
type Mode uint8

const (
	// Offline: `stormwatch analyze`; the windowed detectors see the whole input once.
	Offline Mode = iota
	// Live: the collector; the windowed detectors see the last Window of operations held.
	Live
)

// Configure applies p to cfg. Call it after cfg.Detectors is filled (suite.Default()):
//   - detectors the policy turns off (enabled: false) are removed;
//   - a severity the policy sets replaces the detector's own on every finding it reports;
//   - each class's maxFanout becomes the fan-out limit of its operations (unbounded-fanout);
//   - p itself is put in cfg.Settings.Extra for the detectors that read the class rules;
//   - in Live mode the window bounds the cross-trace detectors.
//
// A nil p configures the built-in defaults.
func Configure(cfg *analyzer.Config, p *Policy, mode Mode) {
	if p == nil {
		p = Default()
	}
	kept := cfg.Detectors[:0:0]
	for _, d := range cfg.Detectors {
		if d == nil || !p.Enabled(d.Name) {
			continue
		}
		if sev := p.Detector(d.Name).Severity; sev.Set {
			d = withSeverity(d, sev.Value)
		}
		kept = append(kept, d)
	}
	cfg.Detectors = kept
	if cfg.Settings.Extra == nil {
		cfg.Settings.Extra = map[string]any{}
	}
	cfg.Settings.Extra[ExtraKey] = p
	if mode == Live {
		cfg.Settings.Extra[WindowKey] = p.Window.Value
	} else {
		delete(cfg.Settings.Extra, WindowKey)
	}
	if len(p.Classes) > 0 || p.Defaults.MaxFanout.Set {
		prev := cfg.Settings.MaxFanoutFor
		cfg.Settings.MaxFanoutFor = func(op *analyzer.Operation) int {
			c := p.Lookup(Key{Operation: op.Name, Service: op.Caller, Dependency: op.Dependency, DependencyService: op.DependencyService})
			if c.MaxFanout.Set {
				return c.MaxFanout.Value
			}
			if prev != nil {
				return prev(op)
			}
			return 0
		}
	}
}

// Window is the live sliding window set by Configure, or 0 offline (everything).
func Window(s analyzer.Settings) time.Duration {
	w, _ := s.Extra[WindowKey].(time.Duration)
	return w
}

// withSeverity is a copy of d whose findings all carry sev: the policy, as the driver, decides
// severity (STYLE.md: detectors suggest, the driver decides).
func withSeverity(d *analyzer.Detector, text string) *analyzer.Detector {
	sev, err := analyzer.ParseSeverity(text)
	if err != nil {
		return d // Parse validated it; keep the detector's own rather than guess
	}
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
