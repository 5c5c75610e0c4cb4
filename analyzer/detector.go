package analyzer

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// Scope says what a detector looks at.
type Scope uint8

const (
	// ScopeTrace detectors run once per analyzed trace (again when late spans re-analyze it).
	ScopeTrace Scope = iota
	// ScopeWindow detectors need many operations: offline they run once over everything in Flush;
	// live they run every engine.Config.WindowInterval over the engine's window, the operations
	// of the traces analyzed that ended within the policy's window (kept as each trace is
	// analyzed, so a run never reads the store). Pass.Trace is nil for them and Pass.Operations
	// spans many traces, in the order the store lists them (least recently updated first): break
	// ties by it, as the first of equals, never by a map's order.
	ScopeWindow
)

// Detector is one check, modelled on golang.org/x/tools/go/analysis.Analyzer: a plain value that
// names itself, documents itself and reports through its Pass. Detectors never print, never keep
// state between runs and never see the engine that runs them (they do not import it); the suite
// (analyzer/suite) lists them.
//
// docs/detectors.md, "Adding a detector", lists the steps. A threshold the detector needs
// is one of its Settings, never a constant a user cannot reach.
type Detector struct {
	// Name is the stable identifier in reports and policies: lowercase words joined by '-'.
	Name string
	// Title is one line for tables and the TUI.
	Title string
	// Doc says what the detector proves, its evidence keys and its false positives.
	Doc string
	// Scope is ScopeTrace (the default) or ScopeWindow.
	Scope Scope
	// Severity is the default severity; a Run may report higher or lower with a reason (e.g.
	// retry-amplification is critical from the critical factor on).
	Severity Severity
	// Settings are the detector's own tunable thresholds, nil when it has none: a pointer to a
	// struct of the detector's package holding the defaults. A policy file sets them by name under
	// detectors.<Name> (docs/policy.md), and policy.Configure gives the run a copy of the
	// detector carrying the configured values; Run reads them with SettingsOf, never through
	// this field of the shared value. Each exported field is one setting, described by its tags:
	//
	//	policy:"key"  its name in a policy file (required)
	//	doc:"..."     one line for the docs (required)
	//	min:"1"       optional bounds on numbers and durations, inclusive, written as in
	//	max:"1"       a policy file: 1, 0.5, 10ms
	//
	// Its type is time.Duration (written with a unit), int, float64, bool or string. The bounds
	// are the one validation: a policy outside them is refused at load time with the file, line
	// and column, and the defaults must lie within them (Validate). For example:
	//
	//	type Settings struct {
	//		MinPause time.Duration `policy:"minPause" doc:"a retry pause at or under it counts as none" min:"0s"`
	//	}
	//
	//	var Detector = &analyzer.Detector{..., Settings: &Settings{MinPause: time.Millisecond}}
	//
	// Thresholds that are the same for every detector of a run (the clock skew) are not here but
	// in RunSettings.
	Settings any
	// CarriedAttrs are the attribute keys Run asks pass.Trace.CarriesAttr about, nil for none.
	// The engine indexes whether a trace carries each key its detectors declare in the one pass it
	// makes over every attribute anyway, so that the question costs no scan of the trace's spans
	// per detector; CarriesAttr answers an undeclared key too, by that scan.
	CarriedAttrs []string
	// Run inspects the pass and reports findings through pass.Report.
	Run func(pass *Pass) error
}

func (d *Detector) String() string { return d.Name }

// Pass is everything a detector may read, and the only way out (Report).
type Pass struct {
	Detector *Detector
	// Trace is the assembled trace (nil for ScopeWindow): spans, parent/child index, the
	// operation each CLIENT span belongs to.
	Trace *Trace
	// Operations are the trace's logical operations, each with its chain of Parent operations up
	// to the root request. For ScopeWindow they are the window's, of many traces, in the order the
	// store lists them.
	//
	// Trace and Operations are the engine's, lent for the pass: a detector keeps no state between
	// runs, so it needs nothing of them afterwards, and what it reports is copied (see Report).
	Operations []*Operation
	// RunSettings are the values every detector of the run shares: the clock skew, the policy, the
	// live window. The detector's own thresholds are not here: read them with SettingsOf.
	RunSettings RunSettings
	// Report records one finding. Detector and TraceID are filled in when empty; Severity is
	// taken as given (start from pass.Detector.Severity). The finding may carry anything taken
	// from the pass - a span's name, an attempt's Origins as evidence - because Report keeps a
	// copy of it (Finding.Clone), not the memory the next analysis reuses; changing the
	// finding's slices or evidence after Report changes nothing.
	Report func(Finding)
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// Validate checks a suite: every detector non-nil, with a valid unique name, a title, a doc, a Run
// and well-declared Settings (see SettingFields). Tests of every suite call it; engine.New does
// not, so a caller's typo shows up in its tests.
func Validate(detectors []*Detector) error {
	var errs []error
	seen := map[string]bool{}
	for i, d := range detectors {
		if d == nil {
			errs = append(errs, fmt.Errorf("detector %d is nil", i))
			continue
		}
		if !nameRE.MatchString(d.Name) {
			errs = append(errs, fmt.Errorf("detector %d: invalid name %q (want lowercase words joined by '-')", i, d.Name))
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("detector %q listed twice", d.Name))
		}
		seen[d.Name] = true
		if d.Title == "" {
			errs = append(errs, fmt.Errorf("detector %q has no title", d.Name))
		}
		if len(d.Doc) < 20 {
			errs = append(errs, fmt.Errorf("detector %q has no doc", d.Name))
		}
		if d.Run == nil {
			errs = append(errs, fmt.Errorf("detector %q has no Run", d.Name))
		}
		if _, err := SettingFields(d.Settings); err != nil {
			errs = append(errs, fmt.Errorf("detector %q: %w", d.Name, err))
		}
		for j, k := range d.CarriedAttrs {
			if k == "" || slices.Contains(d.CarriedAttrs[:j], k) {
				errs = append(errs, fmt.Errorf("detector %q: carried attribute %q is empty or declared twice", d.Name, k))
			}
		}
		if d.Scope > ScopeWindow {
			errs = append(errs, fmt.Errorf("detector %q has unknown scope %d", d.Name, d.Scope))
		}
	}
	return errors.Join(errs...)
}
