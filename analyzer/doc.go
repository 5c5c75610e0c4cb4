// Package analyzer is what a detector author and a report reader work with: the model a detector
// reads (Trace, Operation, Attempt), what it writes (Finding and its Evidence) and what a report
// is made of (Report, DependencyStats, FindingGroup, LeafChain); Detector, Pass and Validate,
// after golang.org/x/tools/go/analysis; and the settings detectors read, a detector's own
// (Detector.Settings, through SettingsOf) and the run's (RunSettings). The detectors themselves
// are under analyzer/passes, listed by analyzer/suite; docs/detectors.md lists them.
//
// It does no analysis of its own. The engine (analyzer/engine) rebuilds logical operations from
// attempt spans and runs the detectors over them. What it writes into a Trace, an Operation and an
// Attempt besides their exported fields (a trace's index, an operation's intent key) lives in
// unexported fields of analyzer/internal/build's types, which only the engine imports (see
// build.go): nothing this package exports writes the model, so no detector can change what the
// detectors after it read. This package never imports the engine, and the detectors do not
// either: they see only a Pass.
package analyzer
