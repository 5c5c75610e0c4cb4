// Package analyzer is what a detector author and a report reader work with: the model a detector
// reads (Trace, Operation, Attempt), what it writes (Finding and its Evidence) and what a report
// is made of (Report, DependencyStats, FindingGroup, LeafChain); Detector, Pass and Validate,
// after golang.org/x/tools/go/analysis; and the settings detectors read, a detector's own
// (Detector.Settings, through SettingsOf) and the run's (RunSettings). The detectors themselves
// are under analyzer/passes, listed by analyzer/suite; docs/detectors.md lists them.
//
// It does no analysis of its own. The engine (analyzer/engine) rebuilds logical operations from
// attempt spans and runs the detectors over them; it builds each Trace and its Operations through
// the few exported names of build.go, which are for it alone. This package never imports the
// engine, and the detectors do not either: they see only a Pass.
package analyzer
