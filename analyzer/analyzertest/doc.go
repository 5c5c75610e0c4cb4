// Package analyzertest holds helpers for tests and benchmarks of the analyzer and its callers: a
// synthetic workload of realistic multi-layer traces, generated cheaply enough to measure the
// analyzer at a million spans without holding a second copy of them, and traces shaped like the
// end-to-end benchmark's payload (PayloadTrace: ten attributes a span, an id in every URL) for the memory and
// packing benchmarks.
package analyzertest
