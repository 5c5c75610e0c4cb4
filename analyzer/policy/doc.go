// Package policy is stormwatch's retry policy as code: a YAML file that says, per class of logical
// operation, who owns the retry loop, which outcomes may be retried, how many attempts fit in which
// deadline, how the pauses grow, how wide an attempt may fan out, what share of the traffic retries
// may add, and what happens when the attempts run out (the checklist of
// docs/principles.md#intents-and-attempts).
//
// A class is matched by resilience.operation.name, by caller service and dependency, or by route;
// fields a class leaves out come from the file's defaults. Every value keeps the file:line:col it
// came from, so a finding can name the rule a trace broke and where that rule is written.
//
// The detectors section names the detectors Load is given, and each takes the settings that
// detector declares (analyzer.Detector.Settings): this package holds no list of detectors or of
// their settings, so a detector is configurable as soon as it declares them.
//
// Load rejects an unknown key, a value of the wrong type and an impossible value (maxAttempts 0, a
// negative deadline, a backoff cap below its base, a ratio outside [0,1], a detector setting
// outside its bounds) with file:line:col and what is wrong, all errors at once. Configure applies a
// loaded policy to a suite of detectors and their run settings (the detectors it turns off, their
// settings and severities, the live window). Neither the analyzer nor its engine imports this
// package, so the detectors and the commands can; it imports no engine, so the detectors stay
// free of it.
package policy
