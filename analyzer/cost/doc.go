// Package cost measures what retries cost: for each request (a trace's root span) its critical
// path and the time on it spent in failed attempts that were retried, in the pauses between
// attempts, in hedges' losing copies and in the rest; the calls retries added; the work callees
// did after their callers gave up; and, over many requests, the same per entry point and per
// dependency, with rates scaled by the sampling probability the spans carry. docs/costs.md says
// how each figure is made and what it cannot know.
//
// It reads the analyzer's model (Trace, Operation) and does no I/O: the engine measures each
// trace as it analyzes it and keeps the figures in a Book; retry-amplification quotes a request's
// added latency as evidence.
package cost
