// Package passtest runs a recorded fixture through the analyzer with a chosen configuration, as
// `stormwatch analyze` does, for the detectors' own tests (policies, settings, severities).
package passtest
